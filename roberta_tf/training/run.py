"""The pretraining run: strategy, data, model, resume, the step loop, eval, checkpoints, summaries.

`train(config)` is what `python -m roberta_tf.train` calls. The loop:
  resume from model_dir's latest checkpoint (else --init_from, else random init)
  → for each step: Trainer.train_step (accumulation over micro-batches, one update)
  → every log_every: console line + TensorBoard scalars
  → every eval_every and at the end: held-out MLM loss / perplexity / accuracy
  → every checkpoint_every, at the end, and on SIGTERM: a checkpoint (model, optimizer,
    counters, data position)
"""

from __future__ import annotations

import dataclasses
import math
import os
import signal
import time

import keras
import tensorflow as tf

from roberta_tf import models
from roberta_tf.data import dataset_info
from roberta_tf.data import pipeline
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.training import checkpointing
from roberta_tf.training import flops
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.train_config import TrainConfig
from roberta_tf.training.train_config import write_config_json
from roberta_tf.training.trainer import StepConfig
from roberta_tf.training.trainer import Trainer


class TrainingError(RuntimeError):
  """The run cannot go on (too many bad steps, inconsistent model dir, ...)."""


@dataclasses.dataclass
class RunResult:
  step: int
  final_train: dict
  eval_history: list          # [(step, metrics)] including the initial and final evals
  stopped_by_signal: bool = False


def resolve_model_config(cfg: TrainConfig, info: dict) -> models.RobertaConfig:
  """The model config: from --init_from's model dir, else the preset/JSON with the shards' vocab."""
  if cfg.init_from:
    model_config = models.read_config(cfg.init_from)
  elif os.path.isfile(cfg.config):
    model_config = models.RobertaConfig.load(cfg.config)
  else:
    model_config = models.preset(cfg.config, vocab_size=info["vocab"]["size"],
                                 max_positions=cfg.max_seq_len + 2,
                                 pad_id=info["special_ids"]["pad"],
                                 bos_id=info["special_ids"]["bos"],
                                 eos_id=info["special_ids"]["eos"])
  if cfg.dropout >= 0:
    model_config = model_config.replace(dropout=cfg.dropout, attention_dropout=cfg.dropout)
  return model_config


def _masking_config(cfg: TrainConfig, info: dict) -> pipeline.MaskingConfig:
  return pipeline.MaskingConfig(
      mask_prob=cfg.mask_prob, mask_token_prob=cfg.mask_token_prob,
      random_token_prob=cfg.random_token_prob, whole_word=cfg.whole_word_masking,
      static=cfg.masking == "static", dupe_factor=cfg.dupe_factor,
      max_predictions_per_seq=cfg.max_predictions_per_seq or None)


def build_datasets(cfg: TrainConfig, strategy, model_config, info: dict, skip_batches: int):
  """The distributed train dataset (skipping already-consumed micro-batches) and eval dataset."""
  replicas = strategy.num_replicas_in_sync
  per_step = replicas * cfg.grad_accum_steps
  if cfg.batch_size % per_step:
    raise ValueError(f"--batch_size={cfg.batch_size} is not divisible by replicas ({replicas}) x "
                     f"--grad_accum_steps ({cfg.grad_accum_steps})")
  per_replica = cfg.batch_size // per_step
  masking = _masking_config(cfg, info)
  common = dict(batch_size=per_replica, max_seq_len=cfg.max_seq_len, masking=masking,
                model_config=model_config, seed=cfg.seed,
                skip_corrupt_shards=cfg.skip_corrupt_shards)

  def train_fn(ctx: tf.distribute.InputContext):
    ds = pipeline.build_dataset(cfg.train_data, "train", training=True,
                                shuffle_buffer=cfg.shuffle_buffer, input_context=ctx, **common)
    return ds.skip(skip_batches) if skip_batches else ds

  train = strategy.distribute_datasets_from_function(train_fn)
  evaluation = None
  if cfg.eval_data:
    def eval_fn(ctx: tf.distribute.InputContext):
      return pipeline.build_dataset(cfg.eval_data, "validation", training=False,
                                    shuffle_buffer=0, input_context=ctx, **common)
    evaluation = strategy.distribute_datasets_from_function(eval_fn)
  return train, evaluation, per_replica


class _SigtermFlag:
  """Turns SIGTERM into a flag the loop checks after each step (then checkpoint, clean exit)."""

  def __init__(self):
    self.raised = False
    self._previous = None

  def __enter__(self):
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # not the main thread: no signal handling
      self._previous = None
    return self

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    self.raised = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)


