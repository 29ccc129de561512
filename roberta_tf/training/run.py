"""The pretraining run: strategy, data, model, resume, the step loop, eval, checkpoints, summaries.

`train(config)` is what `python -m roberta_tf.train` calls. The loop:
  resume from model_dir's newest complete checkpoint (else --init_from, else random init;
    never start over in a model dir that holds checkpoint files unless --overwrite)
  → for each step: Trainer.train_step (accumulation over micro-batches, one update)
  → every log_every: console line + TensorBoard scalars
  → every eval_every and at the end: held-out MLM loss / perplexity / accuracy
  → every checkpoint_every, at the end, and on SIGTERM: a checkpoint (model, optimizer,
    counters, dropout RNG state, data position), then on SIGTERM a clean exit; in a
    multi-worker run SIGTERM to any one worker stops all of them at the same step, after one
    common checkpoint (preemption.py)
The host waits for the device only at log steps, bad-step checks (every --max_bad_steps
steps), saves and evals: step outputs stay tensors until then (no per-step sync).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import time

import keras
import tensorflow as tf

from roberta_tf.data import dataset_info
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.training import checkpointing, evaluation, preemption
from roberta_tf.training import pretraining_task as task
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.sigterm import SigtermFlag
from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.train_config import TrainConfig


class TrainingError(RuntimeError):
  """The run cannot go on (too many bad steps, inconsistent model dir, ...)."""


@dataclasses.dataclass
class RunResult:
  """What `train` returns.

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


def train(cfg: TrainConfig, strategy: tf.distribute.Strategy | None = None) -> RunResult:
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
  strategy = strategy or strategy_lib.make_strategy(cfg.strategy, cfg.tpu)
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
    if chief:
      task.prepare_model_dir(cfg, info, model_config, strategy.num_replicas_in_sync)

    trainer = task.build_trainer(cfg, strategy, model_config)
    model, opt = trainer.model, trainer.optimizer
    ckpt = checkpointing.Checkpointer(cfg.model_dir, {"model": model, "optimizer": opt,
                                                      **trainer.checkpoint_items()},
                                      keep=cfg.keep_checkpoints, is_chief=chief,
                                      task_id=strategy_lib.task_id(strategy))
    try:
      return _run(cfg, strategy, chief, info, model_config, trainer, ckpt)
    finally:
      ckpt.close()


