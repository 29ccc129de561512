"""Held-out MLM evaluation: the distributed eval step, and a model dir's checkpoint on shards.

`Evaluator` is what training runs every --eval_every steps; `evaluate_checkpoint` is what
`python -m roberta_tf.evaluate` runs. Both sum loss, masked-token count and correct predictions
over the whole eval set before dividing, so the batch size does not change the result.
"""

from __future__ import annotations

import math

import tensorflow as tf

from roberta_tf import models
from roberta_tf.data import dataset_info, pipeline, vocab_info
from roberta_tf.data import masking as masking_lib
from roberta_tf.data import unigram as unigram_lib
from roberta_tf.models import registry
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.pretraining.losses import mlm_sums, nsp_sums
from roberta_tf.pretraining.objective import model_inputs
from roberta_tf.pretraining.train_config import TrainConfig


class Evaluator:
  """MLM loss, perplexity and masked-token accuracy of ``model`` over a distributed dataset.

  With ``unigram_log_probs`` (float32 [V], see data/unigram.py) it also scores the same masked
  targets by their unigram probability: ``unigram_perplexity``, the plateau a model that
  ignores context sits on. On pair-packing data with a model that has an NSP head it also
  reports ``nsp_loss`` and ``nsp_accuracy`` (the MLM metrics stay MLM only).
  """

  def __init__(self, strategy: tf.distribute.Strategy, model, unigram_log_probs=None):
    self.strategy = strategy
    self.model = model
    self.unigram = (None if unigram_log_probs is None
                    else tf.constant(unigram_log_probs, tf.float32))
    self._step = tf.function(self._eval_step, autograph=False)

  def _eval_step(self, batch):
    nsp = ("next_sentence_labels" in batch
           and getattr(self.model, "nsp_head", None) is not None)

    def replica(batch):
      if nsp:
        logits, nsp_logits = self.model(model_inputs(batch), training=False, with_nsp=True)
      else:
        logits = self.model(model_inputs(batch), training=False)
      sums = mlm_sums(logits, batch["mask_ids"], batch["mask_weights"])
      if self.unigram is None:
        sums += (tf.constant(0.0),)
      else:
        unigram = -tf.gather(self.unigram, batch["mask_ids"]) * tf.cast(batch["mask_weights"],
                                                                         tf.float32)
        sums += (tf.reduce_sum(unigram),)
      if nsp:
        sums += nsp_sums(nsp_logits, batch["next_sentence_labels"],
                         batch["next_sentence_weights"])
      return sums
    sums = self.strategy.run(replica, args=(batch,))
    return [self.strategy.reduce(tf.distribute.ReduceOp.SUM, s, axis=None) for s in sums]

  def __call__(self, dataset, max_batches: int = 0) -> dict:
    """Metrics over ``dataset`` (its first ``max_batches`` batches if > 0).

    Returns:
      {"loss", "perplexity", "mlm_accuracy", "masked_tokens"} as Python floats, and
      "unigram_perplexity" when the evaluator has a unigram table, "nsp_loss" and
      "nsp_accuracy" for an NSP model on pair batches.
    Raises:
      ValueError: the dataset held no masked token.
    """
    # loss, count, correct, unigram (and nsp loss, count, correct): float64 on the host
    totals = None
    for i, batch in enumerate(dataset):
      if max_batches and i >= max_batches:
        break
      sums = [float(x.numpy()) for x in self._step(batch)]
      totals = sums if totals is None else [t + x for t, x in zip(totals, sums, strict=True)]
    totals = totals or [0.0] * 4
    loss_sum, count, correct, unigram_sum = totals[:4]
    if count == 0:
      raise ValueError("evaluation saw no masked tokens: is the eval split empty?")
    loss = loss_sum / count
    metrics = {"loss": loss, "perplexity": math.exp(min(loss, 700.0)),
               "mlm_accuracy": correct / count, "masked_tokens": count}
    if self.unigram is not None:
      metrics["unigram_perplexity"] = math.exp(min(unigram_sum / count, 700.0))
    if len(totals) > 4 and totals[5]:
      metrics["nsp_loss"] = totals[4] / totals[5]
      metrics["nsp_accuracy"] = totals[6] / totals[5]
    return metrics


# "Long after warmup": the reference leaves the plateau within a few warmups; so does ours
# since its init matches the reference (see models/initializers.py).
PLATEAU_MIN_STEP = 200
PLATEAU_TOLERANCE = 0.95


def on_unigram_plateau(metrics: dict, step: int, warmup_steps: int) -> bool:
  """True when held-out perplexity is within 5% of the unigram baseline long after warmup."""
  if "unigram_perplexity" not in metrics or step < max(3 * warmup_steps, PLATEAU_MIN_STEP):
    return False
  return metrics["perplexity"] >= PLATEAU_TOLERANCE * metrics["unigram_perplexity"]


