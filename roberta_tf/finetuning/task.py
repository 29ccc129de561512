"""Fine-tuning on one problem, whole (Model Garden's *task*; training/task.py's `Task`): the
encoder and head (warm_start.py), AdamW with `warmup_ratio` linear warmup then linear decay to 0
over epochs x updates_per_epoch updates, the train step's settings, the problem's objective,
and what the loop's events mean for fine-tuning: a shuffled pass per epoch (a period; order
fixed by seed + epoch, batched as --batching says), the epoch's train loss, the dev metrics and
the best epoch's weights after each, early stopping, and the run's state (run_state.py) saved
after every epoch and on SIGTERM. trial.py runs it.
"""

from __future__ import annotations

import dataclasses
import math
import time

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning import finetuned_dir, squad_write, warm_start
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.objective import ProblemObjective
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.summaries import log
from roberta_tf.training.train_step import StepConfig


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


def updates_per_epoch(num_train: int, batch_size: int, grad_accum_steps: int) -> int:
  """Updates in one pass: every micro-batch (the last may be partial) in groups of
  grad_accum_steps; a final incomplete group is dropped."""
  micro = math.ceil(num_train / (batch_size // grad_accum_steps))
  return max(micro // grad_accum_steps, 1)


def format_metrics(metrics: dict) -> str:
  return " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if not k.endswith("total"))


class FineTuningTask:
  """One run's task: `cfg` holds its batch size, learning rate and seed (a sweep replaces them
  per run); `problem` its data, loss and metrics; `metric` the dev metric that picks the best
  epoch. `attach` hands the events the train step and the run's state once they exist."""

  def __init__(self, cfg: FinetuneConfig, problem: problems_lib.Problem,
               model_config: models.RobertaConfig, strategy: tf.distribute.Strategy,
               run_dir: str, metric: str, name: str, clock, chief: bool):
    self.cfg, self.problem, self.model_config = cfg, problem, model_config
    self.strategy, self.run_dir, self.metric = strategy, run_dir, metric
    self.name, self.clock, self.chief = name, clock, chief
    self.steps_per_epoch = updates_per_epoch(problem.num_train, cfg.batch_size,
                                             cfg.grad_accum_steps)
    self.total_steps = cfg.epochs * self.steps_per_epoch
    self.result = None

  # ---- what the train step runs ----
  def build_model(self):
    return warm_start.warm_started_model(self.model_config, self.problem.info,
                                         dtype=self.cfg.precision, init_from=self.cfg.init_from)

  def build_optimizer(self, model):
    """Pretraining's AdamW (the train step all-reduces), no weight decay on LayerNorm/bias."""
    cfg = self.cfg
    return optimizer_lib.adamw(
        variables=model.trainable_variables, learning_rate=cfg.learning_rate,
        warmup_steps=int(round(cfg.warmup_ratio * self.total_steps)),
        train_steps=self.total_steps, weight_decay=cfg.weight_decay, beta_1=cfg.adam_beta1,
        beta_2=cfg.adam_beta2, epsilon=cfg.adam_epsilon)

  def step_config(self) -> StepConfig:
    cfg = self.cfg
    micro_batch = cfg.batch_size // cfg.grad_accum_steps  # global examples per micro-batch
    return StepConfig(
        grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
        norm_per_micro_batch=float(max(micro_batch // self.strategy.num_replicas_in_sync, 1)))

  def objective(self) -> ProblemObjective:
    return ProblemObjective(self.problem)

  # ---- the loop's events ----
  def attach(self, train_step, state, progress: dict, save_dir: str) -> None:
    """What the events act on: the train step, the run's state (run_state.RunState) and its
    progress, and the directory the best epoch's weights go to."""
    cfg = self.cfg
    self.train_step, self.model = train_step, train_step.model
    self.state, self.progress, self.save_dir = state, progress, save_dir
    self.summaries = summaries_lib.Summaries(self.run_dir, enabled=self.chief,
                                             tags=summaries_lib.FINETUNING)
    self.eval_ds = self.problem.eval_dataset(cfg.eval_batch_size or cfg.batch_size)
    model = self.model
    self.predict = tf.function(lambda inputs: model(inputs, training=False),
                               input_signature=[self.eval_ds.element_spec])
    history = progress["history"]
    self.best = (history[progress["best_epoch"] - 1]["dev"][self.metric]
                 if progress["best_epoch"] else None)
    self.epoch_start, self.learning_rate_now = time.perf_counter(), 0.0

  def epoch(self, step: int) -> int:
    """The epoch (1-based) that update `step` (after it) belongs to."""
    return (step - 1) // self.steps_per_epoch + 1

  def batches(self, step):
    cfg = self.cfg
    micro_batch = cfg.batch_size // cfg.grad_accum_steps
    ds = self.problem.train_dataset(micro_batch, cfg.seed + step // self.steps_per_epoch,
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
    progress, metric, problem = self.progress, self.metric, self.problem
    history = progress["history"]
    epoch = self.epoch(step)
    loss_sum, count = progress["epoch_loss"]
    evaluation = problem.evaluate([{k: v.numpy() for k, v in self.predict(b).items()}
                                   for b in self.eval_ds])
    dev = evaluation.metrics
    improved = problems_lib.is_better(metric, dev[metric], self.best)
    history.append({"epoch": epoch, "step": step, "train_loss": loss_sum / count if count
                    else float("nan"), "skipped_steps": int(self.train_step.skipped_steps.numpy()),
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
      if self.chief and evaluation.answers is not None:  # extractive QA
        squad_write.write_predictions(self.run_dir, *evaluation.answers)
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
        self.cfg.learning_rate, best_epoch, history[best_epoch - 1]["dev"], history,
        files.join(self.run_dir, files.basename(progress["best_prefix"])), self.run_dir)
    if self.chief:
      atomic_write.write_json(files.join(self.run_dir, finetuned_dir.RESULTS_FILE),
                              {**self.result.metrics, "learning_rate": self.cfg.learning_rate,
                               "epoch": best_epoch, "history": history,
                               "checkpoint": files.basename(progress["best_prefix"])})
    self.state.remove()

