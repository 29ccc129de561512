"""The held-out MLM loss by position bucket: does a long-context model use its far positions?

A masked token at position p of its row (0 is the row's first token, `<s>` / `[CLS]`) falls in
bucket [lo, hi) of the edges: with the default edges (512, 1,024, 2,048, 4,096, 8,192) the
buckets are 0-512, 512-1K, 1K-2K, 2K-4K, 4K-8K, and positions from the last edge on make one
open bucket (8K+). A bucket with no masked token (beyond the eval rows' length) is left out of
the report, and so is the whole report when the tokens fall in one bucket only (it would repeat
the overall loss: any eval of rows up to 512 tokens). The evaluation sums cross-entropy and
counts per bucket over the whole set before dividing, like the overall loss, so the counts'
weighted mean of the bucket losses is the overall loss. TensorFlow-free but `bucket_sums`.
"""

from __future__ import annotations

DEFAULT_EDGES = (512, 1024, 2048, 4096, 8192)


def edges_ok(edges) -> bool:
  """Some edges, positive and strictly increasing."""
  edges = tuple(edges)
  return bool(edges) and edges[0] > 0 and all(b > a for a, b in zip(edges, edges[1:]))


def check_edges(edges) -> tuple[int, ...]:
  """`edges` as a tuple of ints; ValueError unless `edges_ok`."""
  edges = tuple(int(e) for e in edges)
  if not edges_ok(edges):
    raise ValueError(f"position bucket edges must be positive and increasing, got {edges}")
  return edges


def _short(n: int) -> str:
  """1024 -> "1K", 512 -> "512", 0 -> "0"."""
  return f"{n // 1024}K" if n and n % 1024 == 0 else str(n)


def bucket_names(edges) -> list[str]:
  """The names of the len(edges) + 1 buckets: "0-512", "512-1K", ..., "8K+"."""
  bounds = (0, *edges)
  return ([f"{_short(lo)}-{_short(hi)}" for lo, hi in zip(bounds, bounds[1:])]
          + [f"{_short(edges[-1])}+"])


def bucket_sums(xent, weights, positions, edges):
  """Per-bucket sums of the weighted cross-entropy and of the weights.

  Args:
    xent: float32 [B, P] each prediction slot's cross-entropy.
    weights: [B, P] 1 for a real prediction, 0 for an empty slot.
    positions: int [B, P] each slot's position in its row.
    edges: the buckets' edges (check_edges).
  Returns:
    (loss_sums, counts): float32 [len(edges) + 1] each.
  """
  # Imported here: the binaries' flags read DEFAULT_EDGES, and `--help` imports no TensorFlow.
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  bucket = tf.reduce_sum(tf.cast(tf.cast(positions, tf.int32)[..., None]
                                 >= tf.constant(edges, tf.int32), tf.int32), axis=-1)
  weights = tf.cast(weights, tf.float32)
  n = len(edges) + 1
  return (tf.math.unsorted_segment_sum(tf.reshape(xent * weights, [-1]),
                                       tf.reshape(bucket, [-1]), n),
          tf.math.unsorted_segment_sum(tf.reshape(weights, [-1]), tf.reshape(bucket, [-1]), n))


def report(loss_sums, counts, edges) -> dict:
  """{"loss_by_position": {name: mean loss}, "masked_tokens_by_position": {name: count}} of
  the buckets holding masked tokens, in position order; {} when fewer than two do."""
  kept = [(name, float(s), float(c)) for name, s, c in zip(bucket_names(edges), loss_sums, counts)
          if c > 0]
  if len(kept) < 2:
    return {}
  return {"loss_by_position": {name: s / c for name, s, c in kept},
          "masked_tokens_by_position": {name: c for name, _, c in kept}}


def line(metrics: dict) -> str:
  """"loss by position: 0-512 3.2101 (1,234) | 512-1K ..." (masked tokens in brackets); "" when
  `metrics` has no by-position report."""
  losses = metrics.get("loss_by_position")
  if not losses:
    return ""
  counts = metrics["masked_tokens_by_position"]
  return "loss by position: " + " | ".join(f"{name} {loss:.4f} ({counts[name]:,.0f})"
                                           for name, loss in losses.items())
