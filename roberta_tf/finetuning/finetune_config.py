"""The resolved configuration of a fine-tuning run (what `roberta_tf.finetune`'s flags become).

Defaults are the paper's fine-tuning recipe (Liu et al. 2019, Appendix C / Table 10): AdamW
with beta2 0.98 and epsilon 1e-6, weight decay 0.1, a 6% linear warmup then linear decay to 0,
at most 10 epochs, batch size {16, 32} x learning rate {1e-5, 2e-5, 3e-5} picked on the dev
set by the median over five seeds (sweep.py).
"""

from __future__ import annotations

import dataclasses
import os

from roberta_tf.finetuning import glue, task_types

PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
SQUAD_V2_NULL = ("classifier", "span_score")


@dataclasses.dataclass
class FinetuneConfig:
  """Everything a fine-tuning run needs. See roberta_tf/finetune.py for each flag's contract."""
  task: str
  model_dir: str
  train_file: str
  eval_file: str
  init_from: str = ""               # pretrained model dir; empty: random init (the baseline)
  config: str = "small"              # random init: preset name or RobertaConfig JSON path
  vocab_dir: str = ""                # vocab.json + merges.txt (default: init_from's)
  # GLUE presets (glue.py): they set task, train/eval files, fields, labels and the metric.
  glue_task: str = ""
  data_dir: str = ""                 # GLUE's folder of the task (train.tsv, dev.tsv, test.tsv)
  glue_diagnostic: str = ""          # MNLI: GLUE's diagnostic.tsv, predicted into AX.tsv
  predictions_dir: str = ""          # where the leaderboard TSVs go (default: model_dir)
  # Data.
  text_fields: tuple[str, ...] = ("text",)
  label_field: str = "label"
  labels: tuple[str, ...] = ()       # class names in id order; empty: sorted training labels
  max_seq_len: int = 0               # 0: init_from's maximum, else 512
  max_query_len: int = 64
  doc_stride: int = 128
  max_answer_len: int = 30
  n_best_size: int = 20
  null_score_threshold: float = 0.0
  squad_v2_null: str = "classifier"  # v2 "no answer": the paper's classifier, or BERT's span score
  skip_bad_examples: bool = False    # skip QA answers not at answer_start, GLUE rows with the
  #                                    wrong column count (else an error naming file:line)
  # Optimization.
  epochs: int = 10
  batch_size: int = 32               # global examples per update
  batch_sizes: tuple[int, ...] = ()  # a sweep over batch sizes (overrides batch_size)
  eval_batch_size: int = 0           # 0: batch_size
  learning_rate: float = 1e-5
  learning_rates: tuple[float, ...] = ()  # a sweep: one run per rate, the best dev run kept
  warmup_ratio: float = 0.06
  weight_decay: float = 0.1
  adam_beta1: float = 0.9
  adam_beta2: float = 0.98
  adam_epsilon: float = 1e-6
  dropout: float = -1.0              # < 0: the model config's
  metric: str = ""                   # dev metric for early stopping / the sweep; "": per task
  early_stopping_patience: int = 0   # epochs without dev improvement before stopping; 0: never
  seed: int = 0                      # the first seed; a run per seed seed .. seed + seeds - 1
  seeds: int = 5                     # random initializations per configuration (the paper: 5)
  batching: str = task_types.LENGTH_BUCKETS  # length_buckets | random | max_seq_len (bucketing.py)
  grad_accum_steps: int = 1          # micro-batches per update (batch_size must divide evenly)
  clip_norm: float = 0.0             # global-norm gradient clipping; 0: off (fairseq's default)
  max_bad_steps: int = 5             # non-finite steps in a row before the run stops
  # Execution.
  strategy: str = "auto"
  peer_timeout: int = 600            # multi_worker: seconds to wait for every worker to start
  cpu_replicas: int = 1
  precision: str = "float32"
  export_dir: str = ""
  overwrite: bool = False

  @property
  def sweep(self) -> tuple[float, ...]:
    """The learning rates swept."""
    return tuple(self.learning_rates) or (self.learning_rate,)

  @property
  def batch_size_sweep(self) -> tuple[int, ...]:
    return tuple(self.batch_sizes) or (self.batch_size,)

  @property
  def seed_list(self) -> tuple[int, ...]:
    return tuple(range(self.seed, self.seed + max(self.seeds, 0)))

  def validate(self) -> None:
    """Raises ValueError naming the flag for inconsistent settings."""
    checks = [
        (self.task in task_types.TASK_TYPES,
         f"--task={self.task!r}: expected one of {', '.join(task_types.TASK_TYPES)}"),
        (bool(self.model_dir), "--model_dir is required"),
        (bool(self.train_file), "--train_file is required"),
        (bool(self.eval_file), "--eval_file is required (the dev set picks the epoch and LR)"),
        (bool(self.init_from) or bool(self.vocab_dir),
         "--vocab_dir is required without --init_from (random init needs the vocabulary)"),
        (not self.init_from or os.path.isdir(self.init_from),
         f"--init_from={self.init_from!r} is not a directory"),
        (not self.glue_task or self.glue_task in glue.TASKS,
         f"--glue_task={self.glue_task!r}: expected one of {', '.join(glue.TASKS)}"),
        (self.epochs > 0, f"--epochs must be > 0, got {self.epochs}"),
        (all(b > 0 for b in self.batch_size_sweep),
         f"batch sizes must be > 0, got {self.batch_size_sweep}"),
        (len(set(self.batch_size_sweep)) == len(self.batch_size_sweep),
         f"--batch_sizes repeats a size: {self.batch_size_sweep}"),
        (self.grad_accum_steps > 0 and all(b % self.grad_accum_steps == 0
                                           for b in self.batch_size_sweep),
         f"batch sizes {list(self.batch_size_sweep)} must be multiples of --grad_accum_steps="
         f"{self.grad_accum_steps} (> 0)"),
        (self.seeds > 0, f"--seeds must be > 0 (runs per configuration), got {self.seeds}"),
        (self.batching in task_types.BATCHINGS,
         f"--batching={self.batching!r}: expected one of {', '.join(task_types.BATCHINGS)}"),
        (self.squad_v2_null in SQUAD_V2_NULL,
         f"--squad_v2_null={self.squad_v2_null!r}: expected one of {', '.join(SQUAD_V2_NULL)}"),
        (self.clip_norm >= 0, f"--clip_norm must be >= 0, got {self.clip_norm}"),
        (self.max_bad_steps > 0, f"--max_bad_steps must be > 0, got {self.max_bad_steps}"),
        (self.eval_batch_size >= 0, f"--eval_batch_size must be >= 0, got {self.eval_batch_size}"),
        (all(lr > 0 for lr in self.sweep), f"learning rates must be > 0, got {self.sweep}"),
        (len(set(self.sweep)) == len(self.sweep), f"--learning_rates repeats a rate: {self.sweep}"),
        (0 <= self.warmup_ratio < 1, f"--warmup_ratio must be in [0, 1), got {self.warmup_ratio}"),
        (self.max_seq_len == 0 or self.max_seq_len >= 8,
         f"--max_seq_len must be 0 (the model's) or >= 8, got {self.max_seq_len}"),
        (self.early_stopping_patience >= 0,
         f"--early_stopping_patience must be >= 0, got {self.early_stopping_patience}"),
        (self.precision in PRECISIONS,
         f"--precision={self.precision!r}: expected one of {', '.join(PRECISIONS)}"),
        (self.task not in (task_types.CLASSIFICATION, task_types.REGRESSION) or
         len(self.text_fields) in (1, 2),
         f"--text_fields must name one or two fields, got {list(self.text_fields)}"),
        (self.max_answer_len > 0 and self.n_best_size > 0 and self.doc_stride > 0,
         "--max_answer_len, --n_best_size and --doc_stride must be > 0"),
    ]
    for ok, message in checks:
      if not ok:
        raise ValueError(message)

  def to_dict(self) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()}
