"""The resolved configuration of a fine-tuning run (what `roberta_tf.finetune`'s flags become).

Defaults are the paper's fine-tuning recipe (Liu et al. 2019, Appendix C / Table 10): AdamW
with beta2 0.98 and epsilon 1e-6, weight decay 0.1, a 6% linear warmup then linear decay to 0,
at most 10 epochs, batch size {16, 32} x learning rate {1e-5, 2e-5, 3e-5} picked on the dev
set by the median over five seeds (sweep.py).
"""

from __future__ import annotations

import dataclasses

from roberta_tf.common import files
from roberta_tf.common.option_groups import (
  GroupViews,
  use,
)
from roberta_tf.common.options import NON_NEGATIVE, POSITIVE, Check, check_options, option
from roberta_tf.finetuning import glue, problem_types

SQUAD_V2_NULL = ("classifier", "span_score")
# The fields (flags) that name files or directories: local paths or URLs (gs://, ram://, ...:
# roberta_tf/common/files.py); --config may also be a preset's name.
PATH_FLAGS = ("model_dir", "train_file", "eval_file", "test_file", "sts_file", "init_from",
              "config", "vocab_dir", "data_dir", "glue_diagnostic", "predictions_dir", "export_dir")


def check_paths(values: dict) -> None:
  """Raises files.UnknownSchemeError (a ValueError naming the flag) when a path flag in
  `values` ({flag name: value}) is a URL that no file system here handles."""
  for name in PATH_FLAGS:
    if values.get(name):
      files.check(values[name], f"--{name}")


