"""What the loop's events mean for fine-tuning (training/task.py's `Events`): a shuffled pass
per epoch (a period; order fixed by seed + epoch, batched as --batching says), the epoch's train
loss, the dev metrics and the best epoch's weights after each, early stopping, and the run's
state (run_state.py) saved after every epoch and on SIGTERM.

`FineTuningEvents` is built whole by trial.py once the train step and the run's restored state
exist. After every epoch `evaluate` scores the dev set, then, each in its own method: the
epoch's history entry and TensorBoard scalars, its log line, the best epoch's checkpoint (and
SQuAD's prediction files), and the early stop.
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning import finetuned_dir
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.run_state import RunProgress
from roberta_tf.finetuning.squad import write as squad_write
from roberta_tf.finetuning.tagging import tag_write
from roberta_tf.finetuning.task import FineTuningTask
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.summaries import log
from roberta_tf.training.task import TrainingError
from roberta_tf.training.train_step import TrainStep


@dataclasses.dataclass
class TrialResult:
  """A run's outcome; `checkpoint` is the best epoch's prefix (None: stopped by SIGTERM);
  `test` the best epoch's test metrics (token classification with --test_file), else None."""
  learning_rate: float
  best_epoch: int
  metrics: dict
  history: list
  checkpoint: str | None
  run_dir: str
  test: dict | None = None


def format_metrics(metrics: dict) -> str:
  return " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if not k.endswith("total"))


@dataclasses.dataclass(frozen=True)
class RunInfo:
  """Where a run writes and how it reports: `run_dir` (TensorBoard, eval_results.json, QA
  predictions), `save_dir` (the best epoch's weights: run_dir, or a worker's temporary dir),
  `metric` (the dev metric that picks the best epoch), `name` (log lines), `clock` (the sweep's
  ETA: trial.SweepClock), `chief` (this worker writes the run's files)."""
  run_dir: str
  save_dir: str
  metric: str
  name: str
  clock: object
  chief: bool


