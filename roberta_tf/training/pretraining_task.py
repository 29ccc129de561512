"""The pretraining task: what `pretraining.pretrain` builds before its loop (Model Garden's
*task*).

From a TrainConfig and the shards' dataset_info.json: the model config, the distributed
datasets (positioned at the checkpoint's data position), the model + AdamW + Trainer, the
unigram baseline for the plateau check, the step's FLOPs for MFU, and the model dir's
bookkeeping (config.json, the vocabulary files, resume checks). run.py owns the loop.
"""

from __future__ import annotations

import dataclasses
import glob
import os
import shutil

import tensorflow as tf

from roberta_tf import models
from roberta_tf.data import dataset_info, packings, pipeline, unigram, vocab_info
from roberta_tf.models import checkpoint_files
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.tokenization.vocab_files import copy_vocab_files
from roberta_tf.training import checkpointing, flops, mlm_evaluation
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.objectives import MlmObjective
from roberta_tf.training.train_config import TrainConfig, write_config_json
from roberta_tf.training.trainer import StepConfig, Trainer


def uses_next_sentence(info: dict) -> bool:
  """Shards of a pair packing (the NSP input-format ablation): token types and an NSP head."""
  return info.get("packing") in packings.PAIR_PACKINGS


def resolve_model_config(cfg: TrainConfig, info: dict) -> models.RobertaConfig:
  """The model config: from --init_from's model dir, else the preset/JSON with the shards' vocab.

  Shards of a pair packing set BERT's two token types and NSP head on a preset/JSON model
  (a JSON with an NSP head needs pair shards); an --init_from model must already have them
  exactly when the shards are pairs.
  """
  pairs = uses_next_sentence(info)
  if cfg.init_from:
    model_config = models.read_config(cfg.init_from)
    if model_config.next_sentence_head != pairs:
      raise ValueError(
          f"--init_from={cfg.init_from!r} {'has' if model_config.next_sentence_head else 'has no'}"
          f" NSP head, but --train_data={cfg.train_data!r} is {info.get('packing')!r} shards: "
          "the pair packings (NSP) and the block packings cannot continue each other's models")
  elif os.path.isfile(cfg.config):
    model_config = models.RobertaConfig.load(cfg.config)
  else:
    model_config = models.preset(cfg.config, vocab_size=info["vocab"]["size"],
                                 max_positions=cfg.max_seq_len + 2,
                                 pad_id=info["special_ids"]["pad"],
                                 bos_id=info["special_ids"]["bos"],
                                 eos_id=info["special_ids"]["eos"],
                                 type_vocab_size=1 if cfg.type_embedding else 0,
                                 pre_layer_norm=cfg.pre_layer_norm, use_bias=cfg.use_bias,
                                 gated_ffn=cfg.gated_ffn)
  if pairs and not cfg.init_from:
    model_config = model_config.replace(type_vocab_size=2, next_sentence_head=True)
  elif model_config.next_sentence_head and not pairs:
    raise ValueError(f"--config={cfg.config!r} has next_sentence_head, but --train_data="
                     f"{cfg.train_data!r} is {info.get('packing')!r} shards with no "
                     "next-sentence labels: use segment_pair / sentence_pair shards")
  if cfg.dropout >= 0:
    model_config = model_config.replace(dropout=cfg.dropout, attention_dropout=cfg.dropout)
  return model_config


def build_datasets(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                   model_config: models.RobertaConfig, start: int):
  """The distributed train dataset (from sequence ``start`` of the global stream) and eval.

  The train stream is one sequence order for every split of the global batch (replicas x
  accumulation steps; data/pipeline.py), positioned by arithmetic: a resume reads no batch it
  does not use, and may change the number of replicas or accumulation steps.
  """
  per_replica = per_replica_batch(cfg, strategy)
  common = dict(per_replica_batch_size=per_replica, max_seq_len=cfg.max_seq_len,
                masking=cfg.masking_config(), model_config=model_config, seed=cfg.seed,
                skip_corrupt_shards=cfg.skip_corrupt_shards)

  def train_fn(ctx: tf.distribute.InputContext):
    return pipeline.build_dataset(cfg.train_data, "train", training=True, start=start,
                                  shuffle_buffer=cfg.shuffle_buffer, input_context=ctx, **common)

  train = strategy.distribute_datasets_from_function(train_fn)
  evaluation = None
  if cfg.eval_data:
    def eval_fn(ctx: tf.distribute.InputContext):
      return pipeline.build_dataset(cfg.eval_data, "validation", training=False,
                                    shuffle_buffer=0, input_context=ctx, **common)
    evaluation = strategy.distribute_datasets_from_function(eval_fn)
  return train, evaluation


# Settings that fix which sequences (and masks) each step reads; see warn_if_data_order_changed.
_DATA_ORDER_SETTINGS = ("train_data", "batch_size", "max_seq_len", "seed",
                        "shuffle_buffer", "mask_prob", "max_predictions_per_seq", "masking",
                        "whole_word_masking", "dupe_factor")


