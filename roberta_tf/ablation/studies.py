"""The paper's ablations as studies: arms that differ in one choice, at one token budget.

A study is a list of `Arm`s plus the corpus subset they share. Every arm of a study sees the
same number of training tokens (batch x steps; input_format: real tokens, see below), the same
corpus, shards (of its packing) and seeds, and is evaluated on the same fixed-mask held-out set
(the FULL-SENTENCES validation split), so the table compares one choice at a time:

- masking (paper Table 1): dynamic masking against BERT's static masking. The paper trained
  40 epochs over 10 static copies (each mask seen 4 times); at small scale the study keeps that
  ratio: a corpus subset read ~8 times, 2 static copies.
- batch_size (paper Table 3): batch x k at equal tokens, steps / k, the learning rate scaled as
  in the paper's table (bsz 256 / lr 1e-4 / 1M steps; 2K / 7e-4 / 125K; 8K / 1e-3 / 31K), i.e.
  k = 1, 8, 32 with lr x 1, 7, 10. Gradient accumulation gives the big batches.
- recipe (the budget recipe, issue 38): RoBERTa's faithful recipe against each budget choice
  alone (pre-LN, no linear biases, a GEGLU feed-forward, 40% masking, pre-LN at twice the
  peak rate) and all of them together, each at the SAME WALL CLOCK (`train --train_minutes`:
  the warmup and decay follow the budget's elapsed share, the warmup's share is
  --warmup_fraction), not the same tokens: a cheaper step reads more data in the budget.
- modern (issue 62): flags/quickstart.flags (RoBERTa small, post-LN, 15% masking, batch 16,
  peak LR 1e-3, a 20% warmup) against the modern choices (arm_specs.MODERN_ARMS: the ModernBERT
  family, the mask rate, the learning rate, the batch, the model's size, ...), at the SAME WALL
  CLOCK as recipe; `ablate --extra_arm='LABEL: --flag=value ...'` adds arms to it (or to
  recipe).
- input_format (paper Table 2): SEGMENT-PAIR + NSP, SENTENCE-PAIR + NSP, FULL-SENTENCES and
  DOC-SENTENCES, each on shards of its own packing (data_prep/packing.py, pair_packing.py) from
  the same corpus subset. As in the paper, arms whose sequences are shorter get a bigger batch so
  that every update sees about as many real tokens as FULL-SENTENCES's (the runner sets it from
  the shards' tokens per sequence; the paper used the same device for SENTENCE-PAIR and a
  dynamic batch for DOC-SENTENCES).
"""

from __future__ import annotations

import dataclasses
import math

