"""The pretraining run: strategy, data, model, resume, the step loop, eval, checkpoints, summaries.

`train(config)` is what `python -m roberta_tf.train` calls. The loop:
  resume from model_dir's latest checkpoint (else --init_from, else random init)
  → for each step: Trainer.train_step (accumulation over micro-batches, one update)
  → every log_every: console line + TensorBoard scalars
  → every eval_every and at the end: held-out MLM loss / perplexity / accuracy
  → every checkpoint_every, at the end, and on SIGTERM: a checkpoint (model, optimizer,
    counters, dropout RNG state, data position), then on SIGTERM a clean exit
The host waits for the device only at log steps, bad-step checks (every --max_bad_steps
steps), saves and evals: step outputs stay tensors until then (no per-step sync).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import signal
import time

import keras
import tensorflow as tf

from roberta_tf import models
from roberta_tf.data import dataset_info, pipeline, unigram, vocab_info
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.tokenization.vocab_files import copy_vocab_files
from roberta_tf.training import checkpointing, evaluation, flops
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.train_config import TrainConfig, write_config_json
from roberta_tf.training.trainer import StepConfig, Trainer


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


def build_datasets(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                   model_config: models.RobertaConfig, skip_rounds: int):
  """The distributed train dataset (positioned after ``skip_rounds`` micro-batch rounds) and eval.

  Each replica takes one batch per micro-batch round, so an input pipeline feeding k replicas
  (MirroredStrategy: all of a worker's devices) has produced ``skip_rounds * k`` batches. The
  masks are a pure function of (seed, epoch, shard, record), so skipping replays the exact
  stream. (tf.data iterator checkpoints would avoid re-reading, but a non-chief worker's
  checkpoints are deleted, so it could not restore its own position; skip works everywhere.)
  """
  per_replica = per_replica_batch(cfg, strategy)
  common = dict(batch_size=per_replica, max_seq_len=cfg.max_seq_len,
                masking=cfg.masking_config(), model_config=model_config, seed=cfg.seed,
                skip_corrupt_shards=cfg.skip_corrupt_shards)

  def train_fn(ctx: tf.distribute.InputContext):
    ds = pipeline.build_dataset(cfg.train_data, "train", training=True,
                                shuffle_buffer=cfg.shuffle_buffer, input_context=ctx, **common)
    skip = skip_rounds * (ctx.num_replicas_in_sync // ctx.num_input_pipelines)
    return ds.skip(skip) if skip else ds

  train = strategy.distribute_datasets_from_function(train_fn)
  evaluation = None
  if cfg.eval_data:
    def eval_fn(ctx: tf.distribute.InputContext):
      return pipeline.build_dataset(cfg.eval_data, "validation", training=False,
                                    shuffle_buffer=0, input_context=ctx, **common)
    evaluation = strategy.distribute_datasets_from_function(eval_fn)
  return train, evaluation


# Settings that fix which sequences (and masks) each step reads; see warn_if_data_order_changed.
_DATA_ORDER_SETTINGS = ("train_data", "batch_size", "grad_accum_steps", "max_seq_len", "seed",
                        "shuffle_buffer", "mask_prob", "max_predictions_per_seq", "masking",
                        "whole_word_masking", "dupe_factor")


def warn_if_data_order_changed(cfg: TrainConfig, replicas: int) -> None:
  """Logs a warning when a resume changes what the data position means.

  The position is a count of micro-batch rounds; replayed with another batch split, seed or
  data, the resumed run reads a different stream than an uninterrupted one would have (it still
  trains, but is no longer exact).
  """
  if not tf.train.latest_checkpoint(cfg.model_dir):
    return
  before = evaluation.training_config(cfg.model_dir)
  if before is None:
    return
  changed = [f"--{k}: {getattr(before, k)!r} -> {getattr(cfg, k)!r}"
             for k in _DATA_ORDER_SETTINGS if getattr(before, k) != getattr(cfg, k)]
  try:
    with open(os.path.join(cfg.model_dir, "config.json"), encoding="utf-8") as f:
      replicas_before = json.load(f).get("data", {}).get("replicas", replicas)
  except (OSError, ValueError):
    replicas_before = replicas
  if replicas_before != replicas:
    changed.append(f"replicas: {replicas_before} -> {replicas}")
  if changed:
    summaries_lib.log("warning: resuming with changed data settings (" + "; ".join(changed)
                      + "): the data stream will not continue exactly where it stopped")


def _unigram_table(cfg: TrainConfig, model_config: models.RobertaConfig):
  """The train split's unigram log-probabilities [V] (the plateau baseline), or None."""
  info = dataset_info.read(cfg.train_data)
  try:
    return unigram.train_log_probs(cfg.train_data, model_config.vocab_size,
                                   info["special_ids"].values())
  except (OSError, tf.errors.OpError, dataset_info.DatasetInfoError) as e:
    summaries_lib.log(f"warning: no unigram baseline ({e})")
    return None


def per_replica_batch(cfg: TrainConfig, strategy: tf.distribute.Strategy) -> int:
  """Sequences per replica per micro-batch: --batch_size / (replicas x --grad_accum_steps)."""
  replicas = strategy.num_replicas_in_sync
  if cfg.batch_size % (replicas * cfg.grad_accum_steps):
    raise ValueError(f"--batch_size={cfg.batch_size} is not divisible by replicas ({replicas}) x "
                     f"--grad_accum_steps ({cfg.grad_accum_steps})")
  return cfg.batch_size // (replicas * cfg.grad_accum_steps)


def build_trainer(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                  model_config: models.RobertaConfig) -> Trainer:
  """A fresh pretrainer, AdamW and their Trainer, created under ``strategy``'s scope."""
  per_replica = per_replica_batch(cfg, strategy)
  with strategy.scope():
    model = models.RobertaPretrainer(model_config, dtype=cfg.precision)
    opt = optimizer_lib.build_optimizer(
        variables=model.trainable_variables, learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps, train_steps=cfg.train_steps,
        weight_decay=cfg.weight_decay, beta_1=cfg.adam_beta1, beta_2=cfg.adam_beta2,
        epsilon=cfg.adam_epsilon)
  predictions = cfg.masking_config().resolved_max_predictions(cfg.max_seq_len)
  return Trainer(strategy, model, opt, StepConfig(
      grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
      norm_per_micro_batch=float(per_replica * predictions), jit_compile=cfg.jit_compile))


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


class _Window:
  """Step outputs since the last log line, kept as device tensors until the loop logs."""

  def __init__(self):
    self.start = time.perf_counter()
    self.outputs = []
    self.wait_s = 0.0

  def add(self, outputs: dict, wait_s: float) -> None:
    self.outputs.append(outputs)
    self.wait_s += wait_s

  def summarize(self) -> dict:
    """Host values: loss/accuracy weighted by masked tokens, mean grad_norm, last lr/scale."""
    rows = [{k: float(v.numpy()) for k, v in out.items()} for out in self.outputs]
    applied = [r for r in rows if r["applied"]] or rows
    masked = sum(r["count"] for r in applied) or 1.0
    last = rows[-1]
    return {
        "loss": sum(r["loss"] * r["count"] for r in applied) / masked,
        "accuracy": sum(r["accuracy"] * r["count"] for r in applied) / masked,
        "grad_norm": sum(r["grad_norm"] for r in applied) / len(applied),
        "tokens": sum(r["tokens"] for r in rows),
        "learning_rate": last["learning_rate"], "loss_scale": last["loss_scale"],
        "last_step_loss": last["loss"],
    }


def _train_step_flops(cfg: TrainConfig, model_config, predictions: int) -> float:
  return flops.train_step_flops(
      num_layers=model_config.num_layers, hidden_size=model_config.hidden_size,
      intermediate_size=model_config.intermediate_size, vocab_size=model_config.vocab_size,
      seq_len=cfg.max_seq_len, predictions_per_seq=predictions, sequences=cfg.batch_size)


def check_resumable(model_dir: str, model_config) -> None:
  """Refuses to resume a model dir whose checkpoints belong to another architecture.

  Checked before config.json is rewritten, so a wrong --config/--init_from never leaves the old
  checkpoints beside a config.json that does not describe them. Dropout may change.
  """
  if not tf.train.latest_checkpoint(model_dir):
    return
  try:
    old = model_dir_lib.read_config(model_dir)
  except ValueError:
    return  # no readable config.json yet: the restore itself will check the shapes
  ignore = ("dropout", "attention_dropout")
  new_d, old_d = model_config.to_dict(), old.to_dict()
  diff = sorted(k for k in new_d if k not in ignore and new_d[k] != old_d.get(k))
  if diff:
    raise ValueError(
        f"--model_dir={model_dir!r} holds checkpoints of another model ("
        + ", ".join(f"{k}: {old_d.get(k)} there, {new_d[k]} now" for k in diff)
        + "): use a new --model_dir, or the --config/--init_from it was trained with")


def train(cfg: TrainConfig, strategy: tf.distribute.Strategy | None = None) -> RunResult:
  """Runs (or resumes) pretraining as configured; returns the final metrics.

  Raises:
    TrainingError: ``max_bad_steps`` non-finite steps in a row (after restoring the last good
      checkpoint), or a save refused because a weight is non-finite.
    ValueError / DatasetInfoError / ModelDirError: bad configuration or data (names the flag).
  """
  cfg.validate()
  # The strategy first: multi-worker must configure collectives before TF initializes.
  strategy = strategy or strategy_lib.make_strategy(cfg.strategy, cfg.tpu)
  if cfg.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(cfg.seed)
  chief = strategy_lib.is_chief(strategy)

  info = dataset_info.read(cfg.train_data)
  model_config = resolve_model_config(cfg, info)
  check_resumable(cfg.model_dir, model_config)
  if chief:
    warn_if_data_order_changed(cfg, strategy.num_replicas_in_sync)
    write_config_json(cfg.model_dir, model_config.to_dict(), cfg,
                      extra={"data": {"train": cfg.train_data, "eval": cfg.eval_data,
                                      "vocab": info["vocab"], "special_ids": info["special_ids"],
                                      "replicas": strategy.num_replicas_in_sync}})
    vocab_dir = vocab_info.find_vocab_dir(cfg.train_data, info)
    if vocab_dir is None or len(copy_vocab_files(vocab_dir, cfg.model_dir)) < 2:
      summaries_lib.log(f"warning: vocab.json/merges.txt of {cfg.train_data} not found (sha256 "
                        f"{info['vocab']['sha256'][:12]}...): export will need --vocab_dir")

  trainer = build_trainer(cfg, strategy, model_config)
  model, opt = trainer.model, trainer.optimizer
  ckpt = checkpointing.Checkpointer(cfg.model_dir, {"model": model, "optimizer": opt,
                                                    **trainer.checkpoint_items()},
                                    keep=cfg.keep_checkpoints, is_chief=chief,
                                    task_id=strategy_lib.task_id(strategy))
  try:
    return _run(cfg, strategy, chief, model_config, trainer, ckpt)
  finally:
    ckpt.close()


def _run(cfg, strategy, chief, model_config, trainer, ckpt) -> RunResult:
  """The loop of `train`: resume, data, evals, steps, logs, saves."""
  model = trainer.model
  resumed = ckpt.restore_latest(chief_dir=cfg.model_dir)
  if resumed:
    summaries_lib.log(f"resumed from {resumed} at step {int(trainer.step.numpy())}")
  elif cfg.init_from:
    model_dir_lib.restore(model, model_dir_lib.latest_checkpoint(cfg.init_from))
    summaries_lib.log(f"initialized weights from {cfg.init_from}")

  train_ds, eval_ds = build_datasets(cfg, strategy, model_config,
                                        skip_rounds=int(trainer.data_rounds.numpy()))
  iterator = iter(train_ds)
  summaries = summaries_lib.Summaries(cfg.model_dir, enabled=chief)
  if not resumed and chief:
    with open(os.path.join(cfg.model_dir, "config.json"), encoding="utf-8") as f:
      summaries.text("train", 0, "config", "```\n" + f.read() + "```")

  predictions = cfg.masking_config().resolved_max_predictions(cfg.max_seq_len)
  step_flops = _train_step_flops(cfg, model_config, predictions)
  peak = cfg.peak_flops or (cfg.peak_flops_fp32 if cfg.precision == "float32"
                            else cfg.peak_flops_bf16)
  peak_total = peak * strategy.num_replicas_in_sync
  eval_history = []
  evaluator = evaluation.Evaluator(strategy, model, unigram_log_probs=(
      _unigram_table(cfg, model_config) if eval_ds is not None else None))

  def run_eval(step):
    if eval_ds is None:
      return
    metrics = evaluator(eval_ds, cfg.eval_steps)
    eval_history.append((step, metrics))
    summaries.scalars("eval", step, {k: metrics[k] for k in (
        "loss", "perplexity", "mlm_accuracy", "unigram_perplexity") if k in metrics})
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
      path = ckpt.save(step)
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
  window = _Window()
  final = {}
  start_time, start_step = time.perf_counter(), step
  stopped = False
  with _SigtermFlag() as sigterm:
    while step < cfg.train_steps:
      window.add(*trainer.train_step(lambda: next(iterator)))
      step += 1
      # The host syncs with the device only here: log steps, bad-step checks, saves, evals.
      log_now = step % cfg.log_every == 0 or step == cfg.train_steps
      stop_now = sigterm.raised  # read once: a SIGTERM arriving later is handled next step
      save_now = stop_now or (step % cfg.checkpoint_every == 0 and step < cfg.train_steps)
      if log_now or save_now or step % cfg.max_bad_steps == 0:
        check_bad_steps(step)
      if log_now:
        elapsed = time.perf_counter() - window.start
        steps = len(window.outputs)
        final = window.summarize()
        final.update(
            tokens_per_sec=final.pop("tokens") / elapsed,
            examples_per_sec=steps * cfg.batch_size / elapsed,
            mfu=steps * step_flops / elapsed / peak_total,
            input_wait_fraction=window.wait_s / elapsed,
            perplexity=math.exp(min(final["loss"], 700.0)),
            skipped_steps=float(trainer.skipped_steps.numpy()))
        scalars = {k: final[k] for k in ("loss", "perplexity", "learning_rate", "grad_norm",
                                         "tokens_per_sec", "examples_per_sec", "mfu",
                                         "input_wait_fraction", "skipped_steps")}
        scalars["mlm_accuracy"] = final["accuracy"]
        if trainer.fp16:
          scalars["loss_scale"] = final["loss_scale"]
          scalars["overflow_steps"] = float(trainer.overflow_steps.numpy())
        summaries.scalars("train", step, scalars)
        eta = (time.perf_counter() - start_time) / (step - start_step) * (cfg.train_steps - step)
        summaries_lib.log(summaries_lib.progress_line(step, cfg.train_steps, final, eta))
        window = _Window()
      if cfg.eval_every and step % cfg.eval_every == 0 and step < cfg.train_steps:
        run_eval(step)
      if save_now:
        save(step)
      if stop_now:
        summaries_lib.log(f"SIGTERM: saved step {step}; exiting cleanly")
        stopped = True
        break
  if not stopped:
    save(step)
    summaries_lib.log(f"trained to step {step}: weights sha256 "
                      f"{checkpointing.weights_digest(model)[:16]}")
    run_eval(step)
  return RunResult(step=step, final_train=final, eval_history=eval_history,
                   stopped_by_signal=stopped)
