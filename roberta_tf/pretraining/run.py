"""The pretraining run: strategy, data, model, resume, the step loop, eval, checkpoints, summaries.

`pretrain(config)` is what `python -m roberta_tf.train` calls:
  resume from model_dir's newest complete checkpoint (else --init_from, else random init;
    never start over in a model dir that holds checkpoint files unless --overwrite)
  → pretraining's task (task.py, `PretrainingTask`: the model, AdamW, the MLM objective) makes
    the train step; once it, the checkpoint and the data exist, its events (events.py,
    `PretrainingEvents`) are built whole
  → the loop (training/loop.py: when logs, evals, saves, the bad-step stop and SIGTERM
    happen) driving the events:
  → every log_every: console line + TensorBoard scalars
  → every eval_every and at the end: held-out MLM loss / perplexity / accuracy beside the
    unigram baseline
  → every checkpoint_every, at the end, and on SIGTERM: a checkpoint (model, optimizer,
    counters, dropout RNG state, data position), then on SIGTERM a clean exit
"""

from __future__ import annotations

import contextlib
import dataclasses

import keras
import tensorflow as tf

from roberta_tf.common import files
from roberta_tf.data import dataset_info
from roberta_tf.models import checkpoint_files, growth, registry
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models.roberta import position_growth
from roberta_tf.models.roberta.encoder import EMBEDDINGS_NAME
from roberta_tf.pretraining import (
  decay_branch,
  inputs,
  model_dir_setup,
  precision_choice,
  vocab_checks,
)
from roberta_tf.pretraining.events import PretrainingEvents
from roberta_tf.pretraining.task import PretrainingTask, model_config_and_growth
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import checkpointing
from roberta_tf.training import cluster as cluster_lib
from roberta_tf.training import loop as loop_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.schedule import BudgetSchedule
from roberta_tf.training.task import build_train_step

