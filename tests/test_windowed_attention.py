"""ModernBERT's `attend` (blocked local, query-chunked global attention) against
`attend_reference` (the full masked L x L matrix): values and gradients at every real query, with
padding, window edges, rows shorter than a window, L = 1 and L not a multiple of the block; under
a dynamic-length tf.function and a SavedModel, mixed_bfloat16 inputs, a tf.distribute replica;
and no L x L tensor in a local layer's graph. (HF parity of the whole model:
test_models_modernbert.py.)"""

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.models.modernbert import windowed_attention
from roberta_tf.models.modernbert.windowed_attention import attend, attend_reference


@pytest.fixture
def small_blocks(monkeypatch):
  """Blocks of 4 (a multiple of radii 1, 2, 4; else the radius) and global chunks of 5, so tiny
  lengths span several blocks and chunks and end mid-block."""
  monkeypatch.setattr(windowed_attention, "LOCAL_BLOCK", 4)
  monkeypatch.setattr(windowed_attention, "GLOBAL_CHUNK", 5)


def _inputs(length, batch=3, heads=2, depth=8, seed=0, dtype=np.float32):
  """q, k, v [B, A, L, D]; mask rows: full, half real, ..., one real token (the last)."""
  rng = np.random.default_rng(seed)
  q, k, v = (tf.constant(rng.normal(size=(batch, heads, length, depth)).astype(dtype))
             for _ in range(3))
  mask = np.ones((batch, length), np.int32)
  mask[1, length // 2 + 1:] = 0
  mask[batch - 1, 1:] = 0
  return q, k, v, mask


def _values_and_grads(fn, q, k, v, mask, radius):
  """fn's output at real queries, and d(sum(out * w) at real queries)/d(q, k, v)."""
  real = tf.cast(tf.constant(mask)[:, None, :, None], tf.float32)
  weights = tf.cos(tf.range(tf.size(q), dtype=tf.float32))  # fixed, not all equal
  with tf.GradientTape() as tape:
    tape.watch([q, k, v])
    out = tf.cast(fn(q, k, v, mask, radius), tf.float32)
    loss = tf.reduce_sum(out * real * tf.reshape(weights, tf.shape(q)))
  return [out * real] + tape.gradient(loss, [q, k, v])


@pytest.mark.parametrize("length", [1, 3, 4, 9, 23])
@pytest.mark.parametrize("radius", [None, 0, 1, 2, 3, 4, 8])
def test_matches_reference_values_and_gradients(small_blocks, length, radius):
  q, k, v, mask = _inputs(length, seed=length)
  got = _values_and_grads(attend, q, k, v, mask, radius)
  want = _values_and_grads(attend_reference, q, k, v, mask, radius)
  diffs = [float(np.abs(a - b).max()) for a, b in zip(got, want, strict=True)]
  print(f"L={length} radius={radius} max |diff| out, dq, dk, dv: "
        + " ".join(f"{d:.2g}" for d in diffs))
  assert max(diffs) < 1e-5


def test_default_blocks_at_base_radius():
  """The shipped LOCAL_BLOCK / GLOBAL_CHUNK with ModernBERT-base's radius 64 over 1,100 tokens
  (18 blocks, the last partial; 3 global chunks) and a row of one real token."""
  q, k, v, mask = _inputs(1100, batch=2, heads=1, depth=16)
  for radius in (None, 64):
    got = attend(q, k, v, mask, radius)
    want = attend_reference(q, k, v, mask, radius)
    real = mask.astype(bool)
    diff = np.abs((got - want).numpy().transpose(0, 2, 1, 3)[real]).max()
    print(f"radius {radius}: max |diff| {diff:.2g}")
    assert diff < 1e-5


def test_one_text_over_8000_tokens():
  """One 8,200-token text (the shipped blocks and chunks, radius 64 and global): every position
  equals the full-matrix reference."""
  q, k, v = (x[:1] for x in _inputs(8200, batch=2, heads=1, depth=8, seed=8)[:3])
  mask = np.ones((1, 8200), np.int32)
  for radius in (None, 64):
    diff = float(np.abs(attend(q, k, v, mask, radius) - attend_reference(q, k, v, mask, radius))
                 .max())
    print(f"radius {radius}: max |diff| {diff:.2g}")
    assert diff < 1e-5


def test_dynamic_length_function_and_saved_model(small_blocks, tmp_path):
  """One trace with L unknown serves every length, in-process and reloaded from a SavedModel."""
  spec = tf.TensorSpec([None, 2, None, 8], tf.float32)
  module = tf.Module()
  module.local = tf.function(lambda q, k, v, m: attend(q, k, v, m, 3), input_signature=[
      spec, spec, spec, tf.TensorSpec([None, None], tf.int32)])
  module.full = tf.function(lambda q, k, v, m: attend(q, k, v, m), input_signature=[
      spec, spec, spec, tf.TensorSpec([None, None], tf.int32)])
  tf.saved_model.save(module, str(tmp_path))
  loaded = tf.saved_model.load(str(tmp_path))
  for length in (1, 6, 13):
    q, k, v, mask = _inputs(length, seed=length)
    real = mask.astype(bool)
    for name, radius in (("local", 3), ("full", None)):
      want = attend_reference(q, k, v, mask, radius).numpy().transpose(0, 2, 1, 3)[real]
      for fn in (getattr(module, name), getattr(loaded, name)):
        got = fn(q, k, v, mask).numpy().transpose(0, 2, 1, 3)[real]
        np.testing.assert_allclose(got, want, atol=1e-5, err_msg=f"{name} L={length}")


def test_bfloat16_inputs(small_blocks):
  """mixed_bfloat16's compute dtype: the output stays bfloat16, the softmax float32, and the
  result is the reference's (both round the same products; sums differ in order only)."""
  q, k, v, mask = _inputs(11)
  q, k, v = (tf.cast(x, tf.bfloat16) for x in (q, k, v))
  real = mask.astype(bool)
  for radius in (None, 2):
    got = attend(q, k, v, mask, radius)
    assert got.dtype == tf.bfloat16
    want = attend_reference(q, k, v, mask, radius)
    diff = np.abs(tf.cast(got - want, tf.float32).numpy().transpose(0, 2, 1, 3)[real]).max()
    assert diff < 2e-2, (radius, diff)


def test_global_gradient_recomputed_in_bfloat16(small_blocks):
  """The global layers' hand-written gradient (chunks recomputed) in mixed_bfloat16's compute
  dtype: bfloat16 gradients, within bf16 rounding of the float32 reference's."""
  q, k, v, mask = _inputs(13)
  want = _values_and_grads(attend_reference, q, k, v, mask, None)
  got = _values_and_grads(attend, *(tf.cast(x, tf.bfloat16) for x in (q, k, v)), mask, None)
  assert [g.dtype for g in got[1:]] == [tf.bfloat16] * 3
  for a, b in zip(got, want, strict=True):
    scale = float(np.abs(b).max())
    assert float(np.abs(tf.cast(a, tf.float32) - b).max()) < 3e-2 * scale


def test_gradient_in_a_replica_with_dropout(small_blocks):
  """Under MirroredStrategy's replica context in a tf.function (autograph off, as the train
  step), with a Dropout on the probabilities: finite gradients; with rate 0 the reference's."""
  strategy = tf.distribute.MirroredStrategy(["/cpu:0"])
  q, k, v, mask = _inputs(10)
  real = tf.cast(tf.constant(mask)[:, None, :, None], tf.float32)
  for rate in (0.0, 0.3):
    with strategy.scope():
      dropout = tf.keras.layers.Dropout(rate)

    def grads(fn, dropout=dropout):
      def step():
        with tf.GradientTape() as tape:
          tape.watch([q, k, v])
          loss = sum(tf.reduce_sum(tf.sin(fn(q, k, v, mask, r, dropout, True)) * real)
                     for r in (None, 2))
        return tape.gradient(loss, [q, k, v])
      return tf.function(lambda: strategy.run(step), autograph=False)()

    got = grads(attend)
    assert all(np.isfinite(g.numpy()).all() for g in got)
    if rate == 0.0:
      for a, b in zip(got, grads(attend_reference), strict=True):
        np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)


def test_local_graph_has_no_length_squared_tensor():
  """A local layer's traced graph at L = 2,048 (radius 64): no tensor holds L x L elements per
  batch row and head; the reference's does (the check can fail)."""
  length = 2048

  def largest(fn):
    spec = tf.TensorSpec([1, 1, length, 8], tf.float32)
    graph = tf.function(lambda q, k, v: fn(q, k, v, tf.ones([1, length], tf.int32), 64)
                        ).get_concrete_function(spec, spec, spec).graph
    return max(int(np.prod(t.shape.as_list())) for op in graph.get_operations()
               for t in op.outputs if t.shape.is_fully_defined())

  assert largest(attend_reference) >= length * length
  assert largest(attend) <= length * (64 + 2 * 64)  # scores [L, b + 2r], b = r = 64
