r"""Fine-tunes RoBERTa on a downstream task (the paper's GLUE / RACE / SQuAD recipe).

  python -m roberta_tf.finetune --task=classification --init_from=MODEL_DIR \
      --train_file=train.tsv --eval_file=dev.tsv --text_fields=sentence1,sentence2 \
      --label_field=label --learning_rates=1e-5,2e-5,3e-5 --model_dir=OUT [--export_dir=SM]

  python -m roberta_tf.finetune --glue_task=rte --data_dir=GLUE/RTE --init_from=MODEL_DIR \
      --batch_sizes=16,32 --learning_rates=1e-5,2e-5,3e-5 --seeds=5 --model_dir=OUT

Tasks: classification | regression (TSV/CSV/JSONL tables), multiple_choice (RACE-style JSON),
extractive_qa (SQuAD v1.1/v2.0 JSON), or a GLUE preset (--glue_task: GLUE's files, fields,
labels and metrics; the kept model's test predictions in the leaderboard's TSV format). Every
(batch size, learning rate) runs once per seed; eval_results.json and results.md give the
median and spread over seeds; the best configuration's median seed is kept (its dev metrics
top-level in OUT/eval_results.json; roberta_tf/finetuning/finetuned_dir.py has the layout).
--init_from takes a pretrained model dir or a fine-tuned one (the MNLI -> RTE chain: its
encoder, a new head when the labels differ). Without --init_from the same model starts from
random init (--config names its size, --vocab_dir its vocabulary): the baseline.
--export_only exports an existing fine-tuned --model_dir to --export_dir.
"""

from absl import app, flags

from roberta_tf.common import cli
from roberta_tf.finetuning import glue, task_types
from roberta_tf.finetuning.finetune_config import SQUAD_V2_NULL, FinetuneConfig

_D = FinetuneConfig(task="", model_dir="", train_file="", eval_file="")

FLAGS = flags.FLAGS
flags.DEFINE_enum("task", None, ["classification", "regression", "multiple_choice",
                                 "extractive_qa"], "The task type (set by --glue_task).")
flags.DEFINE_enum("glue_task", "", ["", *glue.TASKS], "A GLUE task: reads --data_dir in GLUE's "
                  "layout with the task's columns, labels and metric (sets --task, "
                  "--train_file, --eval_file, --text_fields, --labels; --metric defaults to "
                  "GLUE's), and writes the kept model's test predictions (TASK.tsv).")
flags.DEFINE_string("data_dir", "", "--glue_task: GLUE's folder of the task (train.tsv, dev.tsv "
                    "or MNLI's dev_matched/dev_mismatched.tsv, optional test files).")
flags.DEFINE_string("glue_diagnostic", "", "--glue_task=mnli: GLUE's diagnostic/diagnostic.tsv, "
                    "predicted into AX.tsv.")
flags.DEFINE_string("predictions_dir", "", "Where the GLUE leaderboard TSVs go (default: "
                    "--model_dir); one folder for all tasks makes the submission.")
flags.DEFINE_string("model_dir", None, "Output directory (must be empty unless --overwrite; "
                    "the same command on an unfinished sweep's directory resumes it).")
flags.DEFINE_string("train_file", None, "Training data: a .tsv/.csv/.jsonl/.json table "
                    "(classification, regression), RACE-style JSON/JSONL file or directory "
                    "(multiple_choice), SQuAD JSON (extractive_qa).")
flags.DEFINE_string("eval_file", None, "Dev data, same format; picks the epoch and the learning "
                    "rate, and gives eval_results.json.")
flags.DEFINE_string("init_from", _D.init_from, "Pretrained model dir (config.json + checkpoint + "
                    "vocab files), or a fine-tuned one (its encoder; its head too when the task "
                    "and labels are the same). Empty: random init.")
flags.DEFINE_string("config", _D.config, "Random init only: model size preset (tiny, small, "
                    "medium, base, large) or a RobertaConfig JSON file.")
flags.DEFINE_string("vocab_dir", _D.vocab_dir, "vocab.json + merges.txt (default: --init_from's); "
                    "required for random init.")
flags.DEFINE_list("text_fields", list(_D.text_fields), "Table fields holding the text (one) or "
                  "the text pair (two), e.g. sentence1,sentence2.")