def train(cfg: TrainConfig, strategy: tf.distribute.Strategy | None = None) -> RunResult:
  """Runs (or resumes) pretraining as configured; returns the final metrics."""
  cfg.validate()
  if cfg.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(cfg.seed)
  strategy = strategy or strategy_lib.make_strategy(cfg.strategy, cfg.tpu)
  chief = strategy_lib.is_chief(strategy)

  info = dataset_info.read(cfg.train_data)
  model_config = resolve_model_config(cfg, info)
  if chief:
    write_config_json(cfg.model_dir, model_config.to_dict(), cfg,
                      extra={"data": {"train": cfg.train_data, "eval": cfg.eval_data,
                                      "vocab": info["vocab"], "special_ids": info["special_ids"]}})

  with strategy.scope():
    model = models.RobertaPretrainer(model_config, dtype=cfg.precision)
    opt = optimizer_lib.build_optimizer(
        learning_rate=cfg.learning_rate, warmup_steps=cfg.warmup_steps,
        train_steps=cfg.train_steps, weight_decay=cfg.weight_decay, beta_1=cfg.adam_beta1,
        beta_2=cfg.adam_beta2, epsilon=cfg.adam_epsilon)
  masking = _masking_config(cfg, info)
  predictions = masking.resolved_max_predictions(cfg.max_seq_len)
  per_replica = cfg.batch_size // (strategy.num_replicas_in_sync * cfg.grad_accum_steps)
  trainer = Trainer(strategy, model, opt, StepConfig(
      grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
      norm_per_micro_batch=float(per_replica * predictions)))
  ckpt = checkpointing.Checkpointer(cfg.model_dir, {"model": model, "optimizer": opt,
                                                    **trainer.checkpoint_items()},
                                    keep=cfg.keep_checkpoints, is_chief=chief)
  resumed = ckpt.restore_latest(chief_dir=cfg.model_dir)
  if resumed:
    summaries_lib.log(f"resumed from {resumed} at step {int(trainer.step.numpy())}")
  elif cfg.init_from:
    model_dir_lib.restore(model, model_dir_lib.latest_checkpoint(cfg.init_from))
    summaries_lib.log(f"initialized weights from {cfg.init_from}")

  train_ds, eval_ds, _ = build_datasets(cfg, strategy, model_config, info,
                                        skip_batches=int(trainer.data_batches.numpy()))
  iterator = iter(train_ds)
  summaries = summaries_lib.Summaries(cfg.model_dir, enabled=chief)
  if not resumed and chief:
    with open(os.path.join(cfg.model_dir, "config.json"), encoding="utf-8") as f:
      summaries.text("train", 0, "config", "```\n" + f.read() + "```")

  step_flops = flops.train_step_flops(
      num_layers=model_config.num_layers, hidden_size=model_config.hidden_size,
      intermediate_size=model_config.intermediate_size, vocab_size=model_config.vocab_size,
      seq_len=cfg.max_seq_len, predictions_per_seq=predictions, sequences=cfg.batch_size)
  peak = cfg.peak_flops or (cfg.peak_flops_fp32 if cfg.precision == "float32"
                            else cfg.peak_flops_bf16)
  peak_total = peak * strategy.num_replicas_in_sync

  eval_history = []

  def run_eval(step):
    if eval_ds is None:
      return None
    metrics = trainer.evaluate(eval_ds, cfg.eval_steps)
    eval_history.append((step, metrics))
    summaries.scalars("eval", step, {"loss": metrics["loss"], "perplexity": metrics["perplexity"],
                                     "mlm_accuracy": metrics["mlm_accuracy"]})
    summaries_lib.log(f"eval step {step}: loss {metrics['loss']:.4f} | perplexity "
                      f"{metrics['perplexity']:.2f} | mlm_accuracy {metrics['mlm_accuracy']:.4f}")
    return metrics

  step = int(trainer.step.numpy())
  if step == 0:
    run_eval(0)
  window = {"t": time.perf_counter(), "tokens": 0.0, "wait": 0.0, "steps": 0}
  last = {}
  start_time, start_step = time.perf_counter(), step
  stopped = False
  with _SigtermFlag() as sigterm:
    while step < cfg.train_steps:
      last = trainer.train_step(lambda: next(iterator))
      step = int(trainer.step.numpy())
      window["wait"] += last.pop("input_wait_s")
      window["tokens"] += last.pop("tokens")
      window["steps"] += 1
      if int(trainer.bad_steps_in_row.numpy()) >= cfg.max_bad_steps:
        good = ckpt.latest
        if good:
          ckpt.restore(good)
        raise TrainingError(
            f"{cfg.max_bad_steps} steps in a row had a non-finite loss or gradient (step {step}); "
            f"restored the last good checkpoint {good or '(none: nothing was saved)'}. Lower "
            "--learning_rate, set --clip_norm, or check the data.")
      if step % cfg.log_every == 0 or step == cfg.train_steps:
        elapsed = time.perf_counter() - window["t"]
        rates = {
            "tokens_per_sec": window["tokens"] / elapsed,
            "examples_per_sec": window["steps"] * cfg.batch_size / elapsed,
            "mfu": window["steps"] * step_flops / elapsed / peak_total,
            "input_wait_fraction": window["wait"] / elapsed,
        }
        last.update(rates)
        last["perplexity"] = math.exp(min(last["loss"], 700.0))
        last["skipped_steps"] = float(trainer.skipped_steps.numpy())
        scalars = {k: last[k] for k in ("loss", "perplexity", "learning_rate", "grad_norm",
                                        "tokens_per_sec", "examples_per_sec", "mfu",
                                        "input_wait_fraction", "skipped_steps")}
        scalars["mlm_accuracy"] = last["accuracy"]
        if trainer.fp16:
          scalars["loss_scale"] = last["loss_scale"]
          scalars["overflow_steps"] = float(trainer.overflow_steps.numpy())
        summaries.scalars("train", step, scalars)
        done = step - start_step
        eta = (time.perf_counter() - start_time) / max(done, 1) * (cfg.train_steps - step)
        summaries_lib.log(summaries_lib.progress_line(step, cfg.train_steps, last, eta))
        window = {"t": time.perf_counter(), "tokens": 0.0, "wait": 0.0, "steps": 0}
      if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.train_steps:
        run_eval(step)
      if sigterm.raised:
        path = ckpt.save(step)
        summaries_lib.log(f"SIGTERM: saved {path} at step {step}; exiting cleanly")
        stopped = True
        break
      if step % cfg.checkpoint_every == 0 and step < cfg.train_steps:
        ckpt.save(step)
  if not stopped:
    path = ckpt.save(step)
    summaries_lib.log(f"saved {path}")
    run_eval(step)
  return RunResult(step=step, final_train=last, eval_history=eval_history,
                   stopped_by_signal=stopped)
