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
  DataOptions,
  LoopOptions,
  ModelOptions,
  OptimizerOptions,
  RuntimeOptions,
)
from roberta_tf.common.options import (
  NON_NEGATIVE,
  POSITIVE,
  GroupedConfig,
  Range,
  check_options,
  nested,
  option,
  redeclare,
)
from roberta_tf.finetuning import glue, problem_types

SQUAD_V2_NULL = ("classifier", "span_score")
# Every option naming a file or directory is declared path=True: a local path or a URL (gs://,
# ram://, ...: roberta_tf/common/files.py); --config may also be a preset's name.


# The option groups (roberta_tf/common/option_groups.py) as fine-tuning declares them: only what
# differs from pretraining's is redeclared.


@dataclasses.dataclass(frozen=True)
class FinetuneModel(ModelOptions):
  """MODEL: fine-tuning's help (its model dir is the sweep's output; --init_from may also be a
  fine-tuned model)."""
  model_dir: str = redeclare(
      ModelOptions, "model_dir", help="Output directory (must be empty unless --overwrite; the "
      "same command on an unfinished sweep's directory resumes it).")
  overwrite: bool = redeclare(
      ModelOptions, "overwrite", help="Replace an earlier run's files in --model_dir (and an "
      "existing --export_dir).")
  init_from: str = redeclare(
      ModelOptions, "init_from", help="Pretrained model dir (config.json + checkpoint + vocab "
      "files), or a fine-tuned one (its encoder; its head too when the task and labels are the "
      "same). Empty: random init.")


@dataclasses.dataclass(frozen=True)
class FinetuneData(DataOptions):
  """DATA: max_seq_len 0 is the pretrained model's; the paper's batch sizes (a sweep's
  --batch_sizes override --batch_size, and validate() checks the sizes swept)."""
  max_seq_len: int = redeclare(
      DataOptions, "max_seq_len", default=0, help="Longest input in tokens, special tokens "
      "included; <= the pretrained model's. 0: the pretrained model's (random init: 512).",
      check=Range(lambda v: v == 0 or v >= 8, "0 (the model's) or >= 8"))
  batch_size: int = redeclare(
      DataOptions, "batch_size", default=32, help="Global examples per update (paper: 16 or "
      "32).", check=None)


@dataclasses.dataclass(frozen=True)
class FinetuneOptimizer(OptimizerOptions):
  """OPTIMIZER: the paper's fine-tuning rate and weight decay (--learning_rates override
  --learning_rate; validate() checks the rates swept)."""
  learning_rate: float = redeclare(
      OptimizerOptions, "learning_rate", default=1e-5,
      help="Peak learning rate (without a sweep).", check=None)
  weight_decay: float = redeclare(OptimizerOptions, "weight_decay", default=0.1)


@dataclasses.dataclass(frozen=True)
class FinetuneRuntime(RuntimeOptions):
  """RUNTIME: --seed is the first of the --seeds a configuration runs."""
  seed: int = redeclare(
      RuntimeOptions, "seed", help="The first seed (head init, shuffling, dropout); see --seeds.")


@dataclasses.dataclass(frozen=True)
class FinetuneLoop(LoopOptions):
  """LOOP: of it fine-tuning offers only the bad-step stop (its loop is per epoch)."""
  max_bad_steps: int = redeclare(
      LoopOptions, "max_bad_steps", default=5, help="Non-finite steps (skipped, weights "
      "unchanged) in a row before the run stops with an error.")