flags.DEFINE_string("label_field", _D.label_field, "Table field holding the label.")
flags.DEFINE_list("labels", [], "Class names in id order (default: the sorted training labels).")
flags.DEFINE_integer("max_seq_len", _D.max_seq_len, "Longest input in tokens, special tokens "
                     "included; <= the pretrained model's. 0: the pretrained model's (random "
                     "init: 512).")
flags.DEFINE_integer("max_query_len", _D.max_query_len, "QA: question tokens kept.")
flags.DEFINE_integer("doc_stride", _D.doc_stride, "QA: tokens between the starts of consecutive "
                     "context windows.")
flags.DEFINE_integer("max_answer_len", _D.max_answer_len, "QA: longest answer in tokens.")
flags.DEFINE_integer("n_best_size", _D.n_best_size, "QA: candidates kept per question.")
flags.DEFINE_float("null_score_threshold", _D.null_score_threshold, "SQuAD v2: predict no answer "
                   "when the no-answer score exceeds this (classifier: its no-answer logit; "
                   "span_score: the null score minus the best span's).")
flags.DEFINE_enum("squad_v2_null", _D.squad_v2_null, list(SQUAD_V2_NULL), "SQuAD v2: what "
                  "decides 'no answer': the paper's answerability classifier on <s>, trained "
                  "jointly (losses summed), or BERT's null span score.")
flags.DEFINE_bool("skip_bad_examples", _D.skip_bad_examples, "Skip (and count) bad examples "
                  "instead of refusing the file: QA answers whose text is not at their "
                  "answer_start; GLUE rows whose column count differs from the header's.")
flags.DEFINE_integer("epochs", _D.epochs, "Epochs (the paper: at most 10, early stopping on dev).")
flags.DEFINE_integer("batch_size", _D.batch_size, "Global examples per update (paper: 16 or 32).")
flags.DEFINE_list("batch_sizes", [], "A sweep over batch sizes, e.g. 16,32 (the paper's GLUE "
                  "grid). Overrides --batch_size.")
flags.DEFINE_integer("seeds", _D.seeds, "Runs per configuration, seeds --seed .. --seed + "
                     "seeds - 1; the median over them picks the configuration (the paper: 5).")
flags.DEFINE_enum("batching", _D.batching, list(task_types.BATCHINGS), "length_buckets: batches "
                  "of similar lengths, padded to a few fixed lengths (fastest); random: random "
                  "batches padded the same way; max_seq_len: random batches padded to "
                  "--max_seq_len. See roberta_tf/finetuning/bucketing.py.")
flags.DEFINE_integer("eval_batch_size", _D.eval_batch_size, "Dev batch size (0: --batch_size).")
flags.DEFINE_float("learning_rate", _D.learning_rate, "Peak learning rate (without a sweep).")
flags.DEFINE_list("learning_rates", [], "A sweep, e.g. 1e-5,2e-5,3e-5 (with --batch_sizes and "
                  "--seeds: a run per batch size x rate x seed; the best median kept). "
                  "Overrides --learning_rate.")
flags.DEFINE_float("warmup_ratio", _D.warmup_ratio, "Fraction of the steps with linear warmup.")
flags.DEFINE_float("weight_decay", _D.weight_decay, "AdamW weight decay (not on LayerNorm/bias).")
flags.DEFINE_float("adam_beta1", _D.adam_beta1, "AdamW beta1.")
flags.DEFINE_float("adam_beta2", _D.adam_beta2, "AdamW beta2.")
flags.DEFINE_float("adam_epsilon", _D.adam_epsilon, "AdamW epsilon.")
flags.DEFINE_float("dropout", _D.dropout, "Override dropout (and attention dropout); < 0 keeps "
                   "the model config's.")
flags.DEFINE_string("metric", _D.metric, "Dev metric for early stopping and the sweep (default: "
                    "accuracy / pearson / accuracy / f1 by task).")
flags.DEFINE_integer("early_stopping_patience", _D.early_stopping_patience, "Stop a run after "
                     "this many epochs without a better dev metric; 0: never.")
flags.DEFINE_integer("grad_accum_steps", _D.grad_accum_steps, "Micro-batches accumulated per "
                     "update: --batch_size is the global batch, split into this many.")
