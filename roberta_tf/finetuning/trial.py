"""One fine-tuning run: one (batch size, learning rate, seed), `epochs` passes, the best dev
epoch kept; resumable.

seed -> encoder (pretrained, fine-tuned or random: warm_start.py) + head under the strategy
-> AdamW (weight decay on matrices only) with `warmup_ratio` linear warmup then linear decay
to 0 over epochs x updates_per_epoch updates -> per epoch: one shuffled pass (order fixed by
seed + epoch, batched as --batching says: bucketing.py), then the dev metrics (console,
TensorBoard in run_dir/{train,eval}); the best epoch's weights are checkpointed in run_dir;
`early_stopping_patience` epochs without improvement end the run. The run's metrics go to
run_dir/eval_results.json, written last.

The update is pretraining's: `training.trainer.Trainer` with a `training.objectives.
TaskObjective` (accumulation, clipping, fp16 loss scaling, the NaN guard). Each replica's loss
SUM is divided by the global number of examples in the update, so the update is the gradient of
the global batch mean under any split into replicas and micro-batches.

Resume (run_state.py): after every epoch and on SIGTERM the run saves its full state; a rerun
of the same sweep continues from it at the same update, data position and dropout RNG, so the
result equals an uninterrupted run's. A finished run is read back from its eval_results.json.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time

import keras
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import atomic_write
from roberta_tf.finetuning import finetuned_dir, run_state, squad, warm_start
from roberta_tf.finetuning import tasks as tasks_lib
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.training import checkpointing
from roberta_tf.training import loop as loop_lib
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.objectives import TaskObjective
from roberta_tf.training.summaries import log
from roberta_tf.training.trainer import StepConfig, Trainer


class FinetuneError(RuntimeError):
  """A run cannot go on (diverged, inconsistent inputs); the message says what to change."""


@dataclasses.dataclass
class TrialResult:
  """A run's outcome; `checkpoint` is the best epoch's prefix (None: stopped by SIGTERM)."""
  learning_rate: float
  best_epoch: int
  metrics: dict
  history: list
  checkpoint: str | None
  run_dir: str


def build_optimizer(cfg: FinetuneConfig, learning_rate: float, total_steps: int, variables):
  """Pretraining's AdamW (the Trainer all-reduces), warmup over `warmup_ratio` of the updates
  then linear decay to 0, no weight decay on LayerNorm/bias."""
  return optimizer_lib.build_optimizer(
      variables=variables, learning_rate=learning_rate,
      warmup_steps=int(round(cfg.warmup_ratio * total_steps)), train_steps=total_steps,
      weight_decay=cfg.weight_decay, beta_1=cfg.adam_beta1, beta_2=cfg.adam_beta2,
      epsilon=cfg.adam_epsilon)


def updates_per_epoch(num_train: int, batch_size: int, grad_accum_steps: int) -> int:
  """Updates in one pass: every micro-batch (the last may be partial) in groups of
  grad_accum_steps; a final incomplete group is dropped."""
  micro = math.ceil(num_train / (batch_size // grad_accum_steps))
  return max(micro // grad_accum_steps, 1)


def format_metrics(metrics: dict) -> str:
  return " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if not k.endswith("total"))


def finished_run(run_dir: str) -> TrialResult | None:
  """A run of an earlier attempt of this sweep that finished, read back; else None."""
  path = os.path.join(run_dir, finetuned_dir.RESULTS_FILE)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    doc = json.load(f)
  return TrialResult(doc["learning_rate"], doc["epoch"], doc["history"][doc["epoch"] - 1]["dev"],
                   doc["history"], os.path.join(run_dir, doc["checkpoint"]), run_dir)


class SweepClock:
  """ETA of the whole sweep: epochs left (an upper bound: early stopping ends runs sooner)
  x the mean epoch time so far."""

  def __init__(self, total_epochs: int):
    self.left, self.seconds, self.done = total_epochs, 0.0, 0

  def tick(self, seconds: float) -> str:
    self.left, self.seconds, self.done = self.left - 1, self.seconds + seconds, self.done + 1
    return summaries_lib.format_eta(self.left * self.seconds / self.done)


def run_trial(cfg: FinetuneConfig, task: tasks_lib.Task, model_config: models.RobertaConfig,
              learning_rate: float, strategy: tf.distribute.Strategy, run_dir: str,
              metric: str, sigterm, clock: SweepClock, label: str = "") -> TrialResult:
  """Fine-tunes (or resumes) one model at one learning rate, cfg.batch_size and cfg.seed (see
  the module docstring). `label` names the run in log lines (default "lr <rate>").

  Returns checkpoint=None when SIGTERM stopped it (its state is saved for a rerun).
  """
  name = label or f"lr {learning_rate:g}"
  chief = strategy_lib.is_chief(strategy)
  save_dir = checkpointing.worker_dir(run_dir, chief, strategy_lib.task_id(strategy))
  keras.utils.set_random_seed(cfg.seed)
  replicas = strategy.num_replicas_in_sync
  micro_batch = cfg.batch_size // cfg.grad_accum_steps  # global examples per micro-batch
  steps_per_epoch = updates_per_epoch(task.num_train, cfg.batch_size, cfg.grad_accum_steps)
  with strategy.scope():
    model = warm_start.build_model(model_config, task.info, dtype=cfg.precision,
                                   init_from=cfg.init_from)
    opt = build_optimizer(cfg, learning_rate, cfg.epochs * steps_per_epoch,
                          model.trainable_variables)
  trainer = Trainer(strategy, model, opt, StepConfig(
      grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
      norm_per_micro_batch=float(max(micro_batch // replicas, 1))), objective=TaskObjective(task))
  state = run_state.RunState(run_dir, trainer, chief, strategy_lib.task_id(strategy))
  progress = state.restore() or run_state.fresh_progress()
  update = int(trainer.step.numpy())
  if update:
    log(f"{name}: resumed at update {update} (epoch "
        f"{update // steps_per_epoch + 1}) from {run_dir}/{run_state.STATE_DIR}")
  os.makedirs(save_dir, exist_ok=True)
  events = _FineTuning(cfg, task, trainer, strategy, state, progress, save_dir, run_dir,
                       metric, name, clock, chief, steps_per_epoch, learning_rate)
  total = cfg.epochs * steps_per_epoch
  result = loop_lib.Loop(strategy, trainer, events, loop_lib.LoopSchedule(
      total_steps=total, log_every=steps_per_epoch, eval_every=steps_per_epoch,
      save_every=steps_per_epoch, max_bad_steps=cfg.max_bad_steps, period=steps_per_epoch,
      eval_last_step=True)).run(update, sigterm)
  if result.stopped_by_signal:
    return TrialResult(learning_rate, 0, {}, progress["history"], None, run_dir)
  return events.result


class _FineTuning:
  """Fine-tuning's side of the loop (training/loop.py `LoopTask`): a shuffled pass per epoch
  (a period), the epoch's train loss, the dev metrics and the best epoch's weights after each,
  early stopping, and the run's state (run_state.py) saved after every epoch and on SIGTERM."""

  def __init__(self, cfg, task, trainer, strategy, state, progress, save_dir, run_dir, metric,
               name, clock, chief, steps_per_epoch, learning_rate):
    self.cfg, self.task, self.trainer, self.strategy = cfg, task, trainer, strategy
    self.model = model = trainer.model
    self.state, self.progress, self.save_dir, self.run_dir = state, progress, save_dir, run_dir
    self.metric, self.name, self.clock, self.chief = metric, name, clock, chief
    self.steps_per_epoch, self.learning_rate = steps_per_epoch, learning_rate
    self.summaries = summaries_lib.Summaries(run_dir, enabled=chief,
                                             tags=summaries_lib.FINETUNING)
    self.eval_ds = task.eval_dataset(cfg.eval_batch_size or cfg.batch_size)
    self.predict = tf.function(lambda inputs: model(inputs, training=False),
                               input_signature=[self.eval_ds.element_spec])
    history = progress["history"]
    self.best = (history[progress["best_epoch"] - 1]["dev"][metric] if progress["best_epoch"]
                 else None)
    self.epoch_start, self.learning_rate_now, self.result = time.perf_counter(), 0.0, None

  def epoch(self, step: int) -> int:
    """The epoch (1-based) that update `step` (after it) belongs to."""
    return (step - 1) // self.steps_per_epoch + 1

  def batches(self, step):
    cfg = self.cfg
    micro_batch = cfg.batch_size // cfg.grad_accum_steps
    ds = self.task.train_dataset(micro_batch, cfg.seed + step // self.steps_per_epoch,
                                 update_size=cfg.batch_size)
    ds = ds.skip(step % self.steps_per_epoch * cfg.grad_accum_steps)
    self.epoch_start = time.perf_counter()
    replicas = self.strategy.num_replicas_in_sync
    return iter(self.strategy.experimental_distribute_dataset(ds) if replicas > 1
                else ds).__next__

  def log(self, step, window, eta_s):
    del step, eta_s  # the epoch's line is written with its dev metrics (evaluate)
    self._add_to_epoch(window)

  def _add_to_epoch(self, window):
    w = window.summarize()
    self.progress["epoch_loss"][0] += (w["loss"] * w["count"]) if w["count"] else 0.0
    self.progress["epoch_loss"][1] += w["count"]
    self.learning_rate_now = w["learning_rate"]

  def evaluate(self, step):
    progress, metric, task = self.progress, self.metric, self.task
    history = progress["history"]
    epoch = self.epoch(step)
    loss_sum, count = progress["epoch_loss"]
    dev = task.evaluate([{k: v.numpy() for k, v in self.predict(b).items()}
                         for b in self.eval_ds])
    improved = tasks_lib.is_better(metric, dev[metric], self.best)
    history.append({"epoch": epoch, "step": step, "train_loss": loss_sum / count if count
                    else float("nan"), "skipped_steps": int(self.trainer.skipped_steps.numpy()),
                    "dev": dev, "seconds": time.perf_counter() - self.epoch_start})
    self.summaries.scalars("train", step, {"loss": history[-1]["train_loss"],
                                           "learning_rate": self.learning_rate_now,
                                           "skipped_steps": history[-1]["skipped_steps"]})
    self.summaries.scalars("eval", step, dev)
    log(f"{self.name} epoch {epoch}/{self.cfg.epochs}: train_loss "
        f"{history[-1]['train_loss']:.4f} | dev {format_metrics(dev)} | "
        f"{history[-1]['seconds']:.1f}s | sweep ETA <= "
        f"{self.clock.tick(history[-1]['seconds'])}{' (best)' if improved else ''}")
    progress["epoch_loss"] = [0.0, 0.0]
    if improved:
      self.best, progress["best_epoch"] = dev[metric], epoch
      progress["best_prefix"] = finetuned_dir.save_checkpoint(self.save_dir, self.model, epoch)
      if self.chief and isinstance(task, tasks_lib.ExtractiveQATask):
        squad.write_predictions(self.run_dir, *task.predictions)
      return False
    since_best = epoch - progress["best_epoch"]
    if self.cfg.early_stopping_patience and since_best >= self.cfg.early_stopping_patience:
      log(f"{self.name}: early stop after epoch {epoch} ({since_best} "
          f"epochs without a better dev {metric}; best {self.best:.4f} at epoch "
          f"{progress['best_epoch']})")
      return True
    return False

  def save(self, step, window):
    if window is not None:  # a signal mid-epoch: the epoch's loss so far goes into the state
      self._add_to_epoch(window)
    self.state.save(step, self.progress)

  def too_many_bad_steps(self, step, bad_in_row):
    return FinetuneError(
        f"{self.name}: {bad_in_row} updates in a row (>= --max_bad_steps="
        f"{self.cfg.max_bad_steps}) had a non-finite loss or gradient and were skipped (epoch "
        f"{self.epoch(step)}); lower the learning rate, set --clip_norm, or check --init_from")

  def stopped(self, step, reason):
    if step % self.steps_per_epoch:
      log(f"{reason}: {self.name} saved at update {step} (epoch {self.epoch(step)}); rerun "
          "the same command to resume")
    else:
      log(f"{reason}: {self.name} saved after epoch {self.epoch(step)}; rerun the same "
          "command to resume")

  def finish(self, step):
    del step
    progress, history = self.progress, self.progress["history"]
    best_epoch = progress["best_epoch"]
    self.result = TrialResult(
        self.learning_rate, best_epoch, history[best_epoch - 1]["dev"], history,
        os.path.join(self.run_dir, os.path.basename(progress["best_prefix"])), self.run_dir)
    if self.chief:
      atomic_write.write_json(os.path.join(self.run_dir, finetuned_dir.RESULTS_FILE),
                              {**self.result.metrics, "learning_rate": self.learning_rate,
                               "epoch": best_epoch, "history": history,
                               "checkpoint": os.path.basename(progress["best_prefix"])})
    self.state.remove()