__all__ = ["PretrainingResult", "pretrain"]


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
    training.task.TrainingError: ``max_bad_steps`` non-finite steps in a row (after restoring
      the last good checkpoint), or a save refused because a weight is non-finite.
    ValueError / DatasetInfoError / ModelDirError: bad configuration or data (names the flag).
    checkpointing.CheckpointError: another process trains in model_dir, its checkpoint files
      hold no complete checkpoint, or a save failed (disk full); names the files.
  """
  cfg.validate()
  cfg = decay_branch.resolve(cfg, summaries_lib.log)  # --decay_from: the branch's settings
  # The strategy first: multi-worker must configure collectives before TF initializes.
  runtime = cfg.runtime
  strategy = strategy or strategy_lib.make_strategy(runtime.strategy, runtime.tpu,
                                                    runtime.peer_timeout, summaries_lib.log)
  if runtime.deterministic:
    tf.config.experimental.enable_op_determinism()
  keras.utils.set_random_seed(runtime.seed)
  chief = strategy_lib.is_chief(strategy)
  # The chief holds the model dir's lock for the whole run: no second process writes there.
  with checkpointing.DirectoryLock(cfg.model.model_dir) if chief else contextlib.nullcontext():
    info = dataset_info.read(cfg.train_data)
    # --init_from's vocabulary growth, planned once (task.py), for the weight copy (_init_from).
    model_config, growth_plan = model_config_and_growth(cfg, info)
    if cfg.decay_from and growth_plan is not None:
      raise ValueError(f"--decay_from={cfg.decay_from}: a decay branch trains on its source "
                       f"run's vocabulary; --train_data={cfg.train_data} has another")
    cfg = cfg.for_family(registry.family_of(model_config))  # --mask_rate 0: the family's rate
    vocab_checks.check_resume(cfg, info)  # before anything is written in the model dir
    vocab_checks.check_eval_data(cfg, info, model_config)  # likewise
    cfg = precision_choice.resolve(cfg, strategy, model_config, summaries_lib.log)
    task = PretrainingTask(cfg, strategy, model_config)
    if chief:  # after the data and config checks: a bad flag never costs a checkpoint
      model_dir_setup.clean_model_dir(cfg, summaries_lib.log)
    model_dir_setup.check_resumable(cfg.model.model_dir, model_config, info["max_seq_len"])
    model_dir_setup.check_schedule_change(cfg, summaries_lib.log if chief else None)
    if chief:
      model_dir_setup.prepare_model_dir(cfg, info, model_config, strategy.num_replicas_in_sync)

    train_step = build_train_step(task, strategy)
    model, opt = train_step.model, train_step.optimizer
    ckpt = checkpointing.Checkpointer(cfg.model.model_dir, {"model": model, "optimizer": opt,
                                                      **train_step.checkpoint_items()},
                                      keep=cfg.loop.keep_checkpoints, is_chief=chief,
                                      task_id=strategy_lib.task_id(strategy))
    try:
      # A peer lost mid-run: one line naming it and the checkpoint a restart resumes from.
      model_dir = cfg.model.model_dir
      with cluster_lib.named_failures(strategy_lib.cluster_of(strategy), model_dir,
                                      lambda: max(checkpoint_files.steps_on_disk(model_dir),
                                                  default=None)):
        return _run(cfg, strategy, chief, info, task, train_step, ckpt, growth_plan)
    finally:
      ckpt.close()


def _init_from(cfg: TrainConfig, model, plan) -> None:
  """--init_from's weights into a new run's model, grown where the shards need more ids or
  positions (task.grown_for_shards decided the model's config and made the vocabulary's growth
  `plan`; models/growth.py copies)."""
  source_config = model_dir_lib.read_config(cfg.model.init_from)
  if not growth.differences(source_config, model.config):
    model_dir_lib.restore(model, model_dir_lib.latest_checkpoint(cfg.model.init_from))
    summaries_lib.log(f"initialized weights from {cfg.model.init_from}")
    return
  source = model_dir_lib.load(cfg.model.init_from)
  grown = growth.copy_grown(source, model, plan, cfg.new_token_init, seed=cfg.runtime.seed)
  what = []
  if "vocab_size" in grown:
    what.append(f"vocabulary {grown['vocab_size'][0]} -> {grown['vocab_size'][1]} tokens (new "
                f"rows: --new_token_init={cfg.new_token_init})")
  if "max_positions" in grown:
    what.append(f"position table {grown['max_positions'][0]} -> {grown['max_positions'][1]} "
                "rows (learned rows tiled)")
  summaries_lib.log(f"initialized weights from {cfg.model.init_from}, grown: {'; '.join(what)}")


def _resume_with_longer_positions(cfg: TrainConfig, strategy, train_step, source_config) -> str:
  """Resumes the model dir's newest complete checkpoint, written with a shorter position table
  (`source_config`), into `train_step`'s model of a longer one: the weights, the optimizer's
  moments (the table's grown like the table: models/roberta/position_growth.py), the step, the data
  position and the counters. Returns the checkpoint's prefix.

  Phase 2 of a shorter-then-longer schedule (docs/domain_adaptation.md): the step count and the
  optimizer go on; the learning rate follows --train_steps's schedule from the checkpoint's
  step (check_schedule_change says where it stands)."""
  prefix = checkpoint_files.newest_complete(cfg.model.model_dir)
  old = build_train_step(PretrainingTask(cfg, strategy, source_config), strategy)
  checkpointing.restore_checkpoint({"model": old.model, "optimizer": old.optimizer,
                                    **old.checkpoint_items()}, prefix)
  growth.copy_grown(old.model, train_step.model)
  rows = train_step.model.config.max_positions
  _copy_moments(old.optimizer, train_step.optimizer, prefix, _position_table(train_step.model),
                lambda value: position_growth.grown_positions(value, rows, source_config.pad_id))
  new_items = train_step.checkpoint_items()
  for name, src in old.checkpoint_items().items():
    dst = new_items[name]
    pairs = zip(src, dst, strict=True) if isinstance(src, list) else [(src, dst)]
    for s, d in pairs:
      d.assign(s.numpy())
  summaries_lib.log(f"{files.basename(prefix)} has a position table of "
                    f"{source_config.max_positions} rows: grown to {rows} (learned rows tiled; "
                    "the optimizer's moments likewise) for --max_seq_len={cfg.data.max_seq_len}")
  return prefix


def _position_table(model) -> str:
  """The path of `model`'s position table."""
  return model.encoder.get_layer(EMBEDDINGS_NAME).position_embedding.embeddings.path


def _copy_moments(source, target, prefix: str, table: str, grow) -> None:
  """`source`'s AdamW moments and iteration into `target`'s, each slot matched by its model
  variable's path; the position table's (`table`) grown by `grow`.

  Raises:
    checkpointing.CheckpointError naming checkpoint `prefix` and the variables: the two sets
      of variables differ, or a moment other than the position table's changed shape.
  """
  old, new = source.slots(), target.slots()
  if set(old) != set(new):
    raise checkpointing.CheckpointError(
        f"{prefix}: the optimizer's moments are for other variables (only in the checkpoint: "
        f"{sorted(set(old) - set(new))}; only in the model: {sorted(set(new) - set(old))})")
  for path, moments in new.items():
    for name, dst in moments.items():
      value = old[path][name].numpy()
      if path == table:
        value = grow(value)
      elif tuple(value.shape) != tuple(dst.shape):
        raise checkpointing.CheckpointError(
            f"{prefix}: the {name} of {path} is {list(value.shape)} there and "
            f"{list(dst.shape)} in the model: only the position table ({table}) may grow")
      dst.assign(value)
  target.iterations.assign(source.iterations.numpy())


def _run(cfg, strategy, chief, info, task, train_step, ckpt, growth_plan) -> PretrainingResult:
  """Resume, data, the task's events, then the loop (training/loop.py) driving them."""
  model = train_step.model
  resumed = None
  if not cfg.model.overwrite:
    shorter = model_dir_setup.shorter_checkpoint_config(cfg.model.model_dir, model.config)
    if shorter is not None:  # a longer phase in the same model dir: the table grows
      resumed = _resume_with_longer_positions(cfg, strategy, train_step, shorter)
    else:
      resumed = ckpt.restore_latest(chief_dir=cfg.model.model_dir, log=summaries_lib.log)
  if resumed:
    summaries_lib.log(f"resumed from {resumed} at step {int(train_step.step.numpy())}")
  elif cfg.decay_from:  # a decay branch: the source checkpoint's whole training state
    checkpointing.restore_checkpoint({"model": model, "optimizer": train_step.optimizer,
                                      **train_step.checkpoint_items()}, cfg.decay_from)
    summaries_lib.log(f"decay branch from {cfg.decay_from} at step "
                      f"{int(train_step.step.numpy())}: {cfg.decay_steps} updates of "
                      f"--decay_shape={cfg.decay_shape} decay to step {cfg.train_steps}")
  elif cfg.model.init_from:
    _init_from(cfg, model, growth_plan)

  start = int(train_step.data_position.numpy())
  if resumed and not start and int(train_step.step.numpy()):
    # A checkpoint from before data_position: its rounds of this split. The stream's order
    # changed with it, so this continues at the same amount of data, not the same sequences.
    start = int(train_step.data_rounds.numpy()) * train_step.config.sequences_per_round
    train_step.data_position.assign(start)
    summaries_lib.log(f"warning: {resumed} predates the recorded data position; resuming at "
                      f"sequence {start} of the current data order (the order has changed "
                      "since that checkpoint was written)")
  train_ds, eval_ds = inputs.build_datasets(cfg, strategy, task.model_config, start=start)
  summaries = summaries_lib.Summaries(cfg.model.model_dir, enabled=chief)
  if not resumed and chief:
    summaries.text("train", 0, "config",
                   "```\n" + model_dir_lib.ModelDir(cfg.model.model_dir).config_text() + "```")
  events = PretrainingEvents(cfg, strategy, train_step, ckpt, resumed, train_ds, eval_ds, (
      inputs.unigram_table(cfg, task.model_config, info) if eval_ds is not None else None),
      summaries)
  step = int(train_step.step.numpy())
  if step == 0:
    events.evaluate(0)
  budget = task.schedule if isinstance(task.schedule, BudgetSchedule) else None  # --train_minutes
  result = loop_lib.Loop(strategy, train_step, events, loop_schedule(cfg),
                         budget_fraction=budget.fraction if budget else None).run(step)
  return PretrainingResult(step=result.step, final_train=events.final,
                           eval_history=events.history, stopped_by_signal=result.stopped_by_signal)


def loop_schedule(cfg: TrainConfig) -> loop_lib.LoopSchedule:
  """When the loop's events happen (the LOOP options); a bad-step check every --max_bad_steps
  updates, so a diverged run stops within 2x of them."""
  loop = cfg.loop
  return loop_lib.LoopSchedule(
      # A time budget ends the run, not the step count (the loop's bound is then nominal).
      total_steps=cfg.train_steps if not cfg.train_minutes else 2**62,
      budget_s=cfg.train_minutes * 60, log_every=loop.log_every, eval_every=loop.eval_every,
      save_every=loop.checkpoint_every, max_bad_steps=loop.max_bad_steps,
      check_every=loop.max_bad_steps)
