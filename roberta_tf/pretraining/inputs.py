"""Pretraining's inputs (Model Garden's `build_inputs`): the distributed train and eval
datasets over the shards, positioned at a checkpoint's data position, and the train split's
unigram baseline (the plateau check's reference)."""

from __future__ import annotations

import math

import tensorflow as tf

from roberta_tf import models
from roberta_tf.data import dataset_info, pipeline, training_stream, unigram
from roberta_tf.models import checkpoint_files, registry
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib


def per_replica_batch(cfg: TrainConfig, strategy: tf.distribute.Strategy) -> int:
  """Sequences per replica per micro-batch: --batch_size / (replicas x --grad_accum_steps)."""
  replicas = strategy.num_replicas_in_sync
  if cfg.data.batch_size % (replicas * cfg.optimizer.grad_accum_steps):
    raise ValueError(f"--batch_size={cfg.data.batch_size} is not divisible by replicas "
                     f"({replicas}) x --grad_accum_steps ({cfg.optimizer.grad_accum_steps})")
  return cfg.data.batch_size // (replicas * cfg.optimizer.grad_accum_steps)

def recorded_input_lanes(model_dir: str) -> int | None:
  """The input lanes config.json's "training" section records; 1 for a config.json written
  before lanes (its run read the one-lane stream); None without a readable config.json."""
  training = ModelDir(model_dir).section("training")
  return None if training is None else int(training.get("input_lanes", 1))


def input_lanes(cfg: TrainConfig, info: dict) -> int:
  """The run's input lanes L (data/training_stream.py): a resume (checkpoints in --model_dir,
  no --overwrite) keeps the recorded L, so its data position means the same stream; a new run
  takes `effective_lanes(--input_lanes, train shards, --batch_size)`, which depends on no world
  size. A resume whose --batch_size the recorded L does not divide (the data order changes
  anyway: warn_if_data_order_changed) goes on with gcd(L, --batch_size), which still divides
  the position. Every worker computes the same value, before or after the chief rewrites
  config.json with it (model_dir_setup.prepare_model_dir)."""
  if not cfg.model.overwrite and checkpoint_files.steps_on_disk(cfg.model.model_dir):
    recorded = recorded_input_lanes(cfg.model.model_dir)
    if recorded is not None:
      return math.gcd(recorded, cfg.data.batch_size)
  return training_stream.effective_lanes(
      cfg.data.input_lanes, len(info["splits"]["train"]["shards"]), cfg.data.batch_size)


def build_datasets(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                   model_config: models.RobertaConfig, start: int):
  """The distributed train dataset (from sequence ``start`` of the global stream) and eval.

  The train stream is one sequence order for every split of the global batch (replicas x
  accumulation steps and workers; data/training_stream.py), positioned by arithmetic: a resume
  reads no batch it does not use, and may change the number of replicas, workers or
  accumulation steps. Each worker reads only its share of the run's input lanes when the
  number of workers divides them.
  """
  cfg = cfg.for_family(registry.family_of(model_config))  # --mask_rate 0: the family's rate
  per_replica = per_replica_batch(cfg, strategy)
  info = dataset_info.read(cfg.train_data)
  lanes = input_lanes(cfg, info)
  if lanes != training_stream.effective_lanes(
      cfg.data.input_lanes, len(info["splits"]["train"]["shards"]), cfg.data.batch_size) and (
          strategy_lib.is_chief(strategy)):
    summaries_lib.log(f"input lanes: {lanes}, the run's (config.json); --input_lanes="
                      f"{cfg.data.input_lanes} applies to new runs")
  common = dict(per_replica_batch_size=per_replica, max_seq_len=cfg.data.max_seq_len,
                masking=cfg.masking_config(), model_config=model_config, seed=cfg.runtime.seed,
                skip_corrupt_shards=cfg.skip_corrupt_shards)

  def train_fn(ctx: tf.distribute.InputContext):
    return pipeline.build_dataset(cfg.train_data, "train", training=True, start=start,
                                  shuffle_buffer=cfg.shuffle_buffer, input_lanes=lanes,
                                  global_batch_size=cfg.data.batch_size, input_context=ctx,
                                  **common)

  train = strategy.distribute_datasets_from_function(train_fn)
  evaluation = None
  if cfg.eval_data:
    # Every family's evaluation masks 15% (registry.EVAL_MASK_RATE), whatever the training
    # rate: runs at different --mask_rate compare on one scale.
    eval_masking = cfg.masking_config(registry.EVAL_MASK_RATE)

    def eval_fn(ctx: tf.distribute.InputContext):
      return pipeline.build_dataset(cfg.eval_data, "validation", training=False,
                                    shuffle_buffer=0, input_context=ctx,
                                    **{**common, "masking": eval_masking})
    evaluation = strategy.distribute_datasets_from_function(eval_fn)
  return train, evaluation

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
