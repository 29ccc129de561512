"""Checkpoints that resume exactly: model, optimizer, step counters and the data position.

Only the chief's checkpoints count. In multi-worker training every worker must take part in a
save, so the others save into ``model_dir/workertemp_<task id>``, deleted after each save (the
pattern of the TF multi-worker guide). A checkpoint is never written while a weight is
non-finite.
"""

from __future__ import annotations

import hashlib
import os
import shutil

import numpy as np
import tensorflow as tf


class NonFiniteWeightsError(RuntimeError):
  """Raised instead of saving a checkpoint that would hold NaN or Inf weights."""


def weights_finite(model) -> bool:
  """True when every variable of ``model`` is finite (checked on the host)."""
  for v in model.variables:
    value = np.asarray(v.numpy() if hasattr(v, "numpy") else v)
    if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
      return False
  return True


def weights_digest(model) -> str:
  """sha256 (hex) of the model's weights, in order: equal digests mean bit-identical weights.

  The run logs it at the end, so replicas of a multi-worker run can be compared.
  """
  digest = hashlib.sha256()
  for v in model.weights:
    digest.update(np.ascontiguousarray(v.numpy()).tobytes())
  return digest.hexdigest()


def dropout_rng_states(model) -> list:
  """The state variables of the model's keras SeedGenerators (dropout masks derive from them).

  They are in ``model.variables`` but not in the checkpoint of ``model`` (a SeedGenerator is
  not a tracked trackable), so a resumed run would replay the first steps' dropout masks. The
  trainer checkpoints them explicitly (see `Trainer.checkpoint_items`).
  """
  return [v for v in model.variables if v.name == "seed_generator_state"]


def worker_dir(model_dir: str, is_chief: bool, task_id: int) -> str:
  """Where this worker saves: model_dir on the chief; every other worker of a multi-worker run
  must take part in each save too, so it writes to model_dir/workertemp_<task_id> (removed
  after the save). Pretraining's checkpoints and fine-tuning's best-epoch saves both use it."""
  return model_dir if is_chief else os.path.join(model_dir, f"workertemp_{task_id}")


class Checkpointer:
  """tf.train.CheckpointManager with the chief/worker split and the finite-weights check.

  Args:
    model_dir: where the chief's checkpoints live (``ckpt-<step>`` files).
    items: trackables to save, by key; ``model`` must be the pretrainer (models.load reads it).
    keep: how many checkpoints to keep.
    is_chief: False on non-chief multi-worker workers.
    task_id: this worker's index (names a non-chief's temporary directory).
  """

  def __init__(self, model_dir: str, items: dict, keep: int = 3, is_chief: bool = True,
               task_id: int = 0):
    self.model = items["model"]
    self.items = dict(items)
    self.checkpoint = tf.train.Checkpoint(**items)
    self.is_chief = is_chief
    self.directory = worker_dir(model_dir, is_chief, task_id)
    self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=keep,
                                              checkpoint_name="ckpt")

  def close(self) -> None:
    """Removes a non-chief worker's temporary directory (the chief's model_dir stays)."""
    if not self.is_chief:
      shutil.rmtree(self.directory, ignore_errors=True)

  @property
  def latest(self) -> str | None:
    return tf.train.latest_checkpoint(self.directory) if self.is_chief else None

  def restore_latest(self, chief_dir: str | None = None) -> str | None:
    """Restores the newest checkpoint of the chief's directory; returns its path or None."""
    path = tf.train.latest_checkpoint(chief_dir or self.directory)
    if path:
      restore_checkpoint(self.items, path)
    return path

  def restore(self, path: str) -> None:
    restore_checkpoint(self.items, path)

  def save(self, step: int) -> str:
    """Saves as ``ckpt-<step>``; raises NonFiniteWeightsError if any weight is NaN/Inf."""
    if not weights_finite(self.model):
      raise NonFiniteWeightsError(f"refusing to save step {step}: the model has non-finite weights")
    os.makedirs(self.directory, exist_ok=True)
    path = self.manager.save(checkpoint_number=step)  # every worker must take part
    if not self.is_chief:
      shutil.rmtree(self.directory, ignore_errors=True)
    return path


# Checkpoint items that a checkpoint written by an older release may lack; the caller sees them
# at their initial value (0) and handles it (run.py: data_position from data_rounds).
OPTIONAL_ITEMS = ("data_position",)


def restore_checkpoint(items: dict, path: str) -> None:
  """Restores `path` into the checkpoint items, requiring every one except an OPTIONAL_ITEMS
  entry that the checkpoint lacks (it keeps its current value).

  Raises:
    AssertionError (TF's) when a required object has no value in the checkpoint.
  """
  names = {name.split("/")[0] for name, _ in tf.train.list_variables(path)}
  kept = {k: v for k, v in items.items() if k in names or k not in OPTIONAL_ITEMS}
  tf.train.Checkpoint(**kept).restore(path).assert_existing_objects_matched()
