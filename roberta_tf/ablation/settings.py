"""The options of roberta_tf.ablate, declared once in two objects that its flags are made from
(options.define_flags) and that are built once in its main and handed whole to
ablation/runner.py:

- `StudySettings`: what every arm x seed of a study takes (the model size, the warmup share,
  extra train flags, the downstream problem, minimal pairs) and the vocabulary size of its
  prep. Its fields, as JSON, are study.json's keys beside "study", "corpus", "arms" and
  "corpus_mb" (the names of the flags, as they were recorded before): a rerun with other
  settings is refused.
- `StudyPlan`: which study, its budget (--steps, --base_batch, --base_lr, --minutes), the arms
  and seeds to run, the corpus, the work dir and how many runs at once. A rerun may change
  these (more seeds add runs). --steps, --base_batch and --base_lr have per-study defaults
  (STUDY_DEFAULTS), applied by `StudyPlan.resolved` to what was not given.

TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
import os

from roberta_tf.common.options import FRACTION, NON_NEGATIVE, POSITIVE, Range, option

# The default downstream problem, shipped with the package (package data): docs_sections, 60
# training and 30 dev paragraphs for each of 5 Python-docs sections (finetuning/docs_sections.py
# made it; tests/testdata/docs_sections links to the same files).
PROBLEM_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)),  # local-only: the package
                           "data", "docs_sections")

STUDIES = ("masking", "input_format", "batch_size", "recipe", "modern")
# The base arm's size where a study's differs from the flags' defaults (steps: 400).
# input_format: 400 updates at batch 16 get the small model off the unigram plateau; 200 at 32
# did not, nor did 400 at 12 for one arm (its sentence-pair arm reads ~5x the sequences, padded
# to 128 slots). batch_size: the paper's base row (bsz 256, lr 1e-4), scaled down.
STUDY_DEFAULTS = {"input_format": {"base_batch": 16},
                  "batch_size": {"base_batch": 8, "base_lr": 1e-4, "steps": 1024}}


@dataclasses.dataclass(frozen=True)
class StudySettings:
  """What each arm's commands take from the flags (see the module docstring)."""
  config: str = option("small", "Model size preset.")
  warmup_fraction: float = option(
      0.25, "Warmup steps as a fraction of each arm's steps.",
      check=FRACTION)
  vocab_size: int = option(
      8000, "Byte-level BPE vocabulary trained on the corpus.", check=POSITIVE)
  train_flags: tuple[str, ...] = option(
      (), "Extra roberta_tf.train flags for every arm, e.g. "
      "--train_flags=--precision=mixed_bfloat16.")
  task_train: str = option(
      os.path.join(PROBLEM_DIR, "train.jsonl"), "Downstream training table.", path=True)
  task_dev: str = option(os.path.join(PROBLEM_DIR, "dev.jsonl"), "Downstream dev table.",
                         path=True)
  task_text_field: str = option("text", "Downstream text field.")
  task_label_field: str = option("label", "Downstream label field.")
  task_epochs: int = option(
      3, "Fine-tuning epochs; 0: no downstream problem (its column shows '-').",
      check=NON_NEGATIVE)
  task_learning_rate: float = option(
      1e-4, "Fine-tuning peak learning rate.",
      check=POSITIVE)
  minimal_pairs: str = option(
      "", "Also score every arm on BLiMP-format minimal pairs (evaluate --minimal_pairs: a "
      ".jsonl[.gz] file or BLiMP's data/ directory); the table gains a BLiMP column.",
      path=True)
  pairs_per_paradigm: int = option(
      0, "--minimal_pairs: a fixed sample of at most this many pairs per paradigm (evaluate "
      "--pairs_per_paradigm); 0: all.", check=NON_NEGATIVE)


@dataclasses.dataclass(frozen=True)
class StudyPlan:
  """Which study and how much of it (see the module docstring)."""
  study: str = option(
      help="The ablation: masking (Table 1), input_format (Table 2: SEGMENT-PAIR / "
      "SENTENCE-PAIR with NSP, FULL-SENTENCES, DOC-SENTENCES), batch_size (Table 3), "
      "recipe (the budget recipe's choices one at a time, at equal wall clock: --minutes), "
      "modern (flags/quickstart.flags against the modern recipe's choices: the ModernBERT "
      "family, mask rate, learning rate, batch, model size; at equal wall clock).",
      choices=STUDIES)
  work_dir: str = option(
      help="Where vocab, shards, runs and results go (reused: finished runs are kept).",
      path=True)
  corpus: str = option(
      "stdlib", "Pretraining corpus: files, globs, directories or 'stdlib' (the running "
      "Python's documentation, the embedded default).", path=True)
  arm: tuple[str, ...] = option(
      (), "Run only this arm of the study (its name in results.md; repeat the flag for "
      "several; default: every arm).", repeated=True)
  extra_arm: tuple[str, ...] = option(
      (), "--study=recipe|modern: an arm of your own, 'LABEL: --flag=value ...' (train flags on "
      "the study's base recipe; --batch_size and --learning_rate set its batch and peak LR); "
      "repeat the flag for several.", repeated=True)
  paired: bool = option(
      False, "Run every arm beside its own run of the first arm (the reference), the two "
      "started together and both finished before the next pair: at equal wall clock on a "
      "shared machine both see the same load. The table gains each arm's perplexity over the "
      "reference's beside it. Use --parallel=1 (the pairs are the parallelism).")
  records: str = option(
      "", "Also append one JSON line per finished run to this file (e.g. "
      "benchmarks/records/modern_budget.jsonl): the study, corpus, arm and its train flags, "
      "seed, the arm it ran beside, steps, perplexity, BLiMP, the load average, the CPU.",
      path=True)
  seeds: tuple[int, ...] = option(
      (0,), "Seeds: every arm runs once per seed; the table shows mean ± half the range over "
      "them (one seed keeps each default study within ~30 min on 2 CPU cores; rerunning with "
      "more seeds adds their runs).", check=Range(bool, "non-empty"))
  steps: int | None = option(
      None, "Optimizer updates of the base arm (the token budget is base_batch x steps for "
      "every arm). Default: 400 (masking, input_format), 1024 (batch_size).",
      check=POSITIVE)
  base_batch: int = option(
      32, "Batch of the base arm (default 32; input_format: 16, its shorter-sequence arms "
      "scale it up; batch_size: 8, scaled 1x, 8x, 32x).", check=POSITIVE)
  base_lr: float = option(
      1e-3, "Peak LR of the base arm (batch_size default 1e-4, the paper's for its smallest "
      "batch; scaled x7 and x10 with the batch).",
      check=POSITIVE)
  minutes: float = option(
      5.0, "--study=recipe: each arm's wall-clock budget in minutes (train --train_minutes).")
  parallel: int = option(
      1, "Arm x seed runs at once (each arm then trains beside another; ~2x the wall time of "
      "each run on 2 cores, about half the total).", check=POSITIVE)
  overwrite: bool = option(
      False, "Start the study over: delete what an earlier study wrote in --work_dir (its "
      "settings, corpus subset, vocab, shards, runs, results).")

  def resolved(self, given: frozenset[str] | set[str]) -> StudyPlan:
    """This plan with its study's defaults (STUDY_DEFAULTS; steps 400) for --steps,
    --base_batch and --base_lr where they are not in `given` (the flags on the command line)."""
    defaults = {"steps": 400, **STUDY_DEFAULTS.get(self.study, {})}
    return dataclasses.replace(self, **{name: value for name, value in defaults.items()
                                        if name not in given and
                                        (name != "steps" or self.steps is None)})
