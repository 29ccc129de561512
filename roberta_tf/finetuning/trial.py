"""One fine-tuning run: one (batch size, learning rate, seed) of a sweep, `epochs` passes, the
best dev epoch kept; resumable.

`run_trial` builds the run's task (task.py, `FineTuningTask`) and its train step (pretraining's:
`training.train_step.TrainStep` with the problem's objective: accumulation, clipping, fp16 loss
scaling, the NaN guard; each replica's loss SUM is divided by the global number of examples in
the update, so the update is the gradient of the global batch mean under any split into
replicas and micro-batches), restores the run's state, builds the run's events (events.py,
`FineTuningEvents`) and runs the loop. TensorBoard goes to
run_dir/{train,eval}; the run's metrics to run_dir/eval_results.json, written last.

Resume (run_state.py): after every epoch and on SIGTERM the run saves its full state; a rerun
of the same sweep continues from it at the same update, data position and dropout RNG, so the
result equals an uninterrupted run's. A finished run is read back from its eval_results.json.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.finetuning import finetuned_dir, run_state
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.events import FineTuningEvents, RunInfo, TrialResult
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.task import FineTuningTask
from roberta_tf.training import checkpointing
from roberta_tf.training import loop as loop_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.summaries import log
from roberta_tf.training.task import build_train_step


def finished_run(run_dir: str) -> TrialResult | None:
  """A run of an earlier attempt of this sweep that finished, read back; else None."""
  path = files.join(run_dir, finetuned_dir.RESULTS_FILE)
  if not files.isfile(path):
    return None
  doc = files.read_json(path)
  return TrialResult(doc["learning_rate"], doc["epoch"], doc["history"][doc["epoch"] - 1]["dev"],
                     doc["history"], files.join(run_dir, doc["checkpoint"]), run_dir,
                     doc.get("test"))


class SweepClock:
  """ETA of the whole sweep: epochs left (an upper bound: early stopping ends runs sooner)
  x the mean epoch time so far."""

  def __init__(self, total_epochs: int):
    self.left, self.seconds, self.done = total_epochs, 0.0, 0

  def tick(self, seconds: float) -> str:
    self.left, self.seconds, self.done = self.left - 1, self.seconds + seconds, self.done + 1
    return summaries_lib.format_eta(self.left * self.seconds / self.done)


def run_trial(cfg: FinetuneConfig, problem: problems_lib.Problem,
              model_config: models.RobertaConfig, strategy: tf.distribute.Strategy,
              run_dir: str, metric: str, sigterm, clock: SweepClock,
              label: str = "") -> TrialResult:
  """Fine-tunes (or resumes) one model at --learning_rate, --batch_size and --seed (see the
  module docstring). `label` names the run in log lines (default "lr <rate>").

  Returns checkpoint=None when SIGTERM stopped it (its state is saved for a rerun).
  """
  name = label or f"lr {cfg.optimizer.learning_rate:g}"
  chief = strategy_lib.is_chief(strategy)
  save_dir = checkpointing.worker_dir(run_dir, chief, strategy_lib.task_id(strategy))
  keras.utils.set_random_seed(cfg.runtime.seed)
  task = FineTuningTask(cfg, problem, model_config, strategy)
  train_step = build_train_step(task, strategy)
  state = run_state.RunState(run_dir, train_step, chief, strategy_lib.task_id(strategy))
  progress = state.restore() or run_state.RunProgress()
  update = int(train_step.step.numpy())
  if update:
    log(f"{name}: resumed at update {update} (epoch "
        f"{update // task.steps_per_epoch + 1}) from {run_dir}/{run_state.STATE_DIR}")
  files.makedirs(save_dir)
  events = FineTuningEvents(task, train_step, state, progress,
                            RunInfo(run_dir, save_dir, metric, name, clock, chief))
  steps = task.steps_per_epoch
  result = loop_lib.Loop(strategy, train_step, events, loop_lib.LoopSchedule(
      total_steps=task.total_steps, log_every=steps, eval_every=steps, save_every=steps,
      max_bad_steps=cfg.loop.max_bad_steps, period=steps, eval_last_step=True)).run(update, sigterm)
  if result.stopped_by_signal:
    return TrialResult(cfg.optimizer.learning_rate, 0, {}, progress.history, None, run_dir)
  return events.result