from roberta_tf.ablation import arm_specs
from roberta_tf.data import packings

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
    packing: the shards' packing (data_prep --packing); the arms of one packing share shards.
  """
  name: str
  batch_size: int
  train_steps: int
  learning_rate: float
  flags: tuple[str, ...] = ()
  packing: str = packings.FULL_SENTENCES
  warmup_fraction: float | None = None

  @property
  def slug(self) -> str:
    return "".join(c if c.isalnum() else "_" for c in self.name).strip("_")

  @property
  def grad_accum_steps(self) -> int:
    """Micro-batches per update: the fewest that split the batch evenly into micro-batches of
    at most MICRO_BATCH sequences (`equalize_tokens` makes batches multiples of
    ceil(batch / MICRO_BATCH), which is then the answer)."""
    least = max(1, math.ceil(self.batch_size / MICRO_BATCH))
    return next(d for d in range(least, self.batch_size + 1) if self.batch_size % d == 0)

  def train_flags(self, warmup_fraction: float) -> list[str]:
    """`roberta_tf.train` flags; the arm's own warmup_fraction, when set, wins over the
    study's."""
    accum = self.grad_accum_steps
    if self.warmup_fraction is not None:
      warmup_fraction = self.warmup_fraction
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
    equal_tokens: scale each arm's batch so that an update holds about as many real tokens as
      the first arm's (`equalize_tokens`, once the shards exist).
  """
  arms: tuple[Arm, ...]
  corpus_mb: float
  equal_tokens: bool = False


class StudyError(ValueError):
  """A study that cannot run (unknown, or not available yet)."""


# (batch multiplier, learning-rate multiplier): the paper's Table 3 rows, relative to its first.
PAPER_BATCH_SCALING = ((1, 1.0), (8, 7.0), (32, 10.0))


# The recipe study's arms: (label, train flags, learning-rate multiplier[, batch multiplier]).
RECIPE_ARMS = (
    ("faithful (post-LN, biases, GELU FFN, 15% masking)", (), 1.0),
    ("pre-LN", ("--model_option=pre_layer_norm=true",), 1.0),
    ("pre-LN, 2x peak LR", ("--model_option=pre_layer_norm=true",), 2.0),
    ("no linear biases", ("--model_option=use_bias=false",), 1.0),
    ("GEGLU feed-forward", ("--model_option=gated_ffn=true",), 1.0),
    ("40% masking", ("--mask_rate=0.4",), 1.0),
    # Cramming's batch ramp starts small: at a budget of minutes, twice the updates of half
    # the size (the 4th item: the batch's multiplier).
    ("half the batch (2x the updates)", (), 1.0, 0.5),
    ("all of them (budget)", ("--model_option=pre_layer_norm=true",
                              "--model_option=use_bias=false",
                              "--model_option=gated_ffn=true", "--mask_rate=0.4"), 2.0),
)


def _batch_scale(extra: list) -> float:
  return extra[0] if extra else 1.0


# The modern study's base: flags/quickstart.flags' batch, peak LR, nominal steps and warmup share
# (--config=small is the runner's default --config).
QUICKSTART = {"batch_size": 16, "learning_rate": 1e-3, "train_steps": 2000, "warmup": 0.2}
TIMED_STUDIES = ("recipe", "modern")


def timed_arm(spec: str, minutes: float, batch: int, steps: int, lr: float,
              warmup_fraction: float | None = None) -> Arm:
  """The arm an arm spec (arm_specs.parse) describes on a base of `batch`, nominal `steps` and
  peak `lr`, trained `minutes` of wall clock without dropout; its --batch_size scales the nominal
  steps inversely (the same warmup share, as many evals)."""
  label, sizes, flags = arm_specs.parse(spec)
  arm_batch = int(sizes.get("batch_size", batch))
  return Arm(label, arm_batch, max(1, round(steps * batch / arm_batch)),
             float(sizes.get("learning_rate", lr)),
             (f"--train_minutes={minutes:g}", "--dropout=0.0", *flags),
             warmup_fraction=warmup_fraction)


def build(name: str, steps: int, base_batch: int, base_lr: float, minutes: float = 0.0,
          extra_arms: tuple[str, ...] = ()) -> Study:
  """The study `name` with `steps` optimizer updates for its smallest-batch arm.

  Args:
    name: masking | batch_size | input_format | recipe | modern.
    steps: updates of the base arm (the token budget is base_batch x steps for every arm);
      recipe: only sets the warmup's share and the eval cadence (the clock ends each run).
    base_batch: batch of the base arm.
    base_lr: peak learning rate of the base arm.
    minutes: recipe, modern: each arm's wall-clock budget (train --train_minutes).
    extra_arms: recipe, modern: arms added after the study's own, as arm specs
      (arm_specs.parse) on the study's base.
  Raises:
    StudyError: unknown study, recipe or modern without minutes, extra arms of another study,
      a malformed extra arm or two arms of one name.
  """
  if name in TIMED_STUDIES:
    if minutes <= 0:
      raise StudyError(f"--study={name} compares arms at equal wall clock: give --minutes > 0")
    try:
      study = _timed_study(name, steps, base_batch, base_lr, minutes, extra_arms)
    except arm_specs.ArmSpecError as e:
      raise StudyError(f"--extra_arm: {e}") from None
    names = [a.name for a in study.arms]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
      raise StudyError(f"--extra_arm: two arms named {twice[0]!r}")
    return study
  if extra_arms:
    raise StudyError(f"--extra_arm: only the equal-time studies ({', '.join(TIMED_STUDIES)}) "
                     f"take extra arms, not --study={name}")
  return _token_study(name, steps, base_batch, base_lr)


def _timed_study(name: str, steps: int, base_batch: int, base_lr: float, minutes: float,
                 extra_arms: tuple[str, ...]) -> Study:
  if name == "modern":  # the quickstart's recipe is the base, whatever --base_batch says
    q = QUICKSTART
    return Study(arms=tuple(
        timed_arm(spec, minutes, q["batch_size"], q["train_steps"], q["learning_rate"],
                  q["warmup"]) for spec in (*arm_specs.MODERN_ARMS, *extra_arms)), corpus_mb=0)
  extra = tuple(timed_arm(spec, minutes, base_batch, steps, base_lr) for spec in extra_arms)
  return Study(arms=tuple(
        # No dropout in every arm, as in flags/quickstart.flags (the faithful arm is the
        # demo's recipe) and in Cramming's: at a budget of minutes nothing overfits.
        # A smaller batch's nominal steps grow with it: the same warmup share, as many evals.
        Arm(label, max(1, round(base_batch * _batch_scale(batch))),
            round(steps / _batch_scale(batch)), base_lr * scale,
            (f"--train_minutes={minutes:g}", "--dropout=0.0", *flags))
        for label, flags, scale, *batch in RECIPE_ARMS) + extra, corpus_mb=0)


def _token_study(name: str, steps: int, base_batch: int, base_lr: float) -> Study:
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
    # The paper's Table 2 rows; the reference arm (first) sets the tokens per update.
    arms = tuple(Arm(label, base_batch, steps, base_lr, packing=packing) for label, packing in (
        ("FULL-SENTENCES", packings.FULL_SENTENCES), ("DOC-SENTENCES", packings.DOC_SENTENCES),
        ("SEGMENT-PAIR + NSP", packings.SEGMENT_PAIR),
        ("SENTENCE-PAIR + NSP", packings.SENTENCE_PAIR)))
    return Study(arms=arms, corpus_mb=_mb_for_epochs(steps * base_batch, epochs=4),
                 equal_tokens=True)
  raise StudyError(f"--study={name}: unknown; choose masking, batch_size, input_format, recipe "
                   "or modern")


def _mb_for_epochs(sequences: int, epochs: int, seq_len: int = 128,
                   bytes_per_token: float = 4.0) -> float:
  """MB of text that `sequences` sequences of `seq_len` tokens read `epochs` times (at least
  50 KB: enough documents for a held-out split)."""
  return max(0.05, round(sequences * seq_len * bytes_per_token / epochs / 1e6, 3))


def equalize_tokens(study: Study, tokens_per_sequence: dict[str, float]) -> Study:
  """``study`` with each arm's batch scaled so an update holds about as many real tokens as the
  first arm's: batch x (first arm's tokens per sequence / this arm's), rounded to a multiple of
  its accumulation steps (ceil(batch / MICRO_BATCH)), so micro-batches are equal and at most
  MICRO_BATCH. Unchanged unless equal_tokens.

  Args:
    tokens_per_sequence: packing -> mean real tokens per training sequence (dataset_info).
  """
  if not study.equal_tokens:
    return study
  ref = study.arms[0]
  arms = []
  for arm in study.arms:
    exact = arm.batch_size * tokens_per_sequence[ref.packing] / tokens_per_sequence[arm.packing]
    accum = max(1, math.ceil(round(exact) / MICRO_BATCH))
    batch = accum * max(1, round(exact / accum))
    arms.append(dataclasses.replace(arm, batch_size=batch))
  return dataclasses.replace(study, arms=tuple(arms))


def select(study: Study, names: list[str]) -> Study:
  """`study` with only the arms named (in the study's order); all of them for an empty list.

  Raises StudyError naming an unknown arm and the study's arms.
  """
  if not names:
    return study
  known = [a.name for a in study.arms]
  unknown = [n for n in names if n not in known]
  if unknown:
    raise StudyError(f"--arm: no arm {unknown[0]!r} in this study (its arms: "
                     f"{', '.join(known)})")
  return dataclasses.replace(study, arms=tuple(a for a in study.arms if a.name in names))
