"""The resumable state of one fine-tuning run (one learning rate of the sweep).

```
run_dir/state/
  checkpoint, ckpt-<update>.*   model, optimizer, the TrainStep's counters (update count = data
                                position) and dropout RNG: pretraining's checkpoint items
  progress.json                 {"checkpoint": "ckpt-<update>", "history": [...epochs done],
                                 "epoch_loss": [sum, count] of the unfinished epoch,
                                 "best_epoch", "best_prefix"[, "best_test"]}
```
progress.json is a `RunProgress` (its to_json / from_json; the format is the one runs wrote
before the object, so their state dirs still resume).
Saved after every epoch and on SIGTERM (mid-epoch too); progress.json is written after its
checkpoint and names it, so a crash between the two resumes from the previous pair. The state
is removed when the run finishes (its results are in run_dir/eval_results.json then).
Non-chief workers take part in every save through checkpointing.Checkpointer's temp dirs and
read the chief's state on resume (a shared file system, as for pretraining).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from roberta_tf.common import atomic_write, files
from roberta_tf.training import checkpointing

STATE_DIR = "state"
PROGRESS_FILE = "progress.json"


@dataclasses.dataclass
class RunProgress:
  """What a run has done, updated in place by its events (events.py) and saved with its state.

  Attributes:
    history: one entry per finished epoch ({"epoch", "step", "train_loss", "skipped_steps",
      "dev", "seconds"}).
    loss_sum, loss_count: the unfinished epoch's train loss so far (sum over examples, and
      their number).
    best_epoch: the epoch with the best dev metric (1-based; 0: none yet); best_prefix: its
      weights' checkpoint prefix; best_test: its test metrics (token classification with
      --test_file), else None.
  """
  history: list[dict[str, Any]] = dataclasses.field(default_factory=list)
  loss_sum: float = 0.0
  loss_count: float = 0.0
  best_epoch: int = 0
  best_prefix: str = ""
  best_test: dict[str, Any] | None = None

  def to_json(self, checkpoint: str) -> dict[str, Any]:
    """progress.json's content, naming the state's `checkpoint` (a basename)."""
    doc = {"history": self.history, "epoch_loss": [self.loss_sum, self.loss_count],
           "best_epoch": self.best_epoch, "best_prefix": self.best_prefix}
    if self.best_test is not None:
      doc["best_test"] = self.best_test
    return {**doc, "checkpoint": checkpoint}

  @classmethod
  def from_json(cls, doc: dict[str, Any]) -> RunProgress:
    """The progress in progress.json's content `doc` (its "checkpoint" is the state's)."""
    loss_sum, loss_count = doc["epoch_loss"]
    return cls(doc["history"], loss_sum, loss_count, doc["best_epoch"], doc["best_prefix"],
               doc.get("best_test"))


class RunState:
  """Saves and restores one run's state (see the module docstring)."""

  def __init__(self, run_dir: str, train_step, is_chief: bool, task_id: int):
    self.chief_dir = files.join(run_dir, STATE_DIR)
    self.is_chief = is_chief
    self.ckpt = checkpointing.Checkpointer(
        self.chief_dir, {"model": train_step.model, "optimizer": train_step.optimizer,
                         **train_step.checkpoint_items()},
        keep=1, is_chief=is_chief, task_id=task_id)

  def restore(self) -> RunProgress | None:
    """Restores the saved state into the model/optimizer/train_step; returns its progress, or
    None when there is none (a fresh run)."""
    path = files.join(self.chief_dir, PROGRESS_FILE)
    if not files.isfile(path):
      return None
    doc = files.read_json(path)
    self.ckpt.restore(files.join(self.chief_dir, doc["checkpoint"]))
    return RunProgress.from_json(doc)

  def save(self, update: int, progress: RunProgress) -> None:
    prefix = self.ckpt.save(update)  # every worker takes part
    if self.is_chief:
      atomic_write.write_json(files.join(self.chief_dir, PROGRESS_FILE),
                              progress.to_json(files.basename(prefix)))

  def remove(self) -> None:
    """Drops the state of a finished run (the optimizer's moments are 2x the model's size)."""
    self.ckpt.close()
    if self.is_chief:
      files.rmtree(self.chief_dir, ignore_errors=True)
