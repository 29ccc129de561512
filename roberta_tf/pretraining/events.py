"""What the loop's events mean for pretraining (training/task.py's `Events`): one stream of
batches, log lines and train scalars, held-out MLM evals beside the unigram baseline,
checkpoints, the best checkpoint and early stopping (best_checkpoint.py), and the last good
checkpoint restored when the run diverges.

`PretrainingEvents` is built whole by run.py once what it acts on exists: the train step, its
checkpointer, the datasets at the resumed data position, the unigram baseline and the
summaries.
"""

from __future__ import annotations

import math

import tensorflow as tf

from roberta_tf import models
from roberta_tf.models import flops, registry
from roberta_tf.pretraining import best_checkpoint, mlm_evaluation, position_buckets
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import checkpointing, precision_probe
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.task import TrainingError
from roberta_tf.training.train_step import TrainStep


def replica_peak_flops(cfg: TrainConfig, strategy: tf.distribute.Strategy, log) -> float:
  """One replica's peak FLOP/s for MFU: --peak_flops, else this machine's peak measured in the
  precision trained in (training/precision_probe.py: a matmul, cached per machine), said in one
  line to `log`. NaN on a TPU without --peak_flops (the probe would time the host)."""
  if cfg.peak_flops:
    log(f"peak for MFU: --peak_flops={cfg.peak_flops / 1e9:.0f} GFLOP/s")
    return cfg.peak_flops
  if isinstance(strategy, tf.distribute.TPUStrategy):
    log("peak for MFU: not measured on a TPU (MFU is NaN): pass --peak_flops")
    return float("nan")
  return precision_probe.peak_flops(cfg.runtime.precision, log)[0]


def mfu_denominator(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                    model_config: models.RobertaConfig, log=summaries_lib.log) -> float:
  """FLOPs of one update (models/flops.py, from what `model_config`'s layers compute) / the
  replicas' peak FLOP/s: MFU = updates x this / seconds."""
  predictions = cfg.for_family(registry.family_of(model_config)).masking_config(
      ).resolved_max_predictions(cfg.data.max_seq_len)
  step_flops = flops.train_step_flops(
      model_config.flop_terms(), seq_len=cfg.data.max_seq_len, predictions_per_seq=predictions,
      sequences=cfg.data.batch_size)
  peak = replica_peak_flops(cfg, strategy, log)
  return step_flops / (peak * strategy.num_replicas_in_sync)


class PretrainingEvents:
  """Pretraining's events (see the module docstring).

  Args:
    cfg: the run's config.
    strategy: the run's strategy.
    train_step: the train step (its model, counters and step).
    ckpt: its checkpointer.
    resumed: the checkpoint resumed from (None: a fresh run).
    train_ds: the distributed train dataset, from the resumed data position.
    eval_ds: the distributed eval dataset (None: no --eval_data).
    unigram_log_probs: the unigram baseline (float32 [V]; None without eval).
    summaries: the run's TensorBoard summaries.
    best: the lowest held-out loss so far (restored with the checkpoint).

  Attributes read by run.py: `final` (the last record's train metrics) and `history`
  ([(step, eval metrics)]).
  """

  def __init__(self, cfg: TrainConfig, strategy: tf.distribute.Strategy, train_step: TrainStep,
               ckpt: checkpointing.Checkpointer, resumed: str | None, train_ds, eval_ds,
               unigram_log_probs, summaries: summaries_lib.Summaries,
               best: best_checkpoint.BestEval):
    self.cfg, self.train_step, self.ckpt, self.resumed = cfg, train_step, ckpt, resumed
    self.chief, self.task_id = strategy_lib.is_chief(strategy), strategy_lib.task_id(strategy)
    self.best, self.evaluated_at = best, None
    self.iterator, self.eval_ds, self.summaries = iter(train_ds), eval_ds, summaries
    self.evaluator = mlm_evaluation.Evaluator(strategy, train_step.model,
                                              unigram_log_probs=unigram_log_probs)
    self.train_log = _TrainLog(cfg, train_step, summaries,
                               mfu_denominator(cfg, strategy, train_step.model.config))
    self.start_step = int(train_step.step.numpy())
    self.final, self.history = {}, []

  def batches(self, step):
    del step  # one stream, positioned at the resume point when it was built
    return lambda: next(self.iterator)

  def record(self, step, window, eta_s):
    """A log line and the train scalars of the updates in `window`."""
    self.final = self.train_log.flush(step, window)
    summaries_lib.log(summaries_lib.progress_line(step, None if self.cfg.train_minutes else
                                                  self.cfg.train_steps, self.final,
                                                  eta_s))

  def evaluate(self, step):
    """The held-out metrics at `step` (logged, in TensorBoard), the best checkpoint; True: stop
    early (--patience)."""
    cfg = self.cfg
    if self.eval_ds is None:
      return False
    metrics = self.evaluator(self.eval_ds, cfg.loop.eval_steps)
    self.evaluated_at = step
    self.history.append((step, metrics))
    self.summaries.scalars("eval", step, mlm_evaluation.summary_scalars(metrics))
    summaries_lib.log(mlm_evaluation.eval_line(f"eval step {step}", metrics))
    if "loss_by_position" in metrics:
      summaries_lib.log(f"eval step {step} {position_buckets.line(metrics)}")
    if mlm_evaluation.on_unigram_plateau(metrics, step, cfg.optimizer.warmup_steps):
      summaries_lib.log(
          f"warning: at step {step} held-out perplexity {metrics['perplexity']:.1f} is within "
          f"5% of the unigram baseline {metrics['unigram_perplexity']:.1f}: the model still "
          "predicts token frequencies, not context. If this persists, try a lower "
          f"--learning_rate (now {cfg.optimizer.learning_rate:g}) or a longer --warmup_steps (now "
          f"{cfg.optimizer.warmup_steps}).")
    return self._judge(step, metrics)

  def _judge(self, step, metrics) -> bool:
    """The eval against the best so far: best/ rewritten on an improvement (--keep_best);
    True when --patience evals in a row brought none."""
    cfg, best = self.cfg, self.best
    if best.update(metrics["loss"], step) and cfg.keep_best:
      prefix = best_checkpoint.write_best(cfg.model.model_dir, self.train_step.model, step,
                                          metrics, self.chief, self.task_id)
      if self.chief:
        summaries_lib.log(f"best so far (held-out loss {metrics['loss']:.4f}): wrote {prefix}")
    if cfg.keep_best or cfg.patience:  # their charts only where asked for
      self.summaries.scalars("eval", step, {"best_loss": float(best.loss.numpy()),
                                            "evals_since_best": float(best.evals_since.numpy())})
    if not best.exhausted(cfg.patience):
      return False
    summaries_lib.log(f"early stop at step {step}: {int(best.evals_since.numpy())} evals without "
                      f"a lower held-out loss (--patience={cfg.patience}); {best.describe()}")
    return True

  def save(self, step, window=None):
    del window  # the data position and counters are in the checkpoint already
    try:
      path = self.ckpt.save(step)  # a failed write raises CheckpointError naming the files
    except checkpointing.NonFiniteWeightsError as e:
      raise TrainingError(f"{e}; the last good checkpoint is {self.ckpt.latest}") from e
    if self.chief:
      summaries_lib.log(f"saved {path}")

  def diverged(self, step, bad_in_row):
    """Restores the last good checkpoint; the error names it."""
    good = self.ckpt.latest
    if good:
      self.ckpt.restore(good)
    return TrainingError(
        f"{bad_in_row} steps in a row (>= --max_bad_steps={self.cfg.loop.max_bad_steps}) had a "
        f"non-finite loss or gradient and were skipped (at step {step}); restored the last "
        f"good checkpoint {good or '(none: nothing was saved)'}. Lower --learning_rate, set "
        "--clip_norm, or check the data and --init_from.")

  def stopped(self, step, reason):
    summaries_lib.log(f"{reason}: saved step {step}; exiting cleanly (the same command "
                      "resumes)")

  def finish(self, step):
    # The eval before the save: its verdict (best loss, evals since) is in the final checkpoint.
    if self.evaluated_at != step:  # an early stop evaluated this step already
      self.evaluate(step)
    if step > self.start_step or not self.resumed:  # a resume at --train_steps: nothing new
      self.save(step)
    summaries_lib.log(f"trained to step {step}: weights sha256 "
                      f"{checkpointing.weights_digest(self.train_step.model)[:16]}")


