"""The training stream in lanes: every input pipeline reads only its share of the shards.

The stream is made of L lanes (`InputConfig.lanes`, fixed for a run: `effective_lanes`):

    lane l of L owns the train shards l, l + L, l + 2L, ... (each shard is a uniform random
      sample of the split, build_shards' global shuffle, so the lanes are statistically alike)
      ─ per lane epoch (each lane counts its own): the lane's shards in a stateless order,
      concatenated (read shard) ─ windows of max(1, shuffle_buffer // L) sequences, each
      permuted by a stateless seed of (seed, epoch, lane, window)
    step t takes sequences [t*G/L, (t+1)*G/L) of every lane (G: the global batch); the step's
      order is lane 0's slice, lane 1's, ...
    input pipeline p of P yields the step's sequences [p*G/P, (p+1)*G/P) as A x R/P batches of
      B rows (A accumulation steps, R replicas): when P divides L these are exactly the slices
      of lanes [p*L/P, (p+1)*L/P), the only shards it reads; otherwise it reads every lane and
      keeps its part (correct, no saving; a note says so)

So a step's sequences (and masks: each record carries (shard_key(seed, epoch, shard), record
index), its epoch the lane's) are the same for every number of workers, replicas and
accumulation steps, while P workers each read about 1/P of the bytes. The position saved in
checkpoints stays a count of sequences consumed (a multiple of L); a lane is at position / L, so
`InputConfig.start` positions every lane by arithmetic (at most one shard's record headers and
one window per lane), as before. The shuffle buffers of one pipeline hold about
shuffle_buffer / P sequences.

L = 1 is the stream before lanes, unchanged (model dirs written before lanes resume with it):
one lane of all shards in order, windows of `shuffle_buffer`, batches of B, and replica k of R
takes batches k, k + R, k + 2R, ..., so every pipeline reads the whole stream.
"""

from __future__ import annotations

import sys

import tensorflow as tf

from roberta_tf.data import dataset_info


def effective_lanes(requested: int, num_shards: int, global_batch_size: int) -> int:
  """The lanes a new run uses: the largest L <= `requested` that divides both the number of
  train shards (so every lane owns as many shards, and the lanes' epochs are about as long)
  and the global batch (so a step takes G/L sequences of each lane). It depends on neither the
  number of workers nor the replicas, so a run may resume at another world size."""
  for lanes in range(max(1, min(requested, num_shards)), 0, -1):
    if num_shards % lanes == 0 and global_batch_size % lanes == 0:
      return lanes
  return 1


_NOTED: set[tuple[int, int]] = set()


def training_stream(read_shard, counts: list[int], config,
                    input_context: tf.distribute.InputContext | None) -> tf.data.Dataset:
  """This input pipeline's batches of the training stream from ``config.start``: dicts of
  `input_ids` [B, S], `seed` [B, 2] (and the pair fields), unmasked.

  Args:
    read_shard: (shard index, epoch, first record) -> the shard's records from there on.
    counts: the split's sequences per shard (dataset_info.json).
    config: the pipeline's InputConfig (seed, shuffle_buffer, per_replica_batch_size, start,
      lanes, global_batch_size).
    input_context: the strategy's, or None (one pipeline, one replica).
  """
  _check_lanes(counts, config.lanes)
  replicas = input_context.num_replicas_in_sync if input_context else 1
  pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  if config.lanes == 1:
    return _one_lane(read_shard, counts, config, replicas, pipelines, pipeline_id)
  return _in_lanes(read_shard, counts, config, replicas, pipelines, pipeline_id)


def _check_lanes(counts: list[int], lanes: int) -> None:
  """Raises unless every shard's count is recorded and each of the lanes owns a sequence."""
  if min(counts) < 0:
    raise dataset_info.DatasetInfoError("dataset_info.json lacks per-shard num_sequences "
                                        "(needed to position the training stream); rebuild it")
  if lanes > len(counts):
    raise ValueError(f"{lanes} input lanes need at least as many train shards; the split has "
                     f"{len(counts)}")
  lane_sizes = [sum(counts[lane::lanes]) for lane in range(lanes)]
  if not all(lane_sizes):
    raise dataset_info.DatasetInfoError(
        f"input lane {lane_sizes.index(0)} of {lanes} (train shards {lane_sizes.index(0)}, "
        f"+{lanes}, ...) holds no sequence")


