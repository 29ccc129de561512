"""The resumable state of one fine-tuning run (one learning rate of the sweep).

```
run_dir/state/
  checkpoint, ckpt-<update>.*   model, optimizer, the TrainStep's counters (update count = data
                                position) and dropout RNG: pretraining's checkpoint items
  progress.json                 {"checkpoint": "ckpt-<update>", "history": [...epochs done],
                                 "epoch_loss": [sum, count] of the unfinished epoch,
                                 "best_epoch", "best_prefix"}
```
Saved after every epoch and on SIGTERM (mid-epoch too); progress.json is written after its
checkpoint and names it, so a crash between the two resumes from the previous pair. The state
is removed when the run finishes (its results are in run_dir/eval_results.json then).
Non-chief workers take part in every save through checkpointing.Checkpointer's temp dirs and
read the chief's state on resume (a shared file system, as for pretraining).
"""

from __future__ import annotations

from roberta_tf.common import atomic_write, files
from roberta_tf.training import checkpointing

STATE_DIR = "state"
PROGRESS_FILE = "progress.json"


def fresh_progress() -> dict:
  return {"history": [], "epoch_loss": [0.0, 0.0], "best_epoch": 0, "best_prefix": ""}


class RunState:
  """Saves and restores one run's state (see the module docstring)."""

  def __init__(self, run_dir: str, train_step, is_chief: bool, task_id: int):
    self.chief_dir = files.join(run_dir, STATE_DIR)
    self.is_chief = is_chief
    self.ckpt = checkpointing.Checkpointer(
        self.chief_dir, {"model": train_step.model, "optimizer": train_step.optimizer,
                         **train_step.checkpoint_items()},
        keep=1, is_chief=is_chief, task_id=task_id)

  def restore(self) -> dict | None:
    """Restores the saved state into the model/optimizer/train_step; returns its progress, or
    None when there is none (a fresh run)."""
    path = files.join(self.chief_dir, PROGRESS_FILE)
    if not files.isfile(path):
      return None
    progress = files.read_json(path)
    self.ckpt.restore(files.join(self.chief_dir, progress["checkpoint"]))
    return progress

  def save(self, update: int, progress: dict) -> None:
    prefix = self.ckpt.save(update)  # every worker takes part
    if self.is_chief:
      atomic_write.write_json(files.join(self.chief_dir, PROGRESS_FILE),
                              {**progress, "checkpoint": files.basename(prefix)})

  def remove(self) -> None:
    """Drops the state of a finished run (the optimizer's moments are 2x the model's size)."""
    self.ckpt.close()
    if self.is_chief:
      files.rmtree(self.chief_dir, ignore_errors=True)
