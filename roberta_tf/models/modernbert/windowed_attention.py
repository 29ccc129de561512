"""`attend`: ModernBERT's scaled dot-product attention, global or within a window.

The one attention function of the family: training, evaluation and serving all call it. It never
builds an L x L score matrix when L is long:

- local layers (radius r): blocked attention. The sequence is cut into query blocks of b tokens
  (b a multiple of r); block n attends to the keys [n b - r, n b + b + r), b + 2r of them, with
  the band |i - j| <= r masked inside: O(L (b + 2r)) time and memory.
- global layers: query-chunked attention. Chunks of `GLOBAL_CHUNK` queries attend to every key
  in turn (a while loop, one chunk alive at a time): O(L^2) time, O(chunk x L) memory, in the
  gradient too (it recomputes each chunk's probabilities instead of keeping them).

`attend_reference` is the full-matrix definition both are tested against (tests/
test_windowed_attention.py). Padding L to whole blocks / chunks happens inside; outputs are
sliced back to L. With `document_ids` (rows packing several documents: data/packings.py's
document packings) a query also sees only keys of its own document, in every kind of layer.
"""

from __future__ import annotations

import math

import numpy as np
import tensorflow as tf

# Added where a key is not allowed: exp() of it underflows to exactly 0 in float32, so allowed
# keys get HF's probabilities (HF adds finfo.min; both give 0). A query with no allowed key (a
# pad query far from every real token in a local layer) gets finite values of no meaning, as
# in HF (whose values there depend on the backend): only real positions are compared.
_MASKED = -1e9

# Query block of local layers: about this many tokens, rounded to a multiple of the radius. At
# base size (r = 64, 12 heads, L = 8,192, fp32, 2 Zen 4 cores) blocks of 64 ran a local layer's
# attention in 0.08-0.13 s, 128 and 256 in 0.3-0.37 s (docs/long_inputs.md).
LOCAL_BLOCK = 64
# Queries per chunk of a global layer. Its scores are [B, A, GLOBAL_CHUNK, L] float32: 100 MB
# for base at L = 8,192. One global layer's attention there (benchmarks/serving/
# attention_blocks.py, 2 shared Zen 5 cores): chunks of 128 / 256 / 512: 1.33 / 1.22 / 1.20 CPU s,
# 1,109 / 1,149 / 1,261 MB peak RSS; the full matrix 1.09 s and 4,240 MB. 256 keeps 512's
# speed within 2% for ~110 MB less.
GLOBAL_CHUNK = 256


def attend(q, k, v, padding_mask, radius=None, dropout=None, training=None, document_ids=None):
  """softmax(q k^T / sqrt(D) + mask) v over the allowed keys.

  Args:
    q, k, v: [B, A, L, D] in the compute dtype (q and k already rotated); L may be dynamic.
    padding_mask: int [B, L], 1 real, 0 pad. Pads are masked as keys only: pad queries still
      produce (meaningless) outputs.
    radius: None for global attention (every real key); an int r for local attention: query i
      sees key j iff |i - j| <= r (ModernBERT's local_attention // 2, inclusive).
    dropout: an optional keras Dropout applied to the probabilities.
    training: passed to `dropout`.
    document_ids: None (each row one document), or int [B, L]: each token's document in its
      row; query i then sees key j only if they are equal (on top of the above).

  Returns:
    [B, A, L, D] in v's dtype. Scores, mask and softmax are float32; the probabilities are
    cast to v's dtype before the product with v (HF M:165-173). Equal to `attend_reference`
    (float32 rounding apart) at every query with an allowed key.
  """
  if radius is None:
    return _global_chunked(q, k, v, padding_mask, dropout, training, document_ids)
  return _local_blocked(q, k, v, padding_mask, int(radius), dropout, training, document_ids)


def attend_reference(q, k, v, padding_mask, radius=None, dropout=None, training=None,
                     document_ids=None):
  """`attend` by the full [B, A, L, L] score matrix, masked (the definition; O(L^2) memory)."""
  positions = tf.range(tf.shape(q)[2])
  near = None if radius is None else (
      tf.abs(positions[:, None] - positions[None, :]) <= radius)[None, None]
  allowed = _key_allowed(padding_mask)[:, None, None, :]
  if document_ids is not None:
    allowed = allowed & _same_document(document_ids, document_ids)[:, None]
  return _softmax_product(q, k, v, allowed, near, dropout, training)


def _key_allowed(padding_mask):
  return tf.cast(padding_mask, tf.bool)


def _same_document(query_documents, key_documents):
  """bool [..., Lq, Lk]: query_documents [..., Lq] against key_documents [..., Lk]."""
  return tf.equal(query_documents[..., :, None], key_documents[..., None, :])


