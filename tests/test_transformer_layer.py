"""`TransformerLayer` on its own: the harness's checks, the post-LN math against NumPy, masking."""

import math

import numpy as np
import pytest

from roberta_tf.models.roberta.transformer_layer import TransformerLayer
from tests.layer_testing import run_layer_test

B, S, H, A, F = 2, 6, 32, 4, 64
KWARGS = {"num_heads": A, "intermediate_size": F}


def _inputs(seed=0, lengths=(6, 4)):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(B, S, H)).astype(np.float32)
  mask = (np.arange(S)[None, :] < np.array(lengths)[:, None]).astype(np.int32)
  return x, mask


def _layer_norm(x, gamma, beta, eps=1e-5):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _reference(layer, x, mask):
  """The layer's math in float64 NumPy from its weights (HF RobertaLayer, eval mode)."""
  w = {v.path.split("/", 1)[1]: np.asarray(v, np.float64) for v in layer.weights}
  dense = lambda t, name: t @ w[f"{name}/kernel"] + w[f"{name}/bias"]
  heads = lambda t: t.reshape(B, S, A, H // A).transpose(0, 2, 1, 3)
  q, k, v = (heads(dense(x, n)) for n in ("query", "key", "value"))
  scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // A) - 1e9 * (1 - mask)[:, None, None, :]
  probs = np.exp(scores - scores.max(-1, keepdims=True))
  probs /= probs.sum(-1, keepdims=True)
  context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
  a = _layer_norm(x + dense(context, "attention_output"), w["attention_layer_norm/gamma"],
                  w["attention_layer_norm/beta"])
  inner = dense(a, "intermediate_dense")
  inner = 0.5 * inner * (1 + np.vectorize(math.erf)(inner / math.sqrt(2)))  # exact GELU
  return _layer_norm(a + dense(inner, "output_dense"), w["output_layer_norm/gamma"],
                     w["output_layer_norm/beta"])


def _recipe_reference(layer, x, mask):
  """The budget-recipe variants' math in float64 NumPy: pre-LN, no biases, GEGLU."""
  w = {v.path.split("/", 1)[1]: np.asarray(v, np.float64) for v in layer.weights}
  dense = lambda t, name: t @ w[f"{name}/kernel"] + w.get(f"{name}/bias", 0.0)
  gelu = lambda t: 0.5 * t * (1 + np.vectorize(math.erf)(t / math.sqrt(2)))
  norm = lambda t, name: _layer_norm(t, w[f"{name}/gamma"], w[f"{name}/beta"])
  heads = lambda t: t.reshape(B, S, A, H // A).transpose(0, 2, 1, 3)

  def attention(t):
    q, k, v = (heads(dense(t, n)) for n in ("query", "key", "value"))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(H // A) - 1e9 * (1 - mask)[:, None, None, :]
    probs = np.exp(scores - scores.max(-1, keepdims=True))
    probs /= probs.sum(-1, keepdims=True)
    return dense((probs @ v).transpose(0, 2, 1, 3).reshape(B, S, H), "attention_output")

  def ffn(t):
    inner = (gelu(dense(t, "intermediate_gate")) * dense(t, "intermediate_dense")
             if layer.gated_ffn else gelu(dense(t, "intermediate_dense")))
    return dense(inner, "output_dense")

  if layer.pre_layer_norm:
    a = x + attention(norm(x, "attention_layer_norm"))
    return a + ffn(norm(a, "output_layer_norm"))
  a = norm(x + attention(x), "attention_layer_norm")
  return norm(a + ffn(a), "output_layer_norm")


RECIPES = [({"pre_layer_norm": True}, 16), ({"use_bias": False}, 10), ({"gated_ffn": True}, 18),
           ({"pre_layer_norm": True, "use_bias": False, "gated_ffn": True}, 11)]


@pytest.mark.parametrize("recipe,weights", RECIPES, ids=lambda v: str(v))
def test_recipe_variants_contract_and_math(recipe, weights):
  run_layer_test(TransformerLayer, {**KWARGS, **recipe}, _inputs(), expected_output_shape=(B, S, H),
                 expected_num_trainable_weights=weights)
  x, mask = _inputs(3)
  layer = TransformerLayer(**KWARGS, **recipe)
  out = np.asarray(layer(x, mask))
  np.testing.assert_allclose(out, _recipe_reference(layer, x.astype(np.float64), mask),
                             atol=3e-5)


def test_layer_contract():
  # q, k, v, attention_output, intermediate_dense, output_dense (kernel + bias); 2 LayerNorms.
  run_layer_test(TransformerLayer, KWARGS, _inputs(), expected_output_shape=(B, S, H),
                 expected_num_trainable_weights=16)


def test_post_layer_norm_math_equals_numpy():
  x, mask = _inputs(1)
  layer = TransformerLayer(**KWARGS)
  out = np.asarray(layer(x, mask))
  np.testing.assert_allclose(out, _reference(layer, x.astype(np.float64), mask), atol=2e-5)


def test_pads_are_masked_as_keys_only():
  x, mask = _inputs(2)
  layer = TransformerLayer(**KWARGS)
  out = np.asarray(layer(x, mask))
  noisy = x.copy()
  noisy[1, 4:] = 100.0  # garbage under the pads of row 1
  np.testing.assert_allclose(np.asarray(layer(noisy, mask))[1, :4], out[1, :4], atol=1e-5)


def test_dropout_only_in_training():
  x, mask = _inputs(3)
  layer = TransformerLayer(**KWARGS, dropout=0.5, attention_dropout=0.5)
  a, b = np.asarray(layer(x, mask)), np.asarray(layer(x, mask, training=False))
  np.testing.assert_array_equal(a, b)
  assert np.abs(np.asarray(layer(x, mask, training=True)) - a).max() > 1e-3


def test_hidden_size_must_divide_into_heads():
  with pytest.raises(ValueError, match="not divisible by num_heads=5"):
    TransformerLayer(num_heads=5, intermediate_size=F)(*_inputs())


@pytest.mark.parametrize("pre_layer_norm, gated_ffn", [(False, False), (True, True)])
def test_mixed_training_fuses_layer_norm_and_gelu_with_the_same_math(pre_layer_norm, gated_ffn):
  """Training under mixed_bfloat16 takes models/fused_ops.py's XLA LayerNorm and GELU: outputs
  and gradients match the op-by-op path (training=False, dropout 0) to bf16 rounding; in
  float32 training is the op-by-op path itself, bit for bit."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  x, mask = _inputs(4)
  kwargs = {**KWARGS, "pre_layer_norm": pre_layer_norm, "gated_ffn": gated_ffn}
  for dtype in ("float32", "mixed_bfloat16"):
    layer = TransformerLayer(**kwargs, dtype=dtype)
    layer(x, mask)
    outs, grads = [], []
    for training in (True, False):
      with tf.GradientTape() as tape:
        out = layer(x, mask, training=training)
        loss = tf.reduce_sum(out * tf.cos(tf.range(H, dtype=tf.float32)))
      outs.append(out.numpy())
      grads.append([g.numpy() for g in tape.gradient(loss, layer.trainable_variables)])
    if dtype == "float32":
      np.testing.assert_array_equal(outs[0], outs[1])
      for a, b in zip(*grads, strict=True):
        np.testing.assert_array_equal(a, b)
      continue
    np.testing.assert_allclose(outs[0], outs[1], atol=3e-2)
    for a, b in zip(*grads, strict=True):
      np.testing.assert_allclose(a, b, atol=5e-2 * max(np.abs(b).max(), 1e-3))


@pytest.mark.parametrize("recipe", [{}] + [r for r, _ in RECIPES], ids=lambda v: str(v))
def test_serving_layout_is_the_same_math(recipe):
  """`serving=True` (the exports' layout: one query_key_value [Wq/√d | Wk | Wv], 2-D matmuls)
  given an unfused layer's weights computes what that layer computes, also under the pads, and
  refuses to train."""
  x, mask = _inputs(5)
  layer = TransformerLayer(**KWARGS, **recipe)
  layer(x, mask)
  expected = _recipe_reference(layer, x.astype(np.float64), mask)
  serving = TransformerLayer(**KWARGS, **recipe, serving=True)
  serving(x, mask)
  paths = {v.path.split("/", 1)[1] for v in serving.weights}
  assert "query_key_value/kernel" in paths and not any(p.startswith("query/") for p in paths)
  for variable in serving.weights:
    name = variable.path.split("/", 1)[1]
    if not name.startswith("query_key_value"):
      variable.assign(next(w for w in layer.weights if w.path.split("/", 1)[1] == name))
  pairs = [(getattr(layer, n).kernel, getattr(layer, n).bias if layer.use_bias else None)
           for n in ("query", "key", "value")]
  serving.fuse_query_key_value(*pairs)
  np.testing.assert_allclose(np.asarray(serving(x, mask)), expected, atol=3e-5)
  with pytest.raises(ValueError, match="serving layout, which does not train"):
    serving(x, mask, training=True)
