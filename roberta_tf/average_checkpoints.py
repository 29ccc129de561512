"""Averages checkpoints: the element-wise mean of their weights, as a new model dir.

  python -m roberta_tf.average_checkpoints --model_dir=DIR --last=5 --output_dir=DIR_AVG
  python -m roberta_tf.average_checkpoints --model_dir=DIR --checkpoints=ckpt-800,ckpt-1000 \
      --output_dir=DIR_AVG

The new model dir holds config.json (the model dir's, with an "averaged" section), the
vocabulary files and one checkpoint of the averaged weights: no optimizer state, step or data
position. It exports, converts (--to_hf), evaluates and fine-tunes like any model dir; train
--init_from starts a new run from it. Any model family. The mean: each weight's float64 mean of
the float32 values, rounded once to float32 (roberta_tf/models/checkpoint_average.py).
"""

from __future__ import annotations

import dataclasses

from absl import app

from roberta_tf.common import cli, options
from roberta_tf.common.options import NON_NEGATIVE, option


@dataclasses.dataclass(frozen=True)
class AverageSettings:
  """average_checkpoints' flags."""
  model_dir: str = option(
      help="Model dir whose checkpoints are averaged (its config.json and vocab files go to "
      "--output_dir).", path=True)
  output_dir: str = option(
      help="New model dir to write: config.json, vocab files, one checkpoint of the mean "
      "weights (no optimizer state).", path=True)
  last: int = option(
      0, "Average the newest N checkpoints of --model_dir (all must be complete).",
      check=NON_NEGATIVE)
  checkpoints: tuple[str, ...] = option(
      (), "Average these instead: checkpoint prefixes, or names in --model_dir "
      "(ckpt-800,ckpt-1000); one kept elsewhere must be of the same model and vocabulary.")
  overwrite: bool = option(False, "Replace an existing non-empty --output_dir.")

  def validate(self) -> None:
    """Raises ValueError unless exactly one of --last and --checkpoints is given."""
    if bool(self.last) == bool(self.checkpoints):
      raise ValueError("pass one of --last=N (the newest N checkpoints) or "
                       "--checkpoints=NAME,NAME,...")


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(AverageSettings, FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  s = options.from_flags(AverageSettings, FLAGS)
  s.validate()
  from roberta_tf.models import checkpoint_average  # pylint: disable=import-outside-toplevel
  prefixes = checkpoint_average.pick(s.model_dir, s.last, s.checkpoints)
  prefix = checkpoint_average.write_average(s.model_dir, prefixes, s.output_dir,
                                            overwrite=s.overwrite)
  names = ", ".join(p.rsplit("/", 1)[-1] for p in prefixes)
  print(f"averaged {len(prefixes)} checkpoints ({names}) into {prefix} (weights only, no "
        "optimizer state)")
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
