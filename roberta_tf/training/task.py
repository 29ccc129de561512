"""The interfaces the one loop drives (Model Garden's `base_task.Task`, for this repo).

A *task* is one kind of training: pretraining (roberta_tf/pretraining/task.py,
`PretrainingTask`) or fine-tuning on one problem (roberta_tf/finetuning/task.py,
`FineTuningTask`). It builds what the train step runs (the model, the optimizer, the step's
settings, the objective): `build_train_step(task, strategy)` makes the one train step from it.

Its *events* (`Events`: pretraining/events.py's `PretrainingEvents`, finetuning/events.py's
`FineTuningEvents`) say what the loop's events mean for it (its data, records, evals, saves and
end). They act on the train step, its checkpoint, the datasets and the summaries, so they are
built once all of those exist, whole, in one place (pretraining/run.py, finetuning/trial.py);
`loop.Loop(strategy, train_step, events, schedule)` runs them.

An *objective* (what the step minimizes) returns `Sums` for one replica's micro-batch; the train
step all-reduces them and divides the gradient by the global count, so an objective never
normalizes by its own batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, Protocol

import keras
import tensorflow as tf

from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.train_step import StepConfig, TrainStep


class Sums(NamedTuple):
  """What an objective returns for one replica's micro-batch (float32 scalars)."""
  loss_sum: tf.Tensor  # the loss summed over the predictions (not normalized)
  count: tf.Tensor     # predictions: masked tokens (MLM) or examples (fine-tuning)
  correct: tf.Tensor   # correct argmax predictions (0 where a problem scores itself on dev)
  tokens: tf.Tensor    # real (non-pad) input tokens
  extras: dict | None = None  # {name in the objective's extra_sums: sum}


class Objective(Protocol):
  """`objective(model, batch) -> Sums`; `extra_sums` names the further sums it reports (summed
  like the others, returned by the step as "sum/<name>", not differentiated). It is traced
  without AutoGraph (train_step.py): branch on tensors with `tf.cond` / `tf.where`, not `if`."""

  extra_sums: tuple[str, ...]

  def __call__(self, model: keras.Model, batch) -> Sums: ...


class TrainingError(RuntimeError):
  """A run cannot go on (it diverged: too many non-finite updates in a row; a save refused
  because a weight is non-finite); the message says what to change. Pretraining and fine-tuning
  raise it alike."""


class Task(Protocol):
  """One kind of training: what the train step runs (called under the strategy's scope)."""

  def build_model(self) -> keras.Model:
    """The model to train, created under the strategy's scope."""

  def build_optimizer(self, model: keras.Model) -> keras.optimizers.Optimizer:
    """AdamW with the task's schedule for `model`'s trainable variables."""

  def step_config(self) -> StepConfig:
    """Accumulation, clipping, precision and normalization of the train step."""

  def objective(self) -> Objective:
    """What the step minimizes."""


class Events(Protocol):
  """What the loop's events mean for one task (see training/loop.py's docstring for when each
  is called)."""

  def batches(self, step: int) -> Callable[[], object]:
    """The next-batch function of the data from update `step` on."""

  def record(self, step: int, window: StepWindow, eta_s: float) -> None:
    """The updates of `window` (since the last record) are done: pretraining logs them (a line
    and train scalars), fine-tuning adds them to the epoch's loss; `eta_s`: the run's ETA."""

  def evaluate(self, step: int) -> bool:
    """Held-out metrics at `step`; True ends the run (early stopping)."""

  def save(self, step: int, window: StepWindow | None) -> None:
    """Save the state at `step`; `window`: updates not recorded yet (a signal mid-period)."""

  def diverged(self, step: int, bad_in_row: int) -> Exception:
    """`bad_in_row` updates in a row were skipped (non-finite): undo what the task undoes
    (pretraining restores its last good checkpoint) and return the error the loop raises."""

  def stopped(self, step: int, reason: str) -> None:
    """The run stops at `step` on a signal (`reason`: e.g. "SIGTERM"), after `save`."""

  def finish(self, step: int) -> None:
    """The run reached its end (or stopped early): final save / eval / results."""


def build_train_step(task: Task, strategy: tf.distribute.Strategy) -> TrainStep:
  """The task's model and optimizer under `strategy`'s scope, and the train step over them."""
  with strategy.scope():
    model = task.build_model()
    optimizer = task.build_optimizer(model)
  return TrainStep(strategy, model, optimizer, task.step_config(), task.objective())