def warn_if_data_order_changed(cfg: TrainConfig) -> None:
  """Logs a warning when a resume changes what the data position means.

  The position is a count of sequences of the global stream; with another global batch, seed
  or data, the resumed run reads a different stream than an uninterrupted one would have (it
  still trains, but is no longer exact). Replicas and accumulation steps may change freely.
  """
  if not checkpoint_files.steps_on_disk(cfg.model_dir):
    return
  before = mlm_evaluation.training_config(cfg.model_dir)
  if before is None:
    return
  changed = [f"--{k}: {getattr(before, k)!r} -> {getattr(cfg, k)!r}"
             for k in _DATA_ORDER_SETTINGS if getattr(before, k) != getattr(cfg, k)]
  if changed:
    summaries_lib.log("warning: resuming with changed data settings (" + "; ".join(changed)
                      + "): the data stream will not continue exactly where it stopped")


def unigram_table(cfg: TrainConfig, model_config: models.RobertaConfig, info: dict):
  """The train split's unigram log-probabilities [V] (the plateau baseline), or None.

  `info` is the train data's dataset_info.json, as `pretraining.pretrain` already read it. A
  damaged train shard is an error here, before the first step reaches it
  (unigram.DamagedShardError names it); with --skip_corrupt_shards it is reported and left out
  of the count, as training skips it.
  """
  on_damaged = None
  if cfg.skip_corrupt_shards:
    on_damaged = lambda message: summaries_lib.log(f"warning: unigram baseline: {message}")
  try:
    return unigram.train_log_probs(cfg.train_data, model_config.vocab_size,
                                   info["special_ids"].values(), on_damaged=on_damaged)
  except unigram.DamagedShardError as e:
    raise unigram.DamagedShardError(f"{e}, or pass --skip_corrupt_shards to train without it") \
        from e
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
        time_budget=cfg.train_minutes > 0,
        weight_decay=cfg.weight_decay, beta_1=cfg.adam_beta1, beta_2=cfg.adam_beta2,
        epsilon=cfg.adam_epsilon)
  predictions = cfg.masking_config().resolved_max_predictions(cfg.max_seq_len)
  return Trainer(strategy, model, opt, StepConfig(
      grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
      norm_per_micro_batch=float(per_replica * predictions), jit_compile=cfg.jit_compile,
      sequences_per_round=per_replica * strategy.num_replicas_in_sync),
      objective=MlmObjective(next_sentence=model_config.next_sentence_head))


def mfu_denominator(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                    model_config: models.RobertaConfig) -> float:
  """FLOPs of one update / the replicas' peak FLOP/s: MFU = updates x this / seconds."""
  predictions = cfg.masking_config().resolved_max_predictions(cfg.max_seq_len)
  step_flops = flops.train_step_flops(
      num_layers=model_config.num_layers, hidden_size=model_config.hidden_size,
      intermediate_size=model_config.intermediate_size, vocab_size=model_config.vocab_size,
      seq_len=cfg.max_seq_len, predictions_per_seq=predictions, sequences=cfg.batch_size)
  peak = cfg.peak_flops or (cfg.peak_flops_fp32 if cfg.precision == "float32"
                            else cfg.peak_flops_bf16)
  return step_flops / (peak * strategy.num_replicas_in_sync)


def check_resumable(model_dir: str, model_config) -> None:
  """Refuses to resume a model dir whose checkpoints belong to another architecture.

  Checked before config.json is rewritten, so a wrong --config/--init_from never leaves the old
  checkpoints beside a config.json that does not describe them. Dropout may change.
  """
  if not checkpoint_files.steps_on_disk(model_dir):
    return
  try:
    old = model_dir_lib.read_config(model_dir)
  except ValueError:
    return  # no readable config.json yet: the restore itself will check the shapes
  ignore = ("dropout", "attention_dropout")
  # Every field, defaults included (to_dict leaves the ablation's fields out when unset).
  new_d, old_d = dataclasses.asdict(model_config), dataclasses.asdict(old)
  diff = sorted(k for k in new_d if k not in ignore and new_d[k] != old_d.get(k))
  if diff:
    hint = ("--config/--init_from it was trained with" if diff != ["type_vocab_size"] else
            "--type_embedding setting it was trained with (--notype_embedding for 0)")
    raise ValueError(
        f"--model_dir={model_dir!r} holds checkpoints of another model ("
        + ", ".join(f"{k}: {old_d.get(k)} there, {new_d[k]} now" for k in diff)
        + f"): use a new --model_dir, or the {hint}")


# What --overwrite deletes from a model dir: its checkpoints and TensorBoard logs (config.json
# and the vocab files are written again by the run).
_RUN_OUTPUTS = ("ckpt-*", checkpoint_files.INDEX_FILE, checkpoint_files.INDEX_FILE + ".tmp*",
                checkpoint_files.DAMAGED_DIR, "train", "eval", "workertemp_*")


