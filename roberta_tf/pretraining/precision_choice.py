"""`train --precision=auto` resolved before the model is built (training/precision_probe.py).

A resumed run keeps the precision its config.json records (a run does not change numerics
half way); otherwise the probe times float32 and mixed_bfloat16 on the run's model, optimizer,
strategy and per-replica micro-batch. Under a multi-worker cluster every worker measures the
same steps together (their collectives run inside the probe) and the workers' mean seconds
decide, so all of them pick the same; the per-machine cache is used only by a single worker
(one worker answering from its cache while another measures would leave the other waiting in
a collective).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common.option_groups import PRECISIONS
from roberta_tf.models import checkpoint_files, registry
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.pretraining import inputs
from roberta_tf.pretraining.task import PretrainingTask, synthetic_batch
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import precision_probe
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training.task import build_train_step


def recorded_precision(model_dir: str) -> str | None:
  """The precision config.json's "training" section records, when the model dir has a
  checkpoint to resume (else None: a new run chooses afresh)."""
  if not checkpoint_files.steps_on_disk(model_dir):
    return None
  precision = (ModelDir(model_dir).section("training") or {}).get("precision")
  return precision if precision in PRECISIONS else None


def _agreed(strategy: tf.distribute.Strategy, seconds: dict[str, float]) -> dict[str, float]:
  """The mean of every replica's measured seconds (the same dict on every worker)."""
  names = sorted(seconds)
  values = tf.constant([seconds[n] for n in names], tf.float64)
  mean = strategy.reduce(tf.distribute.ReduceOp.MEAN,
                         strategy.run(lambda: tf.identity(values)), axis=None)
  return dict(zip(names, mean.numpy().tolist(), strict=True))


def resolve(cfg: TrainConfig, strategy: tf.distribute.Strategy,
            model_config: models.RobertaConfig, log) -> TrainConfig:
  """`cfg` with --precision=auto replaced by the precision to train in (`cfg` as is
  otherwise). Reseeds Keras afterwards, so the run's model starts as without the probe."""
  if cfg.runtime.precision != "auto":
    return cfg
  recorded = None if cfg.model.overwrite else recorded_precision(cfg.model.model_dir)
  if recorded:
    log(f"precision auto: {recorded} (the resumed run's, from its config.json)")
    return cfg.replace(precision=recorded)
  per_replica = inputs.per_replica_batch(cfg, strategy)
  predictions = cfg.for_family(registry.family_of(model_config)).masking_config(
      ).resolved_max_predictions(cfg.data.max_seq_len)
  replicas = strategy.num_replicas_in_sync
  batch = synthetic_batch(per_replica * replicas, cfg.data.max_seq_len, predictions,
                          model_config.vocab_size, seed=cfg.runtime.seed)

  def build_step(precision):
    task = PretrainingTask(cfg.replace(precision=precision), strategy, model_config)
    return build_train_step(task, strategy)
  dims = {k: v for k, v in model_config.to_dict().items() if isinstance(v, (int, float, bool))}
  key = precision_probe.cache_key(dims, (per_replica, cfg.data.max_seq_len, predictions), replicas)
  if strategy_lib.cluster_of(strategy) is None:
    picked = precision_probe.pick(build_step, strategy, batch, key, log=log)["precision"]
  else:
    seconds = {p: precision_probe.seconds_per_step(build_step(p), strategy, batch, 2, 3)
               for p in precision_probe.CANDIDATES}
    seconds = _agreed(strategy, seconds)
    picked = precision_probe.choose(seconds)
    log(f"precision auto: {picked} (mean over the workers: "
        + ", ".join(f"{p} {s * 1000:.0f} ms a step" for p, s in seconds.items()) + ")")
  keras.utils.set_random_seed(cfg.runtime.seed)
  return cfg.replace(precision=picked)
