"""Held-out MLM evaluation: the distributed eval step, and a model dir's checkpoint on shards.

`Evaluator` is what training runs every --eval_every steps; `evaluate_checkpoint` is what
`python -m roberta_tf.evaluate` runs. Both sum loss, masked-token count and correct predictions
over the whole eval set before dividing, so the batch size does not change the result.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.data import dataset_info, pipeline, vocab_info
from roberta_tf.data import masking as masking_lib
from roberta_tf.data import unigram as unigram_lib
from roberta_tf.models import registry
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.models.modernbert import rotary_embedding
from roberta_tf.pretraining import position_buckets
from roberta_tf.pretraining.losses import nsp_sums, xent_and_correct
from roberta_tf.pretraining.objective import model_inputs
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import summaries as summaries_lib


class Evaluator:
  """MLM loss, perplexity and masked-token accuracy of ``model`` over a distributed dataset,
  and the loss by position bucket (position_buckets.py: 0-512, 512-1K, ... of `position_edges`).

  With ``unigram_log_probs`` (float32 [V], see data/unigram.py) it also scores the same masked
  targets by their unigram probability: ``unigram_perplexity``, the plateau a model that
  ignores context sits on. On pair-packing data with a model that has an NSP head it also
  reports ``nsp_loss`` and ``nsp_accuracy`` (the MLM metrics stay MLM only).
  """

  def __init__(self, strategy: tf.distribute.Strategy, model, unigram_log_probs=None,
               position_edges=position_buckets.DEFAULT_EDGES):
    self.strategy = strategy
    self.model = model
    self.unigram = (None if unigram_log_probs is None
                    else tf.constant(unigram_log_probs, tf.float32))
    self.edges = position_buckets.check_edges(position_edges)
    self._step = tf.function(self._eval_step, autograph=False)

  def _eval_step(self, batch):
    nsp = ("next_sentence_labels" in batch
           and getattr(self.model, "nsp_head", None) is not None)

    def replica(batch):
      if nsp:
        logits, nsp_logits = self.model(model_inputs(batch), training=False, with_nsp=True)
      else:
        logits = self.model(model_inputs(batch), training=False)
      weights = tf.cast(batch["mask_weights"], tf.float32)
      xent, correct = xent_and_correct(logits, batch["mask_ids"])
      sums = {"loss": tf.reduce_sum(xent * weights), "count": tf.reduce_sum(weights),
              "correct": tf.reduce_sum(correct * weights)}
      positions = batch["mask_positions"]
      if "document_ids" in batch:  # packed documents: a token's position in its own document
        positions = tf.gather(rotary_embedding.document_positions(batch["document_ids"]),
                              positions, batch_dims=1)
      sums["bucket_loss"], sums["bucket_count"] = position_buckets.bucket_sums(
          xent, weights, positions, self.edges)
      if self.unigram is not None:
        sums["unigram"] = tf.reduce_sum(-tf.gather(self.unigram, batch["mask_ids"]) * weights)
      if nsp:
        sums["nsp_loss"], sums["nsp_count"], sums["nsp_correct"] = nsp_sums(
            nsp_logits, batch["next_sentence_labels"], batch["next_sentence_weights"])
      return sums
    sums = self.strategy.run(replica, args=(batch,))
    return {k: self.strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None)
            for k, v in sums.items()}

  def __call__(self, dataset, max_batches: int = 0) -> dict:
    """Metrics over ``dataset`` (its first ``max_batches`` batches if > 0).

    Returns:
      {"loss", "perplexity", "mlm_accuracy", "masked_tokens"} as Python floats;
      "loss_by_position" and "masked_tokens_by_position" ({bucket name: float}, position
      order) when the masked tokens fall in two buckets or more; "unigram_perplexity" when
      the evaluator has a unigram table, "nsp_loss" and "nsp_accuracy" for an NSP model on
      pair batches.
    Raises:
      ValueError: the dataset held no masked token.
    """
    totals: dict[str, np.ndarray] = {}  # float64 on the host
    for i, batch in enumerate(dataset):
      if max_batches and i >= max_batches:
        break
      for k, v in self._step(batch).items():
        totals[k] = totals.get(k, 0.0) + np.asarray(v.numpy(), np.float64)
    count = float(totals.get("count", 0.0))
    if count == 0:
      raise ValueError("evaluation saw no masked tokens: is the eval split empty?")
    loss = float(totals["loss"]) / count
    metrics = {"loss": loss, "perplexity": math.exp(min(loss, 700.0)),
               "mlm_accuracy": float(totals["correct"]) / count, "masked_tokens": count}
    metrics.update(position_buckets.report(totals["bucket_loss"], totals["bucket_count"],
                                           self.edges))
    if "unigram" in totals:
      metrics["unigram_perplexity"] = math.exp(min(float(totals["unigram"]) / count, 700.0))
    if float(totals.get("nsp_count", 0.0)):
      metrics["nsp_loss"] = float(totals["nsp_loss"]) / float(totals["nsp_count"])
      metrics["nsp_accuracy"] = float(totals["nsp_correct"]) / float(totals["nsp_count"])
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


# The eval metrics that go to TensorBoard (training's `eval` run, evaluate's own), besides the
# loss by position.
_SUMMARY_SCALARS = ("loss", "perplexity", "mlm_accuracy", "unigram_perplexity", "nsp_loss",
                    "nsp_accuracy")


def summary_scalars(metrics: dict) -> dict:
  """The scalars of `metrics` that go to TensorBoard ({metric name: float}; the loss of each
  position bucket as `loss_by_position/<bucket>`: training/summaries.py's tags)."""
  scalars = {k: metrics[k] for k in _SUMMARY_SCALARS if k in metrics}
  for bucket, loss in metrics.get("loss_by_position", {}).items():
    scalars[summaries_lib.BY_POSITION + bucket] = loss
  return scalars


def training_config(model_dir: str) -> TrainConfig | None:
  """The TrainConfig recorded in model_dir/config.json by training, or None (e.g. an import)."""
  training = ModelDir(model_dir).section("training")
  return None if training is None else TrainConfig.from_record(training)


def evaluate_checkpoint(model_dir: str, eval_data: str, *, checkpoint: str | None = None,
                        split: str = "validation", batch_size: int = 32,
                        max_seq_len: int | None = None, eval_steps: int = 0,
                        seed: int | None = None,
                        masking: masking_lib.MaskingConfig | None = None,
                        strategy: tf.distribute.Strategy | None = None, unigram: bool = True,
                        position_edges=position_buckets.DEFAULT_EDGES) -> dict:
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
    unigram / position_edges: the unigram baseline (`_unigram_table`); the position buckets.
  Returns:
    `Evaluator`'s metrics and "checkpoint"; "unigram_perplexity" of the same targets when a
    train split is found (beside the eval split, else the run's recorded train data) to count
    the unigram table from.
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
  prefix = models.model_dir.resolve_checkpoint(model_dir, checkpoint)
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
  metrics = Evaluator(strategy, model, unigram_log_probs=unigram_lp,
                      position_edges=position_edges)(dataset, eval_steps)
  metrics["checkpoint"] = prefix
  return metrics


def write_summaries(model_dir: str, eval_data: str, split: str, metrics: dict) -> str:
  """`evaluate_checkpoint`'s `metrics` to TensorBoard at the checkpoint's step: the run
  `evaluate/<eval_data's name>[_<split>]` of `model_dir` (beside training's train and eval
  runs, not mixed into them: other data, other masks). Returns the run's directory."""
  name = files.basename(files.normalize(eval_data)) or "eval_data"
  run = files.join("evaluate", name if split == "validation" else f"{name}_{split}")
  tail = files.basename(metrics["checkpoint"]).rsplit("-", 1)[-1]
  summaries = summaries_lib.Summaries(model_dir, runs=())
  summaries.scalars(run, int(tail) if tail.isdigit() else 0, summary_scalars(metrics))
  return files.join(model_dir, run)


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