def _softmax_product(q, k, v, allowed, near, dropout, training):
  """softmax(q k^T scale, masked where not allowed (and near)) v, float32 softmax. `allowed`
  is bool, or (near None) float32 already 0 / _MASKED."""
  scale = 1.0 / math.sqrt(q.shape[-1])
  scores = tf.cast(tf.matmul(q, k, transpose_b=True), tf.float32) * scale
  if near is not None:
    allowed = tf.logical_and(allowed, near)
  if allowed.dtype == tf.bool:
    scores = scores + tf.where(allowed, 0.0, _MASKED)
  else:  # already the additive mask
    scores = scores + allowed
  probs = tf.cast(tf.nn.softmax(scores, axis=-1), v.dtype)
  if dropout is not None:
    probs = dropout(probs, training=training)
  return tf.matmul(probs, v)


def _block_sizes(radius):
  """(b, u): query block b, a multiple of the key sub-block u (u = r, or 1 when r = 0)."""
  unit = max(radius, 1)
  return unit * max(1, round(LOCAL_BLOCK / unit)), unit


def _local_blocked(q, k, v, padding_mask, radius, dropout, training, document_ids=None):
  """Local attention by query blocks of b over their b + 2r neighbouring keys."""
  block, unit = _block_sizes(radius)
  per_block, reach = block // unit, radius // unit  # sub-blocks of u per query block / per r
  span = (per_block + 2 * reach) * unit
  heads, depth = q.shape[1], q.shape[-1]
  batch, length = tf.shape(q)[0], tf.shape(q)[2]
  blocks = (length + block - 1) // block
  tail = blocks * block - length

  def neighbourhoods(x, axis, sub_shape):
    """x with L at `axis` -> N, span there: block n's keys [n b - r, n b + b + r)."""
    pads = [[0, 0]] * axis + [[radius, tail + radius]] + [[0, 0]] * (len(x.shape) - axis - 1)
    subs = tf.reshape(tf.pad(x, pads), sub_shape)  # [..., N * per_block + 2 reach, u, *rest]
    views = [subs[(slice(None),) * axis + (slice(i, i + blocks * per_block, per_block),)]
             for i in range(per_block + 2 * reach)]  # each [..., N, u, *rest]
    return tf.concat(views, axis=axis + 1)

  sub_count = blocks * per_block + 2 * reach
  k_near = neighbourhoods(k, 2, [batch, heads, sub_count, unit, depth])  # [B, A, N, span, D]
  v_near = neighbourhoods(v, 2, [batch, heads, sub_count, unit, depth])
  # [B, N, span]: which keys of each neighbourhood are real tokens.
  keys_real = neighbourhoods(_key_allowed(padding_mask), 1, [batch, sub_count, unit])
  allowed = keys_real[:, None, :, None, :]  # [B, 1, N, 1, span]
  if document_ids is not None:  # and of the query's document: [B, 1, N, b, span]
    key_documents = neighbourhoods(document_ids, 1, [batch, sub_count, unit])
    query_documents = tf.reshape(tf.pad(document_ids, [[0, 0], [0, tail]]),
                                 [batch, blocks, block])
    allowed = allowed & _same_document(query_documents, key_documents)[:, None]
  q_blocks = tf.reshape(tf.pad(q, [[0, 0], [0, 0], [0, tail], [0, 0]]),
                        [batch, heads, blocks, block, depth])
  # Query s of a block sits at key offset s + r of its span: allowed offsets t - s in [0, 2r].
  offset = np.arange(span)[None, :] - np.arange(block)[:, None]
  band = tf.constant((offset >= 0) & (offset <= 2 * radius))  # [b, span]
  out = _softmax_product(q_blocks, k_near, v_near, allowed, band, dropout,
                         training)  # [B, A, N, b, D]
  return tf.reshape(out, [batch, heads, blocks * block, depth])[:, :, :length]


def _global_chunked(q, k, v, padding_mask, dropout, training, document_ids=None):
  """Global attention, GLOBAL_CHUNK queries at a time (one chunk's scores alive at once).

  Without dropout on the probabilities (ModernBERT's default) the gradient is hand-written and
  recomputes each chunk's probabilities (`_chunked_with_recompute`): an autodiff gradient of the
  loop would keep every chunk's [c, L] probabilities, the whole L x L matrix per layer.
  With `document_ids` a query attends only to keys of its own document."""
  chunks, q_chunks, chunk_out = _chunk_queries(q)
  chunk_bias = _chunk_bias(padding_mask, document_ids, chunks, tf.shape(q_chunks)[3])
  if getattr(dropout, "rate", 0) == 0:
    return _chunked_with_recompute(q, k, v, chunk_bias)
  out = tf.map_fn(
      lambda i: _chunk_probs_product(q_chunks[i], k, v, chunk_bias(i), dropout, training),
      tf.range(chunks), parallel_iterations=1, fn_output_signature=v.dtype)
  return chunk_out(out)


