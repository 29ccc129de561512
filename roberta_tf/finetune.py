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
Every path flag (data files, --data_dir, --init_from, --model_dir, --predictions_dir,
--export_dir, ...) may be a URL: gs://, s3://, hdfs://, ram://, any file system TensorFlow has
registered (roberta_tf/common/files.py).
"""

from __future__ import annotations

import dataclasses

from absl import app

from roberta_tf.common import cli, options
from roberta_tf.common.options import option
from roberta_tf.finetuning import glue
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.serving import frozen_weights


@dataclasses.dataclass(frozen=True)
class FinetuneMode:
  """finetune's one flag that is no FinetuneConfig option."""
  export_only: bool = option(False, "Only export the fine-tuned --model_dir to --export_dir.")


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# One flag per FinetuneConfig option, with its help; --task, --model_dir, --train_file
# and --eval_file are not required flags (--export_only does without most): validate() checks.
options.define_flags(FinetuneConfig, FLAGS, required=False)
options.define_flags(FinetuneMode, FLAGS)


def main(argv):
  frozen_weights.refuse_in_training()  # a switch that would train on stale weights
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  # Each given option's checks (choices, ranges, a path's URL) run here; what a mode needs is
  # checked below (--export_only) or by the sweep's validate(), once --glue_task's preset is in.
  cfg = options.from_flags(FinetuneConfig, FLAGS, required=False)  # list flags become tuples
  mode = options.from_flags(FinetuneMode, FLAGS)
  if cfg.glue_task:
    given = [f"--{name}" for name in glue.PRESET_FLAGS if FLAGS[name].present]
    if given:
      raise app.UsageError(f"--glue_task={cfg.glue_task} sets {', '.join(given)}; leave "
                           f"{'it' if len(given) == 1 else 'them'} out")
  # Logical CPU devices must exist before TensorFlow initializes: split before the imports.
  from roberta_tf.training import strategy as strategy_lib  # pylint: disable=import-outside-toplevel
  strategy_lib.split_cpu(cfg.runtime.cpu_replicas)
  from roberta_tf.finetuning import sweep_runner  # pylint: disable=import-outside-toplevel
  from roberta_tf.serving import finetuned_export  # pylint: disable=import-outside-toplevel
  # Errors (TrainingError, ProblemDataError, SquadError, ModelDirError, ...: they name the file
  # or flag) are one line from cli.
  if mode.export_only:
    if not cfg.model.model_dir or not cfg.export_dir:
      raise app.UsageError("--export_only needs --model_dir and --export_dir")
    path = finetuned_export.export_saved_model(cfg.model.model_dir, cfg.export_dir,
                                               cfg.model.overwrite, precision=cfg.export_precision)
    print(f"exported {path}")
    return 0
  if sweep_runner.run_sweep(cfg).get("stopped_by_signal"):
    print(f"stopped by a signal (SIGTERM or Ctrl-C); the same command resumes the sweep in "
          f"{cfg.model.model_dir}")
    return 0
  if cfg.export_dir:
    path = finetuned_export.export_saved_model(cfg.model.model_dir, cfg.export_dir,
                                               cfg.model.overwrite, precision=cfg.export_precision)
    print(f"exported {path}")
  return 0


def console_main():
  """Console-script entry point (pyproject: roberta-finetune)."""
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
