"""The pretraining run: strategy, data, model, resume, the step loop, eval, checkpoints, summaries.

`pretrain(config)` is what `python -m roberta_tf.train` calls:
  resume from model_dir's newest complete checkpoint (else --init_from, else random init;
    never start over in a model dir that holds checkpoint files unless --overwrite)
  → the loop (training/loop.py: when logs, evals, saves, the bad-step stop and SIGTERM
    happen) with pretraining's events (`_Pretraining`):
  → every log_every: console line + TensorBoard scalars
  → every eval_every and at the end: held-out MLM loss / perplexity / accuracy beside the
    unigram baseline
  → every checkpoint_every, at the end, and on SIGTERM: a checkpoint (model, optimizer,
    counters, dropout RNG state, data position), then on SIGTERM a clean exit
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os

import keras
import tensorflow as tf

from roberta_tf.data import dataset_info
from roberta_tf.models import checkpoint_files
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.training import checkpointing, mlm_evaluation
from roberta_tf.training import cluster as cluster_lib
from roberta_tf.training import loop as loop_lib
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import pretraining_task as task
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.train_config import TrainConfig


class TrainingError(RuntimeError):
  """The run cannot go on (too many bad steps, inconsistent model dir, ...)."""


@dataclasses.dataclass
class PretrainingResult:
  """What `pretrain` returns.

  Attributes:
    step: the last step run.
    final_train: the last log window's train metrics: loss and accuracy (means over the
      window's applied steps, weighted by masked tokens), last_step_loss, grad_norm (mean),
      learning_rate and loss_scale (of the last step), perplexity, tokens_per_sec,
      examples_per_sec, mfu, input_wait_fraction, skipped_steps.
    eval_history: [(step, {"loss", "perplexity", "mlm_accuracy", "masked_tokens"})], with the
      eval at step 0 (fresh runs) and at the end.
    stopped_by_signal: SIGTERM ended the run early (after a checkpoint).
  """
  step: int
  final_train: dict
  eval_history: list
  stopped_by_signal: bool = False


def pretrain(cfg: TrainConfig, strategy: tf.distribute.Strategy | None = None) -> PretrainingResult:
  """Runs (or resumes) pretraining as configured; returns the final metrics.

  Raises:
    TrainingError: ``max_bad_steps`` non-finite steps in a row (after restoring the last good
      checkpoint), or a save refused because a weight is non-finite.
    ValueError / DatasetInfoError / ModelDirError: bad configuration or data (names the flag).
    checkpointing.CheckpointError: another process trains in model_dir, its checkpoint files
      hold no complete checkpoint, or a save failed (disk full); names the files.
  """
  cfg.validate()
  # The strategy first: multi-worker must configure collectives before TF initializes.
  strategy = strategy or strategy_lib.make_strategy(cfg.strategy, cfg.tpu, cfg.peer_timeout,
                                                    summaries_lib.log)
  if cfg.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(cfg.seed)
  chief = strategy_lib.is_chief(strategy)
  # The chief holds the model dir's lock for the whole run: no second process writes there.
  with checkpointing.DirectoryLock(cfg.model_dir) if chief else contextlib.nullcontext():
    info = dataset_info.read(cfg.train_data)
    model_config = task.resolve_model_config(cfg, info)
    if chief:  # after the data and config checks: a bad flag never costs a checkpoint
      task.clean_model_dir(cfg, summaries_lib.log)
    task.check_resumable(cfg.model_dir, model_config)
    task.check_schedule_change(cfg, summaries_lib.log if chief else None)
    if chief:
      task.prepare_model_dir(cfg, info, model_config, strategy.num_replicas_in_sync)

    trainer = task.build_trainer(cfg, strategy, model_config)
    model, opt = trainer.model, trainer.optimizer
    ckpt = checkpointing.Checkpointer(cfg.model_dir, {"model": model, "optimizer": opt,
                                                      **trainer.checkpoint_items()},
                                      keep=cfg.keep_checkpoints, is_chief=chief,
                                      task_id=strategy_lib.task_id(strategy))
    try:
      # A peer lost mid-run: one line naming it and the checkpoint a restart resumes from.
      with cluster_lib.named_failures(strategy_lib.cluster_of(strategy), cfg.model_dir,
                                      lambda: max(checkpoint_files.steps_on_disk(cfg.model_dir),
                                                  default=None)):
        return _run(cfg, strategy, chief, info, model_config, trainer, ckpt)
    finally:
      ckpt.close()


def _run(cfg, strategy, chief, info, model_config, trainer, ckpt) -> PretrainingResult:
  """Resume, data, then the loop (training/loop.py) with pretraining's events."""
  model = trainer.model
  resumed = None if cfg.overwrite else ckpt.restore_latest(chief_dir=cfg.model_dir,
                                                          log=summaries_lib.log)
  if resumed:
    summaries_lib.log(f"resumed from {resumed} at step {int(trainer.step.numpy())}")
  elif cfg.init_from:
    model_dir_lib.restore(model, model_dir_lib.latest_checkpoint(cfg.init_from))
    summaries_lib.log(f"initialized weights from {cfg.init_from}")

  start = int(trainer.data_position.numpy())
  if resumed and not start and int(trainer.step.numpy()):
    # A checkpoint from before data_position: its rounds of this split. The stream's order
    # changed with it, so this continues at the same amount of data, not the same sequences.
    start = int(trainer.data_rounds.numpy()) * trainer.config.sequences_per_round
    trainer.data_position.assign(start)
    summaries_lib.log(f"warning: {resumed} predates the recorded data position; resuming at "
                      f"sequence {start} of the current data order (the order has changed "
                      "since that checkpoint was written)")
  train_ds, eval_ds = task.build_datasets(cfg, strategy, model_config, start=start)
  summaries = summaries_lib.Summaries(cfg.model_dir, enabled=chief)
  if not resumed and chief:
    with open(os.path.join(cfg.model_dir, "config.json"), encoding="utf-8") as f:
      summaries.text("train", 0, "config", "```\n" + f.read() + "```")
  evaluator = mlm_evaluation.Evaluator(strategy, model, unigram_log_probs=(
      task.unigram_table(cfg, model_config, info) if eval_ds is not None else None))
  events = _Pretraining(cfg, trainer, ckpt, chief, iter(train_ds), eval_ds, evaluator,
                        _LogWindow(cfg, trainer, summaries,
                                   task.mfu_denominator(cfg, strategy, model_config)),
                        summaries, resumed)
  step = int(trainer.step.numpy())
  events.start_step = step
  if step == 0:
    events.evaluate(0)
  result = loop_lib.Loop(strategy, trainer, events, loop_lib.LoopSchedule(
      # A time budget ends the run, not the step count (the loop's bound is then nominal).
      total_steps=cfg.train_steps if not cfg.train_minutes else 2**62,
      budget_s=cfg.train_minutes * 60, log_every=cfg.log_every, eval_every=cfg.eval_every,
      save_every=cfg.checkpoint_every, max_bad_steps=cfg.max_bad_steps,
      check_every=cfg.max_bad_steps), budget_fraction=getattr(
          optimizer_lib.budget_schedule(trainer.optimizer), "fraction", None)).run(step)
  return PretrainingResult(step=result.step, final_train=events.final, eval_history=events.history,
                   stopped_by_signal=result.stopped_by_signal)


