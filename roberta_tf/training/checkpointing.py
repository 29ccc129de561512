"""Checkpoints that resume exactly: model, optimizer, step counters and the data position.

Only the chief's checkpoints count. In multi-worker training every worker must take part in a
save, so the others save into ``model_dir/workertemp_<task id>``, deleted after each save (the
pattern of the TF multi-worker guide). A checkpoint is never written while a weight is
non-finite.

A run is never lost: `Checkpointer.restore_latest` resumes from the newest *complete*
checkpoint on disk (models/checkpoint_files.py), rebuilding the `checkpoint` index file when it
is missing or names a damaged checkpoint, and moving a damaged newer checkpoint's files into
`damaged/` (so the resumed run never overwrites them); with checkpoint files but none complete it
refuses. `DirectoryLock` keeps a second training process out of a model dir, which is what makes
removing a killed save's leftovers (`ckpt-N_temp/`) safe. A failed save (disk full) names the
checkpoint and the newest complete one.
"""

from __future__ import annotations

import hashlib

import numpy as np
import tensorflow as tf

from roberta_tf.common import directory_lock, error_text, files
from roberta_tf.models import checkpoint_files


class NonFiniteWeightsError(RuntimeError):
  """Raised instead of saving a checkpoint that would hold NaN or Inf weights."""


class CheckpointError(RuntimeError):
  """A model dir's checkpoints cannot be resumed or written (the message names the files)."""