flags.DEFINE_float("clip_norm", _D.clip_norm, "Global-norm gradient clipping (0: off).")
flags.DEFINE_integer("max_bad_steps", _D.max_bad_steps, "Non-finite steps (skipped, weights "
                     "unchanged) in a row before the run stops with an error.")
flags.DEFINE_integer("seed", _D.seed, "The first seed (head init, shuffling, dropout); see "
                     "--seeds.")
flags.DEFINE_enum("strategy", _D.strategy, ["auto", "default", "mirrored", "multi_worker", "tpu"],
                  "tf.distribute strategy (as in pretraining).")
flags.DEFINE_integer("peer_timeout", _D.peer_timeout, "--strategy=multi_worker: seconds to "
                     "wait for every TF_CONFIG worker to start before giving up with an error "
                     "naming the missing ones (SIGTERM/Ctrl-C stop the wait).")
flags.DEFINE_integer("cpu_replicas", _D.cpu_replicas, "Split the CPU into this many logical "
                     "devices (to run --strategy=mirrored without GPUs, for testing).")
flags.DEFINE_enum("precision", _D.precision, ["float32", "mixed_bfloat16", "mixed_float16"],
                  "Compute precision; variables stay float32.")
flags.DEFINE_string("export_dir", _D.export_dir, "Also write the SavedModel (raw-string "
                    "signatures) of the kept model here.")
flags.DEFINE_bool("export_only", False, "Only export the fine-tuned --model_dir to --export_dir.")
flags.DEFINE_bool("overwrite", _D.overwrite, "Replace an earlier run's files in --model_dir "
                  "(and an existing --export_dir).")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if FLAGS.glue_task:
    given = [f"--{name}" for name in glue.PRESET_FLAGS if FLAGS[name].present]
    if given:
      raise app.UsageError(f"--glue_task={FLAGS.glue_task} sets {', '.join(given)}; leave "
                           f"{'it' if len(given) == 1 else 'them'} out")
  # Logical CPU devices must exist before TensorFlow initializes: split before the imports.
  from roberta_tf.training import strategy as strategy_lib  # pylint: disable=import-outside-toplevel
  strategy_lib.split_cpu(FLAGS.cpu_replicas)
  from roberta_tf.finetuning import sweep_runner  # pylint: disable=import-outside-toplevel
  from roberta_tf.serving import finetuned_export  # pylint: disable=import-outside-toplevel
  # Errors (FinetuneError, TaskDataError, SquadError, ModelDirError, ...: they name the file or
  # flag) are one line from cli.
  if FLAGS.export_only:
    if not FLAGS.model_dir or not FLAGS.export_dir:
      raise app.UsageError("--export_only needs --model_dir and --export_dir")
    path = finetuned_export.export_saved_model(FLAGS.model_dir, FLAGS.export_dir, FLAGS.overwrite)
    print(f"exported {path}")
    return 0
  values = {name: FLAGS[name].value for name in FinetuneConfig.__dataclass_fields__
            if name in FLAGS}
  values["text_fields"] = tuple(values["text_fields"])
  values["labels"] = tuple(values["labels"])
  try:
    values["learning_rates"] = tuple(float(v) for v in values["learning_rates"])
  except ValueError as e:
    raise ValueError(f"--learning_rates={FLAGS.learning_rates}: not a list of numbers") from e
  try:
    values["batch_sizes"] = tuple(int(v) for v in values["batch_sizes"])
  except ValueError as e:
    raise ValueError(f"--batch_sizes={FLAGS.batch_sizes}: not a list of integers") from e
  cfg = FinetuneConfig(**{k: ("" if v is None else v) for k, v in values.items()})
  if sweep_runner.run_sweep(cfg).get("stopped_by_signal"):
    print(f"stopped by a signal (SIGTERM or Ctrl-C); the same command resumes the sweep in "
          f"{cfg.model_dir}")
    return 0
  if cfg.export_dir:
    path = finetuned_export.export_saved_model(cfg.model_dir, cfg.export_dir, cfg.overwrite)
    print(f"exported {path}")
  return 0


def console_main():
  """Console-script entry point (pyproject: roberta-finetune)."""
  cli.run(main)


if __name__ == "__main__":
  console_main()