def clean_model_dir(cfg: TrainConfig, log) -> None:
  """On the chief, holding the model dir's lock, before anything is written there: with
  --overwrite deletes the earlier run's checkpoints and logs; else removes what a killed save
  left (ckpt-N_temp/) and refuses a dir whose checkpoint files hold no complete checkpoint
  (before config.json is rewritten). The restore itself (Checkpointer.restore_latest) picks
  the newest complete checkpoint and says why."""
  if cfg.overwrite:
    removed = [p for pattern in _RUN_OUTPUTS
               for p in glob.glob(os.path.join(glob.escape(cfg.model_dir), pattern))]
    for path in removed:
      if os.path.isdir(path):
        shutil.rmtree(path)
      else:
        os.remove(path)
    if removed:
      log(f"--overwrite: deleted {len(removed)} checkpoint files and log directories of the "
          f"earlier run in {cfg.model_dir}")
    return
  stale = checkpoint_files.remove_stale_temps(cfg.model_dir)
  if stale:
    log(f"removed what an interrupted save left in {cfg.model_dir}: {', '.join(stale)}")
  steps = checkpoint_files.steps_on_disk(cfg.model_dir)
  if steps and checkpoint_files.newest_complete(cfg.model_dir) is None:
    problems = "; ".join(
        f"ckpt-{s}: {checkpoint_files.problem(checkpoint_files.prefix_of(cfg.model_dir, s))}"
        for s in reversed(steps))
    raise checkpointing.CheckpointError(
        f"--model_dir={cfg.model_dir} holds checkpoint files but no complete checkpoint "
        f"({problems}): restore the files, or pass --overwrite to start over (it deletes them)")


# Settings that shape the update at a step besides the data: a resume that changes them goes on
# from the checkpoint's step under the new values (see check_schedule_change).
_SCHEDULE_SETTINGS = ("learning_rate", "warmup_steps", "train_steps", "train_minutes",
                      "weight_decay",
                      "adam_beta1", "adam_beta2", "adam_epsilon", "clip_norm")


def _lr_at(step: int, peak: float, warmup: int, total: int) -> float:
  """schedule.WarmupLinearDecay at `step`, in Python."""
  if step < warmup:
    return peak * step / max(warmup, 1)
  return peak * max(0.0, (total - step) / max(total - warmup, 1))


def check_schedule_change(cfg: TrainConfig, log=None) -> None:
  """On a resume whose schedule or optimizer flags differ from the checkpoint's run: one line
  naming the old and new values and what happens (the run continues on the new schedule from
  the checkpoint's step, with the learning rate there under both). A --train_steps below the
  checkpoint's step leaves nothing to train and is refused.

  Raises:
    ValueError: --train_steps < the newest checkpoint's step, naming both.
  """
  steps = checkpoint_files.steps_on_disk(cfg.model_dir)
  if not steps or cfg.overwrite:
    return
  before = mlm_evaluation.training_config(cfg.model_dir)
  if before is None:
    return
  step = max(steps)
  changed = [f"--{k}: {getattr(before, k)!r} -> {getattr(cfg, k)!r}"
             for k in _SCHEDULE_SETTINGS if getattr(before, k) != getattr(cfg, k)]
  if cfg.train_steps < step and not cfg.train_minutes:
    raise ValueError(
        f"--model_dir={cfg.model_dir!r} holds a checkpoint at step {step}, past --train_steps="
        f"{cfg.train_steps} (the run was started with {before.train_steps}): nothing to train; "
        f"pass a --train_steps above {step} to continue it, or --overwrite to start over")
  if not changed or log is None:
    return
  where = ""
  if not (cfg.train_minutes or before.train_minutes):  # a budget's rate depends on the clock
    old = _lr_at(step, before.learning_rate, before.warmup_steps, before.train_steps)
    new = _lr_at(step, cfg.learning_rate, cfg.warmup_steps, cfg.train_steps)
    where = f", where the learning rate is {new:.3g} (the old schedule's: {old:.3g})"
  log(f"warning: resuming at step {step} with a changed schedule ({'; '.join(changed)}): "
      f"continuing on the new schedule from step {step}{where}; the optimizer's moments are "
      "kept")


def prepare_model_dir(cfg: TrainConfig, info: dict, model_config: models.RobertaConfig,
                      replicas: int) -> None:
  """On the chief, before the first step: warn about changed data settings on resume, write
  config.json (model + training + data), copy vocab.json/merges.txt beside the checkpoints."""
  warn_if_data_order_changed(cfg)
  write_config_json(cfg.model_dir, model_config.to_dict(), cfg,
                    extra={"data": {"train": cfg.train_data, "eval": cfg.eval_data,
                                    "vocab": info["vocab"], "special_ids": info["special_ids"],
                                    "replicas": replicas}})
  vocab_dir = vocab_info.find_vocab_dir(cfg.train_data, info)
  if vocab_dir is None or len(copy_vocab_files(vocab_dir, cfg.model_dir)) < 2:
    summaries_lib.log(f"warning: vocab.json/merges.txt of {cfg.train_data} not found (sha256 "
                      f"{info['vocab']['sha256'][:12]}...): export will need --vocab_dir")