class _Pretraining:
  """Pretraining's side of the loop (training/loop.py `LoopTask`): one stream of batches,
  log lines and train scalars, held-out MLM evals with the unigram baseline, checkpoints."""

  def __init__(self, cfg, trainer, ckpt, chief, iterator, eval_ds, evaluator, log_window,
               summaries, resumed):
    self.cfg, self.trainer, self.ckpt, self.chief = cfg, trainer, ckpt, chief
    self.iterator, self.eval_ds, self.evaluator = iterator, eval_ds, evaluator
    self.log_window, self.summaries, self.resumed = log_window, summaries, resumed
    self.final, self.history, self.start_step = {}, [], 0

  def batches(self, step):
    del step  # one stream, positioned at the resume point when it was built
    return lambda: next(self.iterator)

  def log(self, step, window, eta_s):
    self.final = self.log_window.flush(step, window)
    summaries_lib.log(summaries_lib.progress_line(step, None if self.cfg.train_minutes else
                                                  self.cfg.train_steps, self.final,
                                                  eta_s))

  def evaluate(self, step):
    cfg = self.cfg
    if self.eval_ds is None:
      return False
    metrics = self.evaluator(self.eval_ds, cfg.eval_steps)
    self.history.append((step, metrics))
    self.summaries.scalars("eval", step, {k: metrics[k] for k in (
        "loss", "perplexity", "mlm_accuracy", "unigram_perplexity", "nsp_loss",
        "nsp_accuracy") if k in metrics})
    summaries_lib.log(mlm_evaluation.eval_line(f"eval step {step}", metrics))
    if mlm_evaluation.on_unigram_plateau(metrics, step, cfg.warmup_steps):
      summaries_lib.log(
          f"warning: at step {step} held-out perplexity {metrics['perplexity']:.1f} is within "
          f"5% of the unigram baseline {metrics['unigram_perplexity']:.1f}: the model still "
          "predicts token frequencies, not context. If this persists, try a lower "
          f"--learning_rate (now {cfg.learning_rate:g}) or a longer --warmup_steps (now "
          f"{cfg.warmup_steps}).")
    return False

  def save(self, step, window=None):
    del window  # the data position and counters are in the checkpoint already
    try:
      path = self.ckpt.save(step)  # a failed write raises CheckpointError naming the files
    except checkpointing.NonFiniteWeightsError as e:
      raise TrainingError(f"{e}; the last good checkpoint is {self.ckpt.latest}") from e
    if self.chief:
      summaries_lib.log(f"saved {path}")

  def too_many_bad_steps(self, step, bad_in_row):
    good = self.ckpt.latest
    if good:
      self.ckpt.restore(good)
    return TrainingError(
        f"{bad_in_row} steps in a row (>= --max_bad_steps={self.cfg.max_bad_steps}) had a "
        f"non-finite loss or gradient and were skipped (at step {step}); restored the last "
        f"good checkpoint {good or '(none: nothing was saved)'}. Lower --learning_rate, set "
        "--clip_norm, or check the data and --init_from.")

  def stopped(self, step, reason):
    summaries_lib.log(f"{reason}: saved step {step}; exiting cleanly (the same command "
                      "resumes)")

  def finish(self, step):
    if step > self.start_step or not self.resumed:  # a resume at --train_steps: nothing new
      self.save(step)
    summaries_lib.log(f"trained to step {step}: weights sha256 "
                      f"{checkpointing.weights_digest(self.trainer.model)[:16]}")
    self.evaluate(step)