# The training lock (a second train_step on a model dir is refused); shared with every binary that
# writes a run directory.
DirectoryLock = directory_lock.DirectoryLock


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
  train step checkpoints them explicitly (see `TrainStep.checkpoint_items`).
  """
  return [v for v in model.variables if v.name == "seed_generator_state"]


def worker_dir(model_dir: str, is_chief: bool, task_id: int) -> str:
  """Where this worker saves: model_dir on the chief; every other worker of a multi-worker run
  must take part in each save too, so it writes to model_dir/workertemp_<task_id> (removed
  after the save). Pretraining's checkpoints and fine-tuning's best-epoch saves both use it."""
  return model_dir if is_chief else files.join(model_dir, f"workertemp_{task_id}")


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
    self.keep = keep
    self.directory = worker_dir(model_dir, is_chief, task_id)
    self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory, max_to_keep=keep,
                                              checkpoint_name="ckpt")

  def close(self) -> None:
    """Removes a non-chief worker's temporary directory (the chief's model_dir stays)."""
    if not self.is_chief:
      files.rmtree(self.directory, ignore_errors=True)

  @property
  def latest(self) -> str | None:
    return tf.train.latest_checkpoint(self.directory) if self.is_chief else None

  def restore_latest(self, chief_dir: str | None = None, log=print) -> str | None:
    """Restores the newest complete checkpoint of the chief's directory; returns its prefix,
    or None when the directory holds no checkpoint file at all (a fresh run).

    The chief also repairs what it found (see the module docstring) and `log`s what it used
    and why. Non-chief workers read the same files and never change them.

    Raises:
      CheckpointError: checkpoint files are there but none is complete and readable.
    """
    directory = chief_dir or self.directory
    steps = checkpoint_files.steps_on_disk(directory)
    if not steps:
      return None
    listed = checkpoint_files.index_steps(directory)
    skipped = []  # (prefix, what is wrong), newest first
    for step in reversed(steps):
      prefix = checkpoint_files.prefix_of(directory, step)
      what = checkpoint_files.problem(prefix)
      if what is None:
        try:
          restore_checkpoint(self.items, prefix)
        except checkpoint_files.CheckpointDamagedError as e:
          what = str(e)
        else:
          if self.is_chief:
            self._repair(directory, prefix, listed, skipped, log)
          return prefix
      skipped.append((prefix, what))
    raise CheckpointError(
        f"--model_dir={directory} holds checkpoint files but no complete checkpoint ("
        + "; ".join(f"{files.basename(p)}: {w}" for p, w in skipped)
        + "): restore the files, or pass --overwrite to start over (it deletes them)")

  def _repair(self, directory, prefix, listed, skipped, log) -> None:
    """After resuming from `prefix`: damaged newer checkpoints go to damaged/, and the index
    file is rebuilt from the disk when it was missing or did not name `prefix` as the newest."""
    name = files.basename(prefix)
    for bad, what in skipped:
      dest = checkpoint_files.move_aside(bad)
      log(f"warning: {files.basename(bad)} is damaged ({what}); moved its files to {dest}")
    if skipped or listed is None or not listed or listed[-1] != checkpoint_files.step_of(prefix):
      why = ("its newest checkpoint was damaged" if skipped else
             "the 'checkpoint' index file was missing or unreadable" if listed is None else
             "the 'checkpoint' index file did not name the newest checkpoint on disk")
      names = checkpoint_files.rebuild_index(directory, self.keep)
      log(f"note: {why}: rebuilt the index from the files on disk ({', '.join(names)}); "
          f"resuming from {name}, the newest complete checkpoint")
      # A manager reads the index when built: this one knows the checkpoints it may rotate out.
      self.manager = tf.train.CheckpointManager(self.checkpoint, self.directory,
                                                max_to_keep=self.keep, checkpoint_name="ckpt")

  def remove_stale_temps(self) -> list[str]:
    """Removes a killed save's leftovers (ckpt-N_temp/, ...) from the chief's directory. Only
    while holding its DirectoryLock: then no other process is writing there."""
    return checkpoint_files.remove_stale_temps(self.directory) if self.is_chief else []

  def restore(self, path: str) -> None:
    restore_checkpoint(self.items, path)

  def save(self, step: int) -> str:
    """Saves as ``ckpt-<step>``; raises NonFiniteWeightsError if any weight is NaN/Inf."""
    if not weights_finite(self.model):
      raise NonFiniteWeightsError(f"refusing to save step {step}: the model has non-finite weights")
    files.makedirs(self.directory)
    try:
      path = self.manager.save(checkpoint_number=step)  # every worker must take part
    except (OSError, tf.errors.OpError) as e:
      if self.is_chief:  # what the failed save left is ours (the DirectoryLock): remove it
        checkpoint_files.remove_stale_temps(self.directory)
      target = checkpoint_files.prefix_of(self.directory, step)
      why = (error_text.disk_full_text(e, target) if error_text.is_disk_full(e)
             else f"cannot write {target}: {error_text.one_line(e)}")
      newest = checkpoint_files.newest_complete(self.directory)
      raise CheckpointError(f"{why} (it resumes from {newest}, the newest complete checkpoint)"
                            if newest else f"{why} (no checkpoint was written yet)") from e
    finally:
      if not self.is_chief:
        files.rmtree(self.directory, ignore_errors=True)
    return path


# Checkpoint items that a checkpoint written by an older release may lack; the caller sees them
# at their initial value (0) and handles it (pretraining: data_position from data_rounds;
# train_seconds 0: a time budget counts from the resume; best_eval: no eval judged yet).
OPTIONAL_ITEMS = ("data_position", "train_seconds", "best_eval")


def restore_checkpoint(items: dict, path: str) -> None:
  """Restores `path` into the checkpoint items, requiring every one except an OPTIONAL_ITEMS
  entry that the checkpoint lacks (it keeps its current value).

  Raises:
    AssertionError (TF's) when a required object has no value in the checkpoint.
    checkpoint_files.CheckpointDamagedError: the files cannot be read (truncated, corrupt);
      the message names them.
  """
  try:
    names = {name.split("/")[0] for name in checkpoint_files.variable_names(path)}
    kept = {k: v for k, v in items.items() if k in names or k not in OPTIONAL_ITEMS}
    tf.train.Checkpoint(**kept).restore(path).assert_existing_objects_matched()
  except (tf.errors.DataLossError, tf.errors.OutOfRangeError, tf.errors.NotFoundError,
          IndexError) as e:
    # IndexError: TF's CheckpointReader on a short data file ("Read less bytes than requested").
    raise checkpoint_files.CheckpointDamagedError(
        checkpoint_files.read_problem(path, e)) from e
