"""The paper's ablations as studies: arms that differ in one choice, at one token budget.

A study is a list of `Arm`s plus the corpus subset they share. Every arm of a study sees the
same number of training tokens (batch x steps), the same shards and seeds, and is evaluated on
the same fixed-mask held-out set, so the table compares one choice at a time:

- masking (paper Table 1): dynamic masking against BERT's static masking. The paper trained
  40 epochs over 10 static copies (each mask seen 4 times); at small scale the study keeps that
  ratio: a corpus subset read ~8 times, 2 static copies.
- batch_size (paper Table 3): batch x k at equal tokens, steps / k, the learning rate scaled as
  in the paper's table (bsz 256 / lr 1e-4 / 1M steps; 2K / 7e-4 / 125K; 8K / 1e-3 / 31K), i.e.
  k = 1, 8, 32 with lr x 1, 7, 10. Gradient accumulation gives the big batches.
- input_format (paper Table 2) needs the SEGMENT-PAIR / SENTENCE-PAIR packings with NSP, which
  are not built yet: the study is listed and refused with that reason.
"""

from __future__ import annotations

import dataclasses

MICRO_BATCH = 32  # sequences per forward/backward: bigger batches accumulate


@dataclasses.dataclass(frozen=True)
class Arm:
  """One training run of a study (repeated for each seed).

  Attributes:
    name: row label in results.md, also the directory name (slug).
    batch_size: global sequences per optimizer update.
    train_steps: optimizer updates (batch_size x train_steps is the study's token budget).
    learning_rate: peak learning rate.
    flags: further `roberta_tf.train` flags (e.g. --masking=static).
  """
  name: str
  batch_size: int
  train_steps: int
  learning_rate: float
  flags: tuple[str, ...] = ()

  @property
  def slug(self) -> str:
    return "".join(c if c.isalnum() else "_" for c in self.name).strip("_")

  def train_flags(self, warmup_fraction: float) -> list[str]:
    accum = max(1, self.batch_size // MICRO_BATCH)
    return [f"--batch_size={self.batch_size}", f"--grad_accum_steps={accum}",
            f"--train_steps={self.train_steps}", f"--learning_rate={self.learning_rate}",
            f"--warmup_steps={max(1, round(self.train_steps * warmup_fraction))}",
            f"--eval_every={max(self.train_steps // 8, 1)}", *self.flags]


@dataclasses.dataclass(frozen=True)
class Study:
  """Arms plus what they share.

  Attributes:
    arms: the runs compared.
    corpus_mb: MB of the corpus used (0: all of it).
  """
  arms: tuple[Arm, ...]
  corpus_mb: float


class StudyError(ValueError):
  """A study that cannot run (unknown, or not available yet)."""


# (batch multiplier, learning-rate multiplier): the paper's Table 3 rows, relative to its first.
PAPER_BATCH_SCALING = ((1, 1.0), (8, 7.0), (32, 10.0))


def build(name: str, steps: int, base_batch: int, base_lr: float) -> Study:
  """The study `name` with `steps` optimizer updates for its smallest-batch arm.

  Args:
    name: masking | batch_size | input_format.
    steps: updates of the base arm (the token budget is base_batch x steps for every arm).
    base_batch: batch of the base arm.
    base_lr: peak learning rate of the base arm.
  Raises:
    StudyError: unknown study, or one whose data formats are not built yet.
  """
  if name == "masking":
    return Study(arms=(
        Arm("dynamic", base_batch, steps, base_lr, ("--masking=dynamic",)),
        Arm("static, 2 copies", base_batch, steps, base_lr,
            ("--masking=static", "--dupe_factor=2")),
    ), corpus_mb=_mb_for_epochs(steps * base_batch, epochs=8))
  if name == "batch_size":
    arms = []
    for k, lr_scale in PAPER_BATCH_SCALING:
      arms.append(Arm(f"batch {base_batch * k}, lr {base_lr * lr_scale:g}", base_batch * k,
                      max(steps // k, 1), base_lr * lr_scale))
    return Study(arms=tuple(arms), corpus_mb=0)
  if name == "input_format":
    raise StudyError("--study=input_format needs the SEGMENT-PAIR / SENTENCE-PAIR packings and "
                     "the NSP head, which are not built yet (data_prep offers FULL-SENTENCES "
                     "and DOC-SENTENCES only)")
  raise StudyError(f"--study={name}: unknown; choose masking, batch_size or input_format")


def _mb_for_epochs(sequences: int, epochs: int, seq_len: int = 128,
                   bytes_per_token: float = 4.0) -> float:
  """MB of text that `sequences` sequences of `seq_len` tokens read `epochs` times (at least
  50 KB: enough documents for a held-out split)."""
  return max(0.05, round(sequences * seq_len * bytes_per_token / epochs / 1e6, 3))