class _LogWindow:
  """The updates since the last log line, and what a log step makes of them: the metrics
  (PretrainingResult.final_train) and the train scalars in TensorBoard."""

  _SCALARS = ("loss", "perplexity", "learning_rate", "grad_norm", "tokens_per_sec",
              "examples_per_sec", "mfu", "input_wait_fraction", "skipped_steps")

  def __init__(self, cfg: TrainConfig, trainer, summaries, mfu_denominator: float):
    self.cfg, self.trainer, self.summaries = cfg, trainer, summaries
    self.mfu_denominator = mfu_denominator  # an update's FLOPs / peak FLOP/s

  def flush(self, step: int, window: StepWindow) -> dict:
    w = window.summarize()
    elapsed, steps = w["elapsed_s"], len(window)
    final = {k: w[k] for k in ("loss", "accuracy", "grad_norm", "learning_rate", "loss_scale",
                               "last_step_loss")}
    final.update(tokens_per_sec=w["tokens"] / elapsed,
                 examples_per_sec=steps * self.cfg.batch_size / elapsed,
                 mfu=steps * self.mfu_denominator / elapsed,
                 input_wait_fraction=w["input_wait_s"] / elapsed,
                 perplexity=math.exp(min(final["loss"], 700.0)),
                 skipped_steps=float(self.trainer.skipped_steps.numpy()))
    if "sum/nsp_count" in w:  # NSP ablation: "loss" is MLM + NSP; report the parts
      ratio = lambda a, b: a / b if b else float("nan")  # no applied update: NaN, like loss
      final.update(mlm_loss=ratio(w["sum/mlm_loss"], w["count"]),
                   nsp_loss=ratio(w["sum/nsp_loss"], w["sum/nsp_count"]),
                   nsp_accuracy=ratio(w["sum/nsp_correct"], w["sum/nsp_count"]))
      final["perplexity"] = math.exp(min(final["mlm_loss"], 700.0))
    scalars = {k: final[k] for k in self._SCALARS}
    scalars["mlm_accuracy"] = final["accuracy"]
    for k in ("mlm_loss", "nsp_loss", "nsp_accuracy"):
      if k in final:
        scalars[k] = final[k]
    if self.trainer.fp16:
      scalars["loss_scale"] = final["loss_scale"]
      scalars["overflow_steps"] = float(self.trainer.overflow_steps.numpy())
    self.summaries.scalars("train", step, scalars)
    return final