class FineTuningEvents:
  """Fine-tuning's events (see the module docstring) for `task`'s run on `train_step`, with the
  run's state (run_state.RunState) and its `progress` (run_state.RunProgress, restored or
  fresh: history, best epoch, the epoch's loss so far; updated in place and saved with the
  state). `result` is the run's TrialResult once `finish` ran."""

  def __init__(self, task: FineTuningTask, train_step: TrainStep, state, progress: RunProgress,
               run: RunInfo):
    cfg = task.cfg
    self.task, self.cfg, self.problem = task, cfg, task.problem
    self.train_step, self.state, self.progress, self.run = train_step, state, progress, run
    self.summaries = summaries_lib.Summaries(run.run_dir, enabled=run.chief,
                                             tags=summaries_lib.FINETUNING)
    self.eval_ds = task.problem.eval_dataset(cfg.eval_batch_size or cfg.data.batch_size)
    model = train_step.model
    self.predict = tf.function(lambda inputs: model(inputs, training=False),
                               input_signature=[self.eval_ds.element_spec], autograph=False)
    test = getattr(task.problem, "test", None)  # token classification's --test_file
    self.test_ds = (task.problem.test_dataset(cfg.eval_batch_size or cfg.data.batch_size)
                    if test is not None else None)
    self.best = (progress.history[progress.best_epoch - 1]["dev"][run.metric]
                 if progress.best_epoch else None)
    self.epoch_start, self.learning_rate_now = time.perf_counter(), 0.0
    self.result: TrialResult | None = None

  def batches(self, step):
    cfg, steps_per_epoch = self.cfg, self.task.steps_per_epoch
    micro_batch = cfg.data.batch_size // cfg.optimizer.grad_accum_steps
    ds = self.problem.train_dataset(micro_batch, cfg.runtime.seed + step // steps_per_epoch,
                                    update_size=cfg.data.batch_size)
    ds = ds.skip(step % steps_per_epoch * cfg.optimizer.grad_accum_steps)
    self.epoch_start = time.perf_counter()
    strategy = self.task.strategy
    return iter(strategy.experimental_distribute_dataset(ds)
                if strategy.num_replicas_in_sync > 1 else ds).__next__

  def record(self, step, window, eta_s):
    """The window's loss into the epoch's (the epoch's line is written with its dev metrics)."""
    del step, eta_s
    w = window.summarize()
    self.progress.loss_sum += (w["loss"] * w["count"]) if w["count"] else 0.0
    self.progress.loss_count += w["count"]
    self.learning_rate_now = w["learning_rate"]

  def evaluate(self, step):
    epoch = self.task.epoch(step)
    evaluation = self.problem.evaluate([{k: v.numpy() for k, v in self.predict(b).items()}
                                        for b in self.eval_ds])
    dev = evaluation.metrics
    improved = problems_lib.is_better(self.run.metric, dev[self.run.metric], self.best)
    entry = self._close_epoch(epoch, step, dev)
    self._log_epoch(epoch, entry, improved)
    if improved:
      self._keep_best(epoch, dev, evaluation)
      return False
    return self._early_stop(epoch)

  def _close_epoch(self, epoch: int, step: int, dev: dict) -> dict:
    """The epoch's history entry (also its TensorBoard scalars); the epoch's loss restarts."""
    loss_sum, count = self.progress.loss_sum, self.progress.loss_count
    entry = {"epoch": epoch, "step": step,
             "train_loss": loss_sum / count if count else float("nan"),
             "skipped_steps": int(self.train_step.skipped_steps.numpy()), "dev": dev,
             "seconds": time.perf_counter() - self.epoch_start}
    self.progress.history.append(entry)
    self.summaries.scalars("train", step, {"loss": entry["train_loss"],
                                           "learning_rate": self.learning_rate_now,
                                           "skipped_steps": entry["skipped_steps"]})
    self.summaries.scalars("eval", step, dev)
    self.progress.loss_sum, self.progress.loss_count = 0.0, 0.0
    return entry

  def _log_epoch(self, epoch: int, entry: dict, improved: bool) -> None:
    log(f"{self.run.name} epoch {epoch}/{self.cfg.epochs}: train_loss "
        f"{entry['train_loss']:.4f} | dev {format_metrics(entry['dev'])} | "
        f"{entry['seconds']:.1f}s | sweep ETA <= "
        f"{self.run.clock.tick(entry['seconds'])}{' (best)' if improved else ''}")

  def _keep_best(self, epoch: int, dev: dict, evaluation: problems_lib.Evaluation) -> None:
    """A better epoch: its weights (and, for extractive QA, its answers' files; for token
    classification its dev tags, and with a test file its test metrics and tags) are kept."""
    self.best, self.progress.best_epoch = dev[self.run.metric], epoch
    self.progress.best_prefix = finetuned_dir.save_checkpoint(
        self.run.save_dir, self.train_step.model, epoch)
    if self.run.chief and evaluation.answers is not None:  # extractive QA
      squad_write.write_predictions(self.run.run_dir, *evaluation.answers)
    if evaluation.tags is not None:  # token classification
      self._keep_tags(evaluation)

  def _keep_tags(self, evaluation: problems_lib.Evaluation) -> None:
    """Token classification's best epoch: its dev tags; with a test file, its test metrics
    (into the run's progress: they are the run's "test") and tags."""
    problem, run_dir, chief = self.problem, self.run.run_dir, self.run.chief
    if chief:
      tag_write.write_predictions(files.join(run_dir, tag_write.DEV_FILE),
                                  problem.dev.sentences, evaluation.tags)
    if self.test_ds is None:
      return
    test = problem.score_test([{k: v.numpy() for k, v in self.predict(b).items()}
                               for b in self.test_ds])
    self.progress.best_test = test.metrics
    log(f"{self.run.name}: test {format_metrics(test.metrics)}")
    if chief:
      tag_write.write_predictions(files.join(run_dir, tag_write.TEST_FILE),
                                  problem.test.sentences, test.tags)

  def _early_stop(self, epoch: int) -> bool:
    """--early_stopping_patience epochs without a better dev metric end the run."""
    patience, best_epoch = self.cfg.early_stopping_patience, self.progress.best_epoch
    since_best = epoch - best_epoch
    if not patience or since_best < patience:
      return False
    log(f"{self.run.name}: early stop after epoch {epoch} ({since_best} epochs without a "
        f"better dev {self.run.metric}; best {self.best:.4f} at epoch {best_epoch})")
    return True

  def save(self, step, window):
    if window is not None:  # a signal mid-epoch: the epoch's loss so far goes into the state
      self.record(step, window, 0.0)
    self.state.save(step, self.progress)

  def diverged(self, step, bad_in_row):
    """Nothing to restore (the run's state was saved after the last epoch)."""
    return TrainingError(
        f"{self.run.name}: {bad_in_row} updates in a row (>= --max_bad_steps="
        f"{self.cfg.loop.max_bad_steps}) had a non-finite loss or gradient and were skipped (epoch "
        f"{self.task.epoch(step)}); lower the learning rate, set --clip_norm, or check "
        "--init_from")

  def stopped(self, step, reason):
    name, epoch = self.run.name, self.task.epoch(step)
    if step % self.task.steps_per_epoch:
      log(f"{reason}: {name} saved at update {step} (epoch {epoch}); rerun the same command "
          "to resume")
    else:
      log(f"{reason}: {name} saved after epoch {epoch}; rerun the same command to resume")

  def finish(self, step):
    del step
    progress, history, run = self.progress, self.progress.history, self.run
    best_epoch = progress.best_epoch
    self.result = TrialResult(
        self.cfg.optimizer.learning_rate, best_epoch, history[best_epoch - 1]["dev"], history,
        files.join(run.run_dir, files.basename(progress.best_prefix)), run.run_dir,
        progress.best_test)
    if run.chief:
      atomic_write.write_json(files.join(run.run_dir, finetuned_dir.RESULTS_FILE),
                              {**self.result.metrics,
                               "learning_rate": self.cfg.optimizer.learning_rate,
                               "epoch": best_epoch, "history": history,
                               "checkpoint": files.basename(progress.best_prefix),
                               "test": self.result.test})
    self.state.remove()