@dataclasses.dataclass
class FinetuneConfig(GroupViews):
  """Everything a fine-tuning run needs: each field is also `roberta_tf.finetune`'s flag of the
  same name, with this help (roberta_tf/common/options.py). The options pretraining shares
  (optimizer, runtime, loop cadence...) are declared once in roberta_tf/common/option_groups.py
  and used here, with fine-tuning's default or help where it differs; the rest are its own. The
  fields stay flat (the flags, sweep.json); code reads a group option through its typed group:
  `cfg.model`, `cfg.data`, `cfg.optimizer` and `cfg.runtime` (no `loop`: a run's loop is per
  epoch, and of the LOOP group only --max_bad_steps is fine-tuning's, read flat)."""
  task: str = option(help="The task type (set by --glue_task).",
                     choices=problem_types.PROBLEM_TYPES)
  model_dir: str = use(
      "model_dir", help="Output directory (must be empty unless --overwrite; the same command "
      "on an unfinished sweep's directory resumes it).")
  train_file: str = option(
      help="Training data: a .tsv/.csv/.jsonl/.json table (classification, regression), "
      "RACE-style JSON/JSONL file or directory (multiple_choice), SQuAD JSON (extractive_qa), "
      "CoNLL or JSON lines of tokens and tags (token_classification), a table of "
      "anchor/positive[/negative] texts named by --text_fields (embedding).")
  eval_file: str = option(
      help="Dev data, same format (embedding: a directory in BEIR's layout: corpus.jsonl, "
      "queries.jsonl, qrels/dev.tsv); picks the epoch and the learning rate, and gives "
      "eval_results.json.")
  sts_file: str = option(
      "", "embedding: also score Spearman's rho on this table of sentence1, sentence2, score "
      "(\"sts_spearman\").")
  test_file: str = option(
      "", "token_classification: test data, same format; each run's best epoch (by dev) is "
      "scored on it (eval_results.json's \"test\") and its tags written "
      "(test_predictions.conll).")
  init_from: str = use(
      "init_from", help="Pretrained model dir (config.json + checkpoint + vocab files), or a "
      "fine-tuned one (its encoder; its head too when the task and labels are the same). "
      "Empty: random init.")
  config: str = use("config")
  vocab_dir: str = option(
      "", "vocab.json + merges.txt (default: --init_from's); required for random init.")
  # GLUE presets (glue.py): they set task, train/eval files, fields, labels and the metric.
  glue_task: str = option(
      "", "A GLUE task: reads --data_dir in GLUE's layout with the task's columns, labels and "
      "metric (sets --task, --train_file, --eval_file, --text_fields, --labels; --metric "
      "defaults to GLUE's), and writes the kept model's test predictions (TASK.tsv).",
      choices=("", *glue.PRESETS))
  data_dir: str = option(
      "", "--glue_task: GLUE's folder of the task (train.tsv, dev.tsv or MNLI's "
      "dev_matched/dev_mismatched.tsv, optional test files).")
  glue_diagnostic: str = option(
      "", "--glue_task=mnli: GLUE's diagnostic/diagnostic.tsv, predicted into AX.tsv.")
  predictions_dir: str = option(
      "", "Where the GLUE leaderboard TSVs go (default: --model_dir); one folder for all tasks "
      "makes the submission.")
  # Data.
  text_fields: tuple[str, ...] = option(
      ("text",), "Table fields holding the text (one) or the text pair (two), e.g. "
      "sentence1,sentence2.")
  label_field: str = option(
      "label", "Table field holding the label (token_classification JSON lines: the tags "
      "field; default \"tags\", else \"ner_tags\").")
  labels: tuple[str, ...] = option(
      (), "Class names in id order (default: the sorted training labels; token_classification: "
      "the training tags in first-appearance order; names the ids of integer JSON tags).")
  label_all_pieces: bool = option(
      False, "token_classification: train every piece of a word on its tag (a B- tag's later "
      "pieces on its I- twin: HF's label_all_tokens); default: the first piece only. "
      "Prediction always reads the first piece.")
  max_seq_len: int = use(
      "max_seq_len", default=0, help="Longest input in tokens, special tokens included; <= the "
      "pretrained model's. 0: the pretrained model's (random init: 512).",
      check=Check(lambda v: v == 0 or v >= 8,
                  "--{name} must be 0 (the model's) or >= 8, got {value}"))
  max_query_len: int = option(64, "QA: question tokens kept.")
  doc_stride: int = option(
      128, "QA and token_classification: tokens between the starts of consecutive windows of "
      "a long context or sentence.")
  max_answer_len: int = option(30, "QA: longest answer in tokens.")
  n_best_size: int = option(20, "QA: candidates kept per question.")
  null_score_threshold: float = option(
      0.0, "SQuAD v2: predict no answer when the no-answer score exceeds this (classifier: its "
      "no-answer logit; span_score: the null score minus the best span's).")
  squad_v2_null: str = option(
      "classifier", "SQuAD v2: what decides 'no answer': the paper's answerability classifier "
      "on <s>, trained jointly (losses summed), or BERT's null span score.",
      choices=SQUAD_V2_NULL)
  skip_bad_examples: bool = option(
      False, "Skip (and count) bad examples instead of refusing the file: QA answers whose "
      "text is not at their answer_start; GLUE rows whose column count differs from the "
      "header's.")
  pooling: str = option(
      "mean", "embedding: the text vector is the mean of its token vectors (<s> and </s> "
      "included: sentence-transformers') or the <s> vector; L2-normalized either way.",
      choices=problem_types.POOLINGS)
  similarity_scale: float = option(
      20.0, "embedding: the cosine similarities' scale in the ranking loss (sentence-"
      "transformers' MultipleNegativesRankingLoss scale; 1/temperature).", check=POSITIVE)
  symmetric_loss: bool = option(
      False, "embedding: average the anchors->candidates loss with the positives->anchors one "
      "(MultipleNegativesSymmetricRankingLoss).")
  # Optimization.
  epochs: int = option(
      10, "Epochs (the paper: at most 10, early stopping on dev).", check=POSITIVE)
  # batch_size and learning_rate are checked with the sweeps that override them.
  batch_size: int = use(
      "batch_size", default=32, help="Global examples per update (paper: 16 or 32).",
      check=None)
  batch_sizes: tuple[int, ...] = option(
      (), "A sweep over batch sizes, e.g. 16,32 (the paper's GLUE grid). Overrides "
      "--batch_size.")
  eval_batch_size: int = option(
      0, "Dev batch size (0: --batch_size).", check=NON_NEGATIVE)
  learning_rate: float = use(
      "learning_rate", default=1e-5, help="Peak learning rate (without a sweep).", check=None)
  learning_rates: tuple[float, ...] = option(
      (), "A sweep, e.g. 1e-5,2e-5,3e-5 (with --batch_sizes and --seeds: a run per batch size "
      "x rate x seed; the best median kept). Overrides --learning_rate.")
  warmup_ratio: float = use("warmup_ratio")
  weight_decay: float = use("weight_decay", default=0.1)
  adam_beta1: float = use("adam_beta1")
  adam_beta2: float = use("adam_beta2")
  adam_epsilon: float = use("adam_epsilon")
  dropout: float = use("dropout")
  metric: str = option(
      "", "Dev metric for early stopping and the sweep (default: accuracy / pearson / accuracy "
      "/ f1 by task).")
  early_stopping_patience: int = option(
      0, "Stop a run after this many epochs without a better dev metric; 0: never.",
      check=NON_NEGATIVE)
  seed: int = use(
      "seed", help="The first seed (head init, shuffling, dropout); see --seeds.")
  seeds: int = option(
      5, "Runs per configuration, seeds --seed .. --seed + seeds - 1; the median over them "
      "picks the configuration (the paper: 5).",
      check=Check(lambda v: v > 0, "--{name} must be > 0 (runs per configuration), got "
                  "{value}"))
  batching: str = option(
      problem_types.LENGTH_BUCKETS, "length_buckets: batches of similar lengths, padded to a "
      "few fixed lengths (fastest); random: random batches padded the same way; max_seq_len: "
      "random batches padded to --max_seq_len. See roberta_tf/finetuning/bucketing.py.",
      choices=problem_types.BATCHINGS)
  grad_accum_steps: int = use("grad_accum_steps")
  clip_norm: float = use("clip_norm")
  max_bad_steps: int = use(
      "max_bad_steps", default=5, help="Non-finite steps (skipped, weights unchanged) in a row "
      "before the run stops with an error.")
  # Execution.
  strategy: str = use("strategy")
  # Unchecked, as fine-tuning always had it (pretraining requires > 0).
  peer_timeout: int = use("peer_timeout")
  cpu_replicas: int = use("cpu_replicas")
  precision: str = use("precision")
  export_dir: str = option(
      "", "Also write the SavedModel (raw-string signatures) of the kept model here.")
  export_precision: str = option(
      "float32", "The --export_dir SavedModel's precision: float32, bfloat16 (weights stored and "
      "matmuls run in bfloat16, outputs float32) or auto (the faster here, measured once per "
      "machine). See roberta_tf/serving/serving_precision.py.",
      choices=("float32", "bfloat16", "auto"))
  overwrite: bool = use(
      "overwrite", help="Replace an earlier run's files in --model_dir (and an existing "
      "--export_dir).")

  @property
  def learning_rate_sweep(self) -> tuple[float, ...]:
    """The learning rates swept."""
    return tuple(self.learning_rates) or (self.learning_rate,)

  @property
  def batch_size_sweep(self) -> tuple[int, ...]:
    return tuple(self.batch_sizes) or (self.batch_size,)

  @property
  def seed_list(self) -> tuple[int, ...]:
    return tuple(range(self.seed, self.seed + max(self.seeds, 0)))

  def check_paths(self) -> None:
    """check_paths on this config's path fields."""
    check_paths({name: getattr(self, name) for name in PATH_FLAGS})

  def validate(self) -> None:
    """Raises ValueError naming the flag for inconsistent settings: each field's choices and
    check (options.check_options), then the settings that depend on each other."""
    check_options(self)
    rates = self.learning_rate_sweep
    checks = [
        (bool(self.train_file), "--train_file is required"),
        (bool(self.eval_file), "--eval_file is required (the dev set picks the epoch and LR)"),
        (bool(self.init_from) or bool(self.vocab_dir),
         "--vocab_dir is required without --init_from (random init needs the vocabulary)"),
        (not self.init_from or files.isdir(self.init_from),
         f"--init_from={self.init_from!r} is not a directory"),
        (all(b > 0 for b in self.batch_size_sweep),
         f"batch sizes must be > 0, got {self.batch_size_sweep}"),
        (len(set(self.batch_size_sweep)) == len(self.batch_size_sweep),
         f"--batch_sizes repeats a size: {self.batch_size_sweep}"),
        (all(b % self.grad_accum_steps == 0 for b in self.batch_size_sweep),
         f"batch sizes {list(self.batch_size_sweep)} must be multiples of --grad_accum_steps="
         f"{self.grad_accum_steps}"),
        (all(lr > 0 for lr in rates), f"learning rates must be > 0, got {rates}"),
        (len(set(rates)) == len(rates), f"--learning_rates repeats a rate: {rates}"),
        (self.task not in (problem_types.CLASSIFICATION, problem_types.REGRESSION) or
         len(self.text_fields) in (1, 2),
         f"--text_fields must name one or two fields, got {list(self.text_fields)}"),
        (self.max_answer_len > 0 and self.n_best_size > 0 and self.doc_stride > 0,
         "--max_answer_len, --n_best_size and --doc_stride must be > 0"),
        (not self.test_file or self.task == problem_types.TOKEN_CLASSIFICATION,
         "--test_file is read by --task=token_classification only"),
        (not self.sts_file or self.task == problem_types.EMBEDDING,
         "--sts_file is read by --task=embedding only"),
        (self.task != problem_types.EMBEDDING or len(self.text_fields) in (2, 3),
         f"--task=embedding: --text_fields must name 2 or 3 columns (anchor, positive[, "
         f"negative]), got {list(self.text_fields)}"),
        (self.task != problem_types.EMBEDDING or not self.eval_file
         or files.isdir(self.eval_file),
         f"--task=embedding: --eval_file={self.eval_file!r} must be a directory in BEIR's "
         "layout (corpus.jsonl, queries.jsonl, qrels/dev.tsv)"),
    ]
    for ok, message in checks:
      if not ok:
        raise ValueError(message)

  def to_dict(self) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in dataclasses.asdict(self).items()}