def _one_lane(read_shard, counts: list[int], config, replicas: int, pipelines: int,
              pipeline_id: int) -> tf.data.Dataset:
  """L = 1, the stream before lanes: batches of B; replica k of R takes batches k, k + R, ...
  (every pipeline reads the whole stream and keeps its replicas' batches)."""
  batches = _lane(read_shard, counts, 0, 1, config, config.start).batch(
      config.per_replica_batch_size, drop_remainder=True)
  if replicas == 1:
    return batches
  local = replicas // pipelines
  mine = batches.enumerate().filter(lambda j, _: (j % replicas) // local == pipeline_id)
  return mine.map(lambda _, x: x)


def _in_lanes(read_shard, counts: list[int], config, replicas: int, pipelines: int,
              pipeline_id: int) -> tf.data.Dataset:
  """L > 1: this pipeline's part of every step (G/L sequences of each lane), batches of B."""
  lanes, b = config.lanes, config.per_replica_batch_size
  g = config.global_batch_size or b * replicas
  if g % (b * replicas) or g % lanes or config.start % lanes:
    raise ValueError(
        f"the global batch {g} must be a multiple of the per-replica batch {b} x {replicas} "
        f"replicas and of the {lanes} input lanes, and the start position {config.start} a "
        f"multiple of the lanes")
  share = lanes % pipelines == 0
  if share:
    mine = range(pipeline_id * lanes // pipelines, (pipeline_id + 1) * lanes // pipelines)
  else:
    mine = range(lanes)
    if (pipelines, lanes) not in _NOTED:
      _NOTED.add((pipelines, lanes))
      print(f"note: {pipelines} input pipelines do not divide the run's {lanes} input lanes: "
            "each pipeline reads every lane and keeps its share of each step (the same batches, "
            "no saving in reads); a number of workers that divides the lanes reads 1/workers "
            "each", file=sys.stderr)
  # Round robin over the lanes, G/L sequences each: the steps' sequences, in order.
  stream = tf.data.Dataset.from_tensor_slices(tf.constant(list(mine), tf.int64)).interleave(
      lambda lane: _lane(read_shard, counts, lane, lanes, config, config.start // lanes),
      cycle_length=len(mine), block_length=g // lanes, num_parallel_calls=len(mine),
      deterministic=True)
  if not share:  # this pipeline's part of each step
    part = g // pipelines
    stream = stream.enumerate().filter(lambda i, _: (i % g) // part == pipeline_id).map(
        lambda _, x: x)
  return stream.batch(b, drop_remainder=True)


def _lane(read_shard, counts: list[int], lane, lanes: int, config,
          position: int) -> tf.data.Dataset:
  """Lane ``lane`` (an int, or an int64 scalar tensor) of ``lanes`` from its sequence
  ``position`` on: records, forever."""
  shards_t = tf.range(lane, len(counts), lanes, dtype=tf.int64)
  counts_t = tf.gather(tf.constant(counts, tf.int64), shards_t)
  per_epoch = tf.reduce_sum(counts_t)
  window = max(1, config.shuffle_buffer // lanes) if config.shuffle_buffer else 0

  def key(epoch):
    """The lane's stateless key of an epoch ([seed, epoch] for one lane: the stream before
    lanes)."""
    k = tf.stack([tf.constant(config.seed, tf.int64), epoch])
    return k if lanes == 1 else tf.random.experimental.stateless_fold_in(k, lane)

  def epoch_stream(epoch, first):
    """Epoch ``epoch``'s sequences from ``first`` (a window start) on, windows permuted."""
    if config.shuffle_buffer:
      order = tf.cast(tf.argsort(tf.random.stateless_uniform(tf.shape(shards_t),
                                                             seed=key(epoch))), tf.int64)
    else:
      order = tf.range(tf.size(shards_t, out_type=tf.int64))
    ends = tf.cumsum(tf.gather(counts_t, order))
    i = tf.searchsorted(ends, tf.reshape(first, [1]), side="right")[0]
    start = first - (ends[i] - counts_t[order[i]])
    chosen = tf.data.Dataset.from_tensor_slices(
        (tf.gather(shards_t, order[i:]), tf.concat([[start], tf.zeros_like(order[i + 1:])], 0)))
    records = chosen.flat_map(lambda shard, at: read_shard(shard, epoch, at))
    if not window:
      return records
    windows = tf.data.Dataset.zip(tf.data.Dataset.range(first // window, per_epoch),
                                  records.batch(window))

    def permute(w, x):
      perm = tf.argsort(tf.random.stateless_uniform(
          [tf.shape(x["seed"])[0]], seed=tf.random.experimental.stateless_fold_in(key(epoch), w)))
      return tf.data.Dataset.from_tensor_slices({k: tf.gather(v, perm) for k, v in x.items()})
    return windows.flat_map(permute)

  # Sequence `position` is in epoch e0 at offset q0: begin at its window, drop what precedes it.
  e0, q0 = position // per_epoch, position % per_epoch
  first = q0 - q0 % window if window else q0
  stream = epoch_stream(e0, first).skip(q0 - first)
  return stream.concatenate(tf.data.Dataset.counter(e0 + 1).flat_map(
      lambda e: epoch_stream(e, tf.constant(0, tf.int64))))
