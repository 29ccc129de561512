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
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.objectives import TaskObjective
from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.trainer import StepConfig, Trainer


class FinetuneError(RuntimeError):
  """A run cannot go on (diverged, inconsistent inputs); the message says what to change."""


@dataclasses.dataclass
class RunResult:
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


def finished_run(run_dir: str) -> RunResult | None:
  """A run of an earlier attempt of this sweep that finished, read back; else None."""
  path = os.path.join(run_dir, finetuned_dir.RESULTS_FILE)
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8") as f:
    doc = json.load(f)
  return RunResult(doc["learning_rate"], doc["epoch"], doc["history"][doc["epoch"] - 1]["dev"],
                   doc["history"], os.path.join(run_dir, doc["checkpoint"]), run_dir)


class SweepClock:
  """ETA of the whole sweep: epochs left (an upper bound: early stopping ends runs sooner)
  x the mean epoch time so far."""

  def __init__(self, total_epochs: int):
    self.left, self.seconds, self.done = total_epochs, 0.0, 0

  def tick(self, seconds: float) -> str:
    self.left, self.seconds, self.done = self.left - 1, self.seconds + seconds, self.done + 1
    return summaries_lib.format_eta(self.left * self.seconds / self.done)


def train_run(cfg: FinetuneConfig, task: tasks_lib.Task, model_config: models.RobertaConfig,
              learning_rate: float, strategy: tf.distribute.Strategy, run_dir: str,
              metric: str, sigterm, clock: SweepClock, label: str = "") -> RunResult:
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
  summaries = summaries_lib.Summaries(run_dir, enabled=chief, tags=summaries_lib.FINETUNING)
  eval_ds = task.eval_dataset(cfg.eval_batch_size or cfg.batch_size)
  predict = tf.function(lambda inputs: model(inputs, training=False),
                        input_signature=[eval_ds.element_spec])
  history = progress["history"]
  best = history[progress["best_epoch"] - 1]["dev"][metric] if progress["best_epoch"] else None

  def batches(epoch, skip_updates):
    ds = task.train_dataset(micro_batch, cfg.seed + epoch - 1, update_size=cfg.batch_size)
    ds = ds.skip(skip_updates * cfg.grad_accum_steps)
    return iter(strategy.experimental_distribute_dataset(ds) if replicas > 1 else ds)

  os.makedirs(save_dir, exist_ok=True)
  while update < cfg.epochs * steps_per_epoch:
    epoch, start = update // steps_per_epoch + 1, time.perf_counter()
    window, next_batch = StepWindow(), batches(epoch, update % steps_per_epoch).__next__
    while update < epoch * steps_per_epoch and not sigterm.raised:
      window.add(*trainer.train_step(next_batch))
      update += 1
    w = window.summarize()
    progress["epoch_loss"][0] += (w["loss"] * w["count"]) if w["count"] else 0.0
    progress["epoch_loss"][1] += w["count"]
    bad = int(trainer.bad_steps_in_row.numpy())
    if bad >= cfg.max_bad_steps:
      raise FinetuneError(
          f"{name}: {bad} updates in a row (>= --max_bad_steps="
          f"{cfg.max_bad_steps}) had a non-finite loss or gradient and were skipped (epoch "
          f"{epoch}); lower the learning rate, set --clip_norm, or check --init_from")
    if update < epoch * steps_per_epoch:  # SIGTERM mid-epoch
      state.save(update, progress)
      log(f"SIGTERM: {name} saved at update {update} (epoch {epoch}); rerun the "
          "same command to resume")
      return RunResult(learning_rate, 0, {}, history, None, run_dir)
    loss_sum, count = progress["epoch_loss"]
    dev = task.evaluate([{k: v.numpy() for k, v in predict(b).items()} for b in eval_ds])
    improved = tasks_lib.is_better(metric, dev[metric], best)
    history.append({"epoch": epoch, "step": update, "train_loss": loss_sum / count if count
                    else float("nan"), "skipped_steps": int(trainer.skipped_steps.numpy()),
                    "dev": dev, "seconds": time.perf_counter() - start})
    summaries.scalars("train", update, {"loss": history[-1]["train_loss"],
                                        "learning_rate": w["learning_rate"],
                                        "skipped_steps": history[-1]["skipped_steps"]})
    summaries.scalars("eval", update, dev)
    log(f"{name} epoch {epoch}/{cfg.epochs}: train_loss "
        f"{history[-1]['train_loss']:.4f} | dev {format_metrics(dev)} | "
        f"{history[-1]['seconds']:.1f}s | sweep ETA <= {clock.tick(history[-1]['seconds'])}"
        f"{' (best)' if improved else ''}")
    progress["epoch_loss"] = [0.0, 0.0]
    if improved:
      best, progress["best_epoch"] = dev[metric], epoch
      progress["best_prefix"] = finetuned_dir.save_checkpoint(save_dir, model, epoch)
      if chief and isinstance(task, tasks_lib.ExtractiveQATask):
        squad.write_predictions(run_dir, *task.predictions)
    else:
      since_best = epoch - progress["best_epoch"]
      if cfg.early_stopping_patience and since_best >= cfg.early_stopping_patience:
        log(f"{name}: early stop after epoch {epoch} ({since_best} "
            f"epochs without a better dev {metric}; best {best:.4f} at epoch "
            f"{progress['best_epoch']})")
        break
    if update < cfg.epochs * steps_per_epoch:
      state.save(update, progress)
      if sigterm.raised:
        log(f"SIGTERM: {name} saved after epoch {epoch}; rerun the same command "
            "to resume")
        return RunResult(learning_rate, 0, {}, history, None, run_dir)
  best_epoch = progress["best_epoch"]
  result = RunResult(learning_rate, best_epoch, history[best_epoch - 1]["dev"], history,
                     os.path.join(run_dir, os.path.basename(progress["best_prefix"])), run_dir)
  if chief:
    atomic_write.write_json(os.path.join(run_dir, finetuned_dir.RESULTS_FILE),
                            {**result.metrics, "learning_rate": learning_rate,
                             "epoch": best_epoch, "history": history,
                             "checkpoint": os.path.basename(progress["best_prefix"])})
  state.remove()
  return result


def log(line: str) -> None:
  print(line, flush=True)