def _chunk_bias(padding_mask, document_ids, chunks, chunk):
  """i -> float32 additive mask of chunk i's queries: [B, 1, 1, L] (0 at real keys, _MASKED
  at pads) without documents; [B, 1, c, L] with them (_MASKED at pads and at keys of another
  document than the query's)."""
  if document_ids is None:
    bias = tf.where(_key_allowed(padding_mask), 0.0, _MASKED)[:, None, None, :]
    return lambda i: bias
  length = tf.shape(document_ids)[1]
  q_documents = tf.reshape(tf.pad(document_ids, [[0, 0], [0, chunks * chunk - length]]),
                           [tf.shape(document_ids)[0], chunks, chunk])  # [B, N, c]
  key_documents = tf.where(_key_allowed(padding_mask), document_ids, -1)  # pads: no document

  def bias(i):  # a cast and a product cost half the select of tf.where on this mask
    # (a global layer at 8,192 tokens: +0.3 s, not +0.55)
    other = tf.not_equal(q_documents[:, i, :, None], key_documents[:, None, :])
    return tf.cast(other, tf.float32)[:, None] * _MASKED
  return bias


def _chunk_queries(q):
  """(N, q as [N, B, A, c, D] (zero rows past L), the inverse for a [N, B, A, c, D] output)."""
  heads, depth = q.shape[1], q.shape[-1]
  batch, length = tf.shape(q)[0], tf.shape(q)[2]
  chunk = tf.minimum(GLOBAL_CHUNK, length)
  chunks = (length + chunk - 1) // chunk

  def to_chunks(x):
    x = tf.pad(x, [[0, 0], [0, 0], [0, chunks * chunk - length], [0, 0]])
    return tf.transpose(tf.reshape(x, [batch, heads, chunks, chunk, depth]), [2, 0, 1, 3, 4])

  def from_chunks(x):
    x = tf.reshape(tf.transpose(x, [1, 2, 0, 3, 4]), [batch, heads, chunks * chunk, depth])
    return x[:, :, :length]
  return chunks, to_chunks(q), from_chunks


def _chunk_probs(q_chunk, k, bias):
  """float32 softmax(q k^T / sqrt(D) + bias) [B, A, c, L] of one chunk (the scale folded into
  q: exact when sqrt(D) is a power of two, as D = 64)."""
  scale = 1.0 / math.sqrt(q_chunk.shape[-1])
  scores = tf.cast(tf.matmul(q_chunk * tf.cast(scale, q_chunk.dtype), k, transpose_b=True),
                   tf.float32)
  return tf.nn.softmax(scores + bias, axis=-1)


def _chunk_probs_product(q_chunk, k, v, bias, dropout=None, training=None):
  probs = tf.cast(_chunk_probs(q_chunk, k, bias), v.dtype)
  if dropout is not None:
    probs = dropout(probs, training=training)
  return tf.matmul(probs, v)


def _chunked_with_recompute(q, k, v, chunk_bias):
  """Query-chunked global attention whose gradient recomputes each chunk's probabilities p:
  dv = sum p^T do; ds = p (dp - rowsum(dp p)) with dp = do v^T; dq = ds k / sqrt(D);
  dk = sum ds^T q / sqrt(D). Memory O(c L) in the forward and in the gradient."""

  @tf.custom_gradient
  def chunked(q, k, v):
    chunks, q_chunks, from_chunks = _chunk_queries(q)
    out = tf.map_fn(lambda i: _chunk_probs_product(q_chunks[i], k, v, chunk_bias(i)),
                    tf.range(chunks), parallel_iterations=1, fn_output_signature=v.dtype)

    def grad(d_out):
      _, d_chunks, _ = _chunk_queries(d_out)  # rows past L: zero, so they add nothing
      scale = 1.0 / math.sqrt(q.shape[-1])

      def body(i, dk, dv, dq_parts):
        p = _chunk_probs(q_chunks[i], k, chunk_bias(i))  # [B, A, c, L] float32
        d_chunk = d_chunks[i]
        dv += tf.cast(tf.matmul(tf.cast(p, v.dtype), d_chunk, transpose_a=True), tf.float32)
        dp = tf.cast(tf.matmul(d_chunk, v, transpose_b=True), tf.float32)
        ds = p * (dp - tf.reduce_sum(dp * p, axis=-1, keepdims=True)) * scale
        dq_parts = dq_parts.write(i, tf.matmul(tf.cast(ds, q.dtype), k))
        dk += tf.cast(tf.matmul(tf.cast(ds, q.dtype), q_chunks[i], transpose_a=True),
                      tf.float32)
        return i + 1, dk, dv, dq_parts

      zeros = tf.zeros(tf.shape(k), tf.float32)
      _, dk, dv, dq_parts = tf.while_loop(
          lambda i, *_: i < chunks, body,
          (0, zeros, zeros, tf.TensorArray(q.dtype, size=chunks)), parallel_iterations=1)
      return from_chunks(dq_parts.stack()), tf.cast(dk, k.dtype), tf.cast(dv, v.dtype)
    return from_chunks(out), grad

  return chunked(q, k, v)
