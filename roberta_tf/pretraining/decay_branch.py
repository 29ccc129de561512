"""A decay branch (`train --decay_from=M[/ckpt-N] --schedule=wsd --decay_steps=D`): the decay of
a warmup-stable-decay run, started later from a checkpoint of its stable phase, in a model dir
of its own (docs/schedules.md).

A WSD rate at a step depends on the run's length only through where the decay starts
(training/schedule.py `WarmupStableDecay`), so the branch is the run planned with
--train_steps = N + D and --decay_steps = D, resumed at step N: it takes checkpoint N's whole
training state (weights, AdamW's moments and iteration, the step, the data position, the
dropout RNG; run.py restores it) and M's input lanes and precision, and trains updates N .. N+D-1
on the decay. With M's data, batch and seed flags it ends on the planned run's weights
(tests/test_decay_branch.py); a flag that differs from M's record is named in a warning.
"""

from __future__ import annotations

from roberta_tf.common import files
from roberta_tf.models import checkpoint_files
from roberta_tf.pretraining.model_dir_setup import (
  DATA_ORDER_SETTINGS,
  SCHEDULE_SETTINGS,
  changed,
  recorded_training,
)
from roberta_tf.pretraining.train_config import TrainConfig


def source_checkpoint(decay_from: str) -> str:
  """The checkpoint prefix --decay_from names: itself (MODEL_DIR/ckpt-N), or the newest complete
  checkpoint of a model dir.

  Raises:
    ValueError naming --decay_from: no such checkpoint, or a damaged one.
  """
  if checkpoint_files.step_of(decay_from) is not None:
    why = checkpoint_files.problem(decay_from)
    if why:
      raise ValueError(f"--decay_from={decay_from}: {why}")
    return decay_from
  prefix = checkpoint_files.newest_complete(decay_from)
  if prefix is None:
    raise ValueError(f"--decay_from={decay_from}: no complete checkpoint there (a model dir "
                     "of a --schedule=wsd run, or one of its checkpoints: DIR/ckpt-N)")
  return prefix


def resolve(cfg: TrainConfig, log) -> TrainConfig:
  """`cfg` as the branch runs it: --decay_from as the checkpoint prefix (a resume of the
  branch's model dir keeps the one its config.json records), --init_from its model dir (the
  architecture), --train_steps N + --decay_steps, the input lanes and (for --precision=auto)
  the precision M's run recorded. Without --decay_from, `cfg` itself.

  Raises:
    ValueError naming the flag: the checkpoint is missing or damaged, M's config.json records
      no --schedule=wsd run, N lies outside M's stable phase (in the warmup, or past the start
      of M's own decay), or --init_from names another model dir.
  """
  if not cfg.decay_from:
    return cfg
  own = None
  if not cfg.model.overwrite and checkpoint_files.steps_on_disk(cfg.model.model_dir):
    own = recorded_training(cfg.model.model_dir)
  prefix = source_checkpoint(own.decay_from if own and own.decay_from else cfg.decay_from)
  source_dir, step = files.dirname(prefix), checkpoint_files.step_of(prefix)
  if cfg.model.init_from and cfg.model.init_from.rstrip("/") != source_dir.rstrip("/"):
    raise ValueError(f"--init_from={cfg.model.init_from}: a --decay_from branch starts from "
                     f"its checkpoint's model dir ({source_dir}); leave --init_from out")
  source = recorded_training(source_dir)
  if source is None or source.schedule != "wsd":
    raise ValueError(f"--decay_from={cfg.decay_from}: {source_dir}'s config.json records no "
                     "--schedule=wsd run; a decay branch continues the stable phase of one")
  if not source.train_minutes:
    stable_end = source.train_steps - source.decay_length()
    if not source.optimizer.warmup_steps <= step <= stable_end:
      raise ValueError(
          f"--decay_from={prefix}: step {step} is not in that run's stable phase (steps "
          f"{source.optimizer.warmup_steps}..{stable_end}: after its warmup, before its decay)")
  branch = cfg.replace(decay_from=prefix, init_from=source_dir,
                       train_steps=step + cfg.decay_steps, input_lanes=source.data.input_lanes)
  if not cfg.mask_rate:  # the family's rate: the source's, as its run resolved it
    branch = branch.replace(mask_rate=source.mask_rate)
  if cfg.runtime.precision == "auto":
    branch = branch.replace(precision=source.runtime.precision)
  differs = changed(source, branch, tuple(
      k for k in (*DATA_ORDER_SETTINGS, *SCHEDULE_SETTINGS, "precision")
      if k not in ("train_steps", "train_minutes", "decay_steps", "decay_fraction",
                   "decay_shape", "decay_floor")))  # the branch's own: its decay
  if differs and own is None:
    log(f"warning: the decay branch differs from {source_dir}'s run ({'; '.join(differs)}): "
        "it is not the decay that run would have had")
  return branch