class _TrainLog:
  """What a record makes of the updates since the last one: the train metrics
  (PretrainingResult.final_train) and the train scalars in TensorBoard."""

  _SCALARS = ("loss", "perplexity", "learning_rate", "grad_norm", "tokens_per_sec",
              "examples_per_sec", "mfu", "input_wait_fraction", "skipped_steps")

  def __init__(self, cfg: TrainConfig, train_step: TrainStep, summaries,
               mfu_denominator: float):
    self.cfg, self.train_step, self.summaries = cfg, train_step, summaries
    self.mfu_denominator = mfu_denominator  # an update's FLOPs / peak FLOP/s

  def flush(self, step: int, window: StepWindow) -> dict:
    final = self._metrics(window)
    scalars = {k: final[k] for k in self._SCALARS}
    scalars["mlm_accuracy"] = final["accuracy"]
    for k in ("mlm_loss", "nsp_loss", "nsp_accuracy"):
      if k in final:
        scalars[k] = final[k]
    if self.train_step.fp16:
      scalars["loss_scale"] = final["loss_scale"]
      scalars["overflow_steps"] = float(self.train_step.overflow_steps.numpy())
    self.summaries.scalars("train", step, scalars)
    return final

  def _metrics(self, window: StepWindow) -> dict:
    w = window.summarize()
    elapsed, steps = w["elapsed_s"], len(window)
    final = {k: w[k] for k in ("loss", "accuracy", "grad_norm", "learning_rate", "loss_scale",
                               "last_step_loss")}
    final.update(tokens_per_sec=w["tokens"] / elapsed,
                 examples_per_sec=steps * self.cfg.data.batch_size / elapsed,
                 mfu=steps * self.mfu_denominator / elapsed,
                 input_wait_fraction=w["input_wait_s"] / elapsed,
                 perplexity=math.exp(min(final["loss"], 700.0)),
                 skipped_steps=float(self.train_step.skipped_steps.numpy()))
    if "sum/nsp_count" in w:  # NSP ablation: "loss" is MLM + NSP; report the parts
      ratio = lambda a, b: a / b if b else float("nan")  # no applied update: NaN, like loss
      final.update(mlm_loss=ratio(w["sum/mlm_loss"], w["count"]),
                   nsp_loss=ratio(w["sum/nsp_loss"], w["sum/nsp_count"]),
                   nsp_accuracy=ratio(w["sum/nsp_correct"], w["sum/nsp_count"]))
      final["perplexity"] = math.exp(min(final["mlm_loss"], 700.0))
    return final
