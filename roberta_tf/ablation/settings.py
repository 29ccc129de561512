"""`StudySettings`: what every arm x seed of a study takes from roberta_tf.ablate's flags (the
model size, the warmup share, extra train flags, the downstream problem, minimal pairs) and the
vocabulary size of its prep, declared once: the binary's flags of these options are made from
the fields (options.define_flags), and the object is built once in ablate's main and handed
whole to ablation/runner.py. Its fields, as JSON, are study.json's keys beside "study",
"corpus", "arms" and "corpus_mb" (the names of the flags, as they were recorded before).

The flags that shape the study itself (--study, --steps, --base_batch, --base_lr, --minutes,
--arm, --seeds, --corpus, --work_dir, --parallel, --overwrite) stay declared in ablate.py: their
defaults depend on the study (--steps unset, --base_batch given or not) and --arm repeats, which
options.define_flags does not express. TensorFlow-free.
"""

from __future__ import annotations

import dataclasses
import os

from roberta_tf.common.options import NON_NEGATIVE, Check, option

# The default downstream problem: this checkout's own test data.
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # local-only: the package
PROBLEM_DIR = os.path.join(os.path.dirname(_PACKAGE), "tests", "testdata", "docs_sections")

_AT_LEAST_1 = Check(lambda v: v >= 1, "--{name}={value}: must be >= 1")


@dataclasses.dataclass(frozen=True)
class StudySettings:
  """What each arm's commands take from the flags (see the module docstring)."""
  config: str = option("small", "Model size preset.")
  warmup_fraction: float = option(
      0.25, "Warmup steps as a fraction of each arm's steps.",
      check=Check(lambda v: 0 <= v < 1, "--{name}={value}: must be in [0, 1)"))
  vocab_size: int = option(
      8000, "Byte-level BPE vocabulary trained on the corpus.", check=_AT_LEAST_1)
  train_flags: tuple[str, ...] = option(
      (), "Extra roberta_tf.train flags for every arm, e.g. "
      "--train_flags=--precision=mixed_bfloat16.")
  task_train: str = option(os.path.join(PROBLEM_DIR, "train.jsonl"), "Downstream training table.")
  task_dev: str = option(os.path.join(PROBLEM_DIR, "dev.jsonl"), "Downstream dev table.")
  task_text_field: str = option("text", "Downstream text field.")
  task_label_field: str = option("label", "Downstream label field.")
  task_epochs: int = option(3, "Fine-tuning epochs.", check=_AT_LEAST_1)
  task_learning_rate: float = option(
      1e-4, "Fine-tuning peak learning rate.",
      check=Check(lambda v: v > 0, "--{name}={value}: must be > 0"))
  minimal_pairs: str = option(
      "", "Also score every arm on BLiMP-format minimal pairs (evaluate --minimal_pairs: a "
      ".jsonl[.gz] file or BLiMP's data/ directory); the table gains a BLiMP column.")
  pairs_per_paradigm: int = option(
      0, "--minimal_pairs: a fixed sample of at most this many pairs per paradigm (evaluate "
      "--pairs_per_paradigm); 0: all.", check=NON_NEGATIVE)