def eval_line(prefix: str, metrics: dict) -> str:
  """`prefix: loss L | perplexity P | mlm_accuracy A[ | unigram perplexity U (P/U x)]`."""
  line = (f"{prefix}: loss {metrics['loss']:.4f} | perplexity {metrics['perplexity']:.2f} | "
          f"mlm_accuracy {metrics['mlm_accuracy']:.4f}")
  if "unigram_perplexity" in metrics:
    unigram = metrics["unigram_perplexity"]
    line += (f" | unigram perplexity {unigram:.2f} "
             f"({metrics['perplexity'] / unigram:.2f}x unigram)")
  if "nsp_accuracy" in metrics:
    line += f" | nsp_loss {metrics['nsp_loss']:.4f} | nsp_accuracy {metrics['nsp_accuracy']:.4f}"
  return line


def training_config(model_dir: str) -> TrainConfig | None:
  """The TrainConfig recorded in model_dir/config.json by training, or None (e.g. an import)."""
  training = ModelDir(model_dir).section("training")
  return None if training is None else TrainConfig.from_record(training)


def evaluate_checkpoint(model_dir: str, eval_data: str, *, checkpoint: str | None = None,
                        split: str = "validation", batch_size: int = 32,
                        max_seq_len: int | None = None, eval_steps: int = 0,
                        seed: int | None = None,
                        masking: masking_lib.MaskingConfig | None = None,
                        strategy: tf.distribute.Strategy | None = None,
                        unigram: bool = True) -> dict:
  """MLM loss, perplexity and masked-token accuracy of a checkpoint on a shard split.

  The masks are a pure function of the seed and each record's place (epoch 0), independent of
  the batch size, so with the defaults below this equals the final eval of the training run
  that wrote ``model_dir`` (over the whole split, i.e. when it ran with eval_steps 0).

  Args:
    model_dir: config.json + checkpoints.
    eval_data: a shard directory (data_prep.build_shards output).
    checkpoint: a checkpoint prefix instead of the latest.
    split: the shard split to read.
    batch_size: global sequences per eval batch.
    max_seq_len / seed / masking: default to the training run's (config.json "training"),
      else to the shards' max_seq_len, 0 and MaskingConfig().
    eval_steps: batches to evaluate (0: the whole split once).
    unigram: also score the unigram baseline (see `_unigram_table`).
  Returns:
    {"loss", "perplexity", "mlm_accuracy", "masked_tokens", "checkpoint"}, and
    "unigram_perplexity" of the same targets when a train split is found (beside the eval
    split, else the run's recorded train data) to count the unigram table from; "nsp_loss"
    and "nsp_accuracy" for a model with an NSP head on pair-packing shards.
  """
  strategy = strategy or tf.distribute.get_strategy()
  info = dataset_info.read(eval_data)
  shards, shards_dir = vocab_info.shards_vocabulary(eval_data, info)
  ModelDir(model_dir).check_vocabulary(
      shards, ("--eval_data", eval_data), shards_dir,
      hint="evaluate it on shards encoded with its vocabulary (data_prep.build_shards "
      "--vocab_dir=the model dir)")
  trained = training_config(model_dir)
  if trained is not None:
    max_seq_len = max_seq_len or trained.data.max_seq_len
    seed = trained.runtime.seed if seed is None else seed
    masking = masking or trained.masking_config(registry.EVAL_MASK_RATE)
  max_seq_len = max_seq_len or info["max_seq_len"]
  seed = seed or 0
  config = models.read_config(model_dir)
  prefix = checkpoint or models.model_dir.latest_checkpoint(model_dir)
  with strategy.scope():
    model = models.load(model_dir, checkpoint=prefix)
  per_replica = max(batch_size // strategy.num_replicas_in_sync, 1)

  def eval_fn(ctx):
    return pipeline.build_dataset(eval_data, split, training=False,
                                  per_replica_batch_size=per_replica,
                                  max_seq_len=max_seq_len, masking=masking, model_config=config,
                                  seed=seed, shuffle_buffer=0, input_context=ctx)
  dataset = strategy.distribute_datasets_from_function(eval_fn)
  unigram_lp = _unigram_table(model_dir, eval_data, info, config.vocab_size) if unigram else None
  metrics = Evaluator(strategy, model, unigram_log_probs=unigram_lp)(dataset, eval_steps)
  metrics["checkpoint"] = prefix
  return metrics


def _unigram_table(model_dir: str, eval_data: str, info: dict, vocab_size: int):
  """Unigram log-probs from the train split beside the eval split; only where there is none
  there, from the run's recorded train data (config.json); None when neither exists.

  Raises:
    unigram_lib.DamagedShardError: a shard of the chosen train split is damaged (never a
      silent fall back to another directory, nor a count from a truncated shard).
  """
  source = eval_data if "train" in info.get("splits", {}) else None
  if source is None:
    recorded = (ModelDir(model_dir).section("data") or {}).get("train")
    if not (isinstance(recorded, str) and recorded):
      return None
    try:
      if "train" in dataset_info.read(recorded).get("splits", {}):
        source = recorded
    except dataset_info.DatasetInfoError:
      return None
  if source is None:
    return None
  try:
    return unigram_lib.train_log_probs(source, vocab_size, info["special_ids"].values())
  except unigram_lib.DamagedShardError as e:
    raise unigram_lib.DamagedShardError(
        f"unigram baseline: {e}, or pass --nounigram to evaluate without it") from e