def _run(cfg, strategy, chief, info, model_config, trainer, ckpt) -> RunResult:
  """The loop of `train`: resume, data, evals, steps, logs, saves."""
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
  iterator = iter(train_ds)
  summaries = summaries_lib.Summaries(cfg.model_dir, enabled=chief)
  if not resumed and chief:
    with open(os.path.join(cfg.model_dir, "config.json"), encoding="utf-8") as f:
      summaries.text("train", 0, "config", "```\n" + f.read() + "```")

  eval_history = []
  evaluator = evaluation.Evaluator(strategy, model, unigram_log_probs=(
      task.unigram_table(cfg, model_config, info) if eval_ds is not None else None))
  log_window = _LogWindow(cfg, trainer, summaries, task.mfu_denominator(cfg, strategy,
                                                                       model_config))

  def run_eval(step):
    if eval_ds is None:
      return
    metrics = evaluator(eval_ds, cfg.eval_steps)
    eval_history.append((step, metrics))
    summaries.scalars("eval", step, {k: metrics[k] for k in (
        "loss", "perplexity", "mlm_accuracy", "unigram_perplexity", "nsp_loss",
        "nsp_accuracy") if k in metrics})
    summaries_lib.log(evaluation.eval_line(f"eval step {step}", metrics))
    if evaluation.on_unigram_plateau(metrics, step, cfg.warmup_steps):
      summaries_lib.log(
          f"warning: at step {step} held-out perplexity {metrics['perplexity']:.1f} is within "
          f"5% of the unigram baseline {metrics['unigram_perplexity']:.1f}: the model still "
          "predicts token frequencies, not context. If this persists, try a lower "
          f"--learning_rate (now {cfg.learning_rate:g}) or a longer --warmup_steps (now "
          f"{cfg.warmup_steps}).")

  def save(step):
    try:
      path = ckpt.save(step)  # a failed write raises CheckpointError naming the files
    except checkpointing.NonFiniteWeightsError as e:
      raise TrainingError(f"{e}; the last good checkpoint is {ckpt.latest}") from e
    if chief:
      summaries_lib.log(f"saved {path}")
    return path

  def check_bad_steps(step):
    if int(trainer.bad_steps_in_row.numpy()) < cfg.max_bad_steps:
      return
    good = ckpt.latest
    if good:
      ckpt.restore(good)
    raise TrainingError(
        f"{int(trainer.bad_steps_in_row.numpy())} steps in a row (>= --max_bad_steps="
        f"{cfg.max_bad_steps}) had a non-finite loss or gradient and were skipped (at step "
        f"{step}); restored the last good checkpoint {good or '(none: nothing was saved)'}. "
        "Lower --learning_rate, set --clip_norm, or check the data and --init_from.")

  step = int(trainer.step.numpy())
  if step == 0:
    run_eval(0)
  final = {}
  start_time, start_step = time.perf_counter(), step
  stopped = False
  with SigtermFlag() as sigterm:
    stop = preemption.PreemptionSync(strategy, sigterm)
    while step < cfg.train_steps:
      log_window.window.add(*trainer.train_step(lambda: next(iterator)))
      step += 1
      # The host syncs with the device only here: log steps, bad-step checks, saves, evals.
      log_now = step % cfg.log_every == 0 or step == cfg.train_steps
      stop_now = stop.stop_now()  # read once: a SIGTERM arriving later is handled next step
      save_now = stop_now or (step % cfg.checkpoint_every == 0 and step < cfg.train_steps)
      if log_now or save_now or step % cfg.max_bad_steps == 0:
        check_bad_steps(step)
      if log_now:
        final = log_window.flush(step)
        eta = (time.perf_counter() - start_time) / (step - start_step) * (cfg.train_steps - step)
        summaries_lib.log(summaries_lib.progress_line(step, cfg.train_steps, final, eta))
      if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.train_steps:
        run_eval(step)
      if save_now:
        save(step)
      if stop_now:
        where = "" if stop.signalled_here else " (to another worker)"
        summaries_lib.log(f"{sigterm.name or 'SIGTERM'}{where}: saved step {step}; exiting "
                          "cleanly (the same command resumes)")
        stopped = True
        break
  if not stopped:
    if step > start_step or not resumed:  # a resume at --train_steps has nothing new to save
      save(step)
    summaries_lib.log(f"trained to step {step}: weights sha256 "
                      f"{checkpointing.weights_digest(model)[:16]}")
    run_eval(step)
  return RunResult(step=step, final_train=final, eval_history=eval_history,
                   stopped_by_signal=stopped)


class _LogWindow:
  """The updates since the last log line, and what a log step makes of them: the metrics
  (RunResult.final_train) and the train scalars in TensorBoard."""

  _SCALARS = ("loss", "perplexity", "learning_rate", "grad_norm", "tokens_per_sec",
              "examples_per_sec", "mfu", "input_wait_fraction", "skipped_steps")

  def __init__(self, cfg: TrainConfig, trainer, summaries, mfu_denominator: float):
    self.cfg, self.trainer, self.summaries = cfg, trainer, summaries
    self.mfu_denominator = mfu_denominator  # an update's FLOPs / peak FLOP/s
    self.window = StepWindow()

  def flush(self, step: int) -> dict:
    w = self.window.summarize()
    elapsed, steps = w["elapsed_s"], len(self.window)
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
    self.window = StepWindow()
    return final
