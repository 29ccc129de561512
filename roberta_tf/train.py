"""Pretrains RoBERTa with masked-LM on data_prep shards.

  python -m roberta_tf.train --flagfile=flags/small.flags --train_data=DIR [--eval_data=DIR] \
      --model_dir=DIR

A start resumes from model_dir's newest complete checkpoint (model, optimizer, step, data
position); a model dir with checkpoint files is never started over without --overwrite.
SIGTERM (and a first Ctrl-C) saves a checkpoint and exits cleanly (docs/reliability.md).
"""

from absl import app

from roberta_tf.common import cli, options
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.serving import frozen_weights

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(TrainConfig, FLAGS)  # one flag per TrainConfig option, with its help


def main(argv):
  frozen_weights.refuse_in_training()  # a switch that would train on stale weights
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  cfg = options.from_flags(TrainConfig, FLAGS)
  # Logical CPU devices must exist before TensorFlow initializes, so split before the import.
  from roberta_tf.training import strategy as strategy_lib  # pylint: disable=import-outside-toplevel
  strategy_lib.split_cpu(cfg.runtime.cpu_replicas)
  from roberta_tf.pretraining import run as pretraining  # pylint: disable=import-outside-toplevel
  pretraining.pretrain(cfg)  # also on SIGTERM: it saved a checkpoint and returned; exit 0
  return 0


def console_main():
  """Console-script entry point (pyproject: roberta-train)."""
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