@dataclasses.dataclass
class FinetuneConfig(GroupedConfig):
  """Everything a fine-tuning run needs: each option is also `roberta_tf.finetune`'s flag of the
  same name, with this help (roberta_tf/common/options.py). The options pretraining shares live
  in the nested groups `cfg.model`, `cfg.data`, `cfg.optimizer`, `cfg.runtime` and `cfg.loop`
  (roberta_tf/common/option_groups.py; Finetune* above: fine-tuning's defaults and help where
  they differ). Their options fine-tuning does not offer (--input_lanes, --warmup_steps, --tpu,
  --deterministic, --jit_compile, the LOOP cadence: its loop is per epoch) are no flags of it
  and keep the group's defaults. Built and changed by flat option names:
  FinetuneConfig.from_dict({...}), cfg.replace(...); to_dict() is what sweep.json and the
  model dir's config.json record."""
  task: str = option(help="The task type (set by --glue_task).",
                     choices=problem_types.PROBLEM_TYPES)
  model: FinetuneModel = nested(FinetuneModel)
  train_file: str = option(
      help="Training data: a .tsv/.csv/.jsonl/.json table (classification, regression), "
      "RACE-style JSON/JSONL file or directory (multiple_choice), SQuAD JSON (extractive_qa), "
      "CoNLL or JSON lines of tokens and tags (token_classification), a table of "
      "anchor/positive[/negative] texts named by --text_fields (embedding).", path=True)
  eval_file: str = option(
      help="Dev data, same format (embedding: a directory in BEIR's layout: corpus.jsonl, "
      "queries.jsonl, qrels/dev.tsv); picks the epoch and the learning rate, and gives "
      "eval_results.json.", path=True)
  sts_file: str = option(
      "", "embedding: also score Spearman's rho on this table of sentence1, sentence2, score "
      "(\"sts_spearman\").", path=True)
  test_file: str = option(
      "", "token_classification: test data, same format; each run's best epoch (by dev) is "
      "scored on it (eval_results.json's \"test\") and its tags written "
      "(test_predictions.conll).", path=True)
  vocab_dir: str = option(
      "", "vocab.json + merges.txt or a tokenizer.json (default: --init_from's); required for "
      "random init.",
      path=True)
  # GLUE presets (glue.py): they set task, train/eval files, fields, labels and the metric.
  glue_task: str = option(
      "", "A GLUE task: reads --data_dir in GLUE's layout with the task's columns, labels and "
      "metric (sets --task, --train_file, --eval_file, --text_fields, --labels; --metric "
      "defaults to GLUE's), and writes the kept model's test predictions (TASK.tsv).",
      choices=("", *glue.PRESETS))
  data_dir: str = option(
      "", "--glue_task: GLUE's folder of the task (train.tsv, dev.tsv or MNLI's "
      "dev_matched/dev_mismatched.tsv, optional test files).", path=True)
  glue_diagnostic: str = option(
      "", "--glue_task=mnli: GLUE's diagnostic/diagnostic.tsv, predicted into AX.tsv.",
      path=True)
  predictions_dir: str = option(
      "", "Where the GLUE leaderboard TSVs go (default: --model_dir); one folder for all tasks "
      "makes the submission.", path=True)
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
  data: FinetuneData = nested(FinetuneData, omit=("input_lanes",))
  max_query_len: int = option(64, "QA: question tokens kept.", check=POSITIVE)
  doc_stride: int = option(
      128, "QA and token_classification: tokens between the starts of consecutive windows of "
      "a long context or sentence.", check=POSITIVE)
  max_answer_len: int = option(30, "QA: longest answer in tokens.", check=POSITIVE)
  n_best_size: int = option(20, "QA: candidates kept per question.", check=POSITIVE)
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
  batch_sizes: tuple[int, ...] = option(
      (), "A sweep over batch sizes, e.g. 16,32 (the paper's GLUE grid). Overrides "
      "--batch_size.")
  eval_batch_size: int = option(
      0, "Dev batch size (0: --batch_size).", check=NON_NEGATIVE)
  learning_rates: tuple[float, ...] = option(
      (), "A sweep, e.g. 1e-5,2e-5,3e-5 (with --batch_sizes and --seeds: a run per batch size "
      "x rate x seed; the best median kept). Overrides --learning_rate.")
  # Fine-tuning's schedule is --warmup_ratio (pretraining's is --warmup_steps).
  optimizer: FinetuneOptimizer = nested(FinetuneOptimizer, omit=("warmup_steps", "optimizer"))
  metric: str = option(
      "", "Dev metric for early stopping and the sweep (default: accuracy / pearson / accuracy "
      "/ f1 by task).")
  early_stopping_patience: int = option(
      0, "Stop a run after this many epochs without a better dev metric; 0: never.",
      check=NON_NEGATIVE)
  seeds: int = option(
      5, "Runs per configuration, seeds --seed .. --seed + seeds - 1; the median over them "
      "picks the configuration (the paper: 5).",
      check=POSITIVE)
  batching: str = option(
      problem_types.LENGTH_BUCKETS, "length_buckets: batches of similar lengths, padded to a "
      "few fixed lengths (fastest); random: random batches padded the same way; max_seq_len: "
      "random batches padded to --max_seq_len. See roberta_tf/finetuning/bucketing.py.",
      choices=problem_types.BATCHINGS)
  loop: FinetuneLoop = nested(FinetuneLoop, omit=(
      "log_every", "eval_every", "eval_steps", "checkpoint_every", "keep_checkpoints"))
  # Execution.
  runtime: FinetuneRuntime = nested(FinetuneRuntime, omit=("tpu", "deterministic",
                                                           "jit_compile"))
  export_dir: str = option(
      "", "Also write the SavedModel (raw-string signatures) of the kept model here.",
      path=True)
  export_precision: str = option(
      "float32", "The --export_dir SavedModel's precision: float32, bfloat16 (weights stored and "
      "matmuls run in bfloat16, outputs float32) or auto (the faster here, measured once per "
      "machine). See roberta_tf/serving/serving_precision.py.",
      choices=("float32", "bfloat16", "auto"))

  @property
  def learning_rate_sweep(self) -> tuple[float, ...]:
    """The learning rates swept."""
    return tuple(self.learning_rates) or (self.optimizer.learning_rate,)

  @property
  def batch_size_sweep(self) -> tuple[int, ...]:
    return tuple(self.batch_sizes) or (self.data.batch_size,)

  @property
  def seed_list(self) -> tuple[int, ...]:
    seed = self.runtime.seed
    return tuple(range(seed, seed + max(self.seeds, 0)))

  def validate(self) -> None:
    """Raises ValueError naming the flag for inconsistent settings: each option's own checks
    (options.check_options: required, choices, range, path), then the settings that depend on
    each other."""
    check_options(self)
    rates, init_from, accum = (self.learning_rate_sweep, self.model.init_from,
                               self.optimizer.grad_accum_steps)
    checks = [
        (bool(init_from) or bool(self.vocab_dir),
         "--vocab_dir is required without --init_from (random init needs the vocabulary)"),
        (not init_from or files.isdir(init_from),
         f"--init_from={init_from!r} is not a directory"),
        (all(b > 0 for b in self.batch_size_sweep),
         f"batch sizes must be > 0, got {self.batch_size_sweep}"),
        (len(set(self.batch_size_sweep)) == len(self.batch_size_sweep),
         f"--batch_sizes repeats a size: {self.batch_size_sweep}"),
        (all(b % accum == 0 for b in self.batch_size_sweep),
         f"batch sizes {list(self.batch_size_sweep)} must be multiples of --grad_accum_steps="
         f"{accum}"),
        (all(lr > 0 for lr in rates), f"learning rates must be > 0, got {rates}"),
        (len(set(rates)) == len(rates), f"--learning_rates repeats a rate: {rates}"),
        (self.task not in (problem_types.CLASSIFICATION, problem_types.REGRESSION) or
         len(self.text_fields) in (1, 2),
         f"--text_fields must name one or two fields, got {list(self.text_fields)}"),
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
