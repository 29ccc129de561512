"""StableAdamW (train --optimizer=stable_adamw, issue 62): AdamW with ModernBERT's per-tensor
update clipping equals a NumPy reference written from the formula (../shared/modernbert.md
section 5: each tensor's rate lr / max(1, sqrt(mean(g^2 / max(v, eps^2))))) within 1e-6 over
10 steps of a tiny model's variables, however `apply` is called, and trains through the binary
with accumulation and mixed_bfloat16."""

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import stable_adamw
from roberta_tf.training.schedule import WarmupStableDecay
from tests.harness import call_module, tiny_config

STEPS, PEAK, WD, B1, B2, EPS = 10, 1e-3, 0.01, 0.9, 0.98, 1e-6


def _reference(w0, grads, rates):
  """StableAdamW in float64 NumPy from the formula, with ModernBERT's (optimi's) debiased
  moments: beta_hat = beta (1 - beta^(t-1)) / (1 - beta^t), so m and v are their own bias
  corrections. Decay (matrices only) and the Adam step both at the clipped rate. Returns the
  weights and how many (step, tensor) updates were clipped."""
  w = [x.astype(np.float64) for x in w0]
  m = [np.zeros_like(x) for x in w]
  v = [np.zeros_like(x) for x in w]
  clipped = 0
  for t, (g_t, lr) in enumerate(zip(grads, rates, strict=True), start=1):
    b1_hat = B1 * (1 - B1 ** (t - 1)) / (1 - B1 ** t)
    b2_hat = B2 * (1 - B2 ** (t - 1)) / (1 - B2 ** t)
    for i, g in enumerate(g_t):
      g = g.astype(np.float64)
      m[i] = b1_hat * m[i] + (1 - b1_hat) * g
      v[i] = b2_hat * v[i] + (1 - b2_hat) * g * g
      rms = np.sqrt(np.mean(g * g / np.maximum(v[i], EPS * EPS)))
      clipped += rms > 1
      lr_i = lr / max(1.0, rms)
      if w[i].ndim >= 2:  # no decay on biases and norm vectors
        w[i] = w[i] * (1 - lr_i * WD)
      w[i] = w[i] - lr_i * m[i] / (np.sqrt(v[i]) + EPS)
  return w, clipped


def _gradients(w0, seed=7):
  """10 steps of gradients whose scale jumps (x30 at step 6, x0.1 at 8): a jump past the
  tensors' history is what the clipping acts on."""
  rng = np.random.default_rng(seed)
  scales = [1, 1, 1, 1, 1, 30, 30, 0.1, 1, 1]
  return [[(rng.normal(size=w.shape) * 1e-3 * s).astype(np.float32) for w in w0]
          for s in scales]


@pytest.mark.parametrize("context", ["eager", "replica"])
def test_stable_adamw_is_the_numpy_reference_over_10_steps(context):
  model = models.build_pretrainer(tiny_config(vocab_size=96, hidden_size=16,
                                              intermediate_size=32, num_layers=1))
  w0 = [v.numpy() for v in model.trainable_variables]
  assert any(w.ndim == 1 for w in w0) and any(w.ndim == 2 for w in w0)
  grads = _gradients(w0)
  schedule = WarmupStableDecay(PEAK, 2, STEPS, 4, shape="1-sqrt")
  strategy = (tf.distribute.MirroredStrategy(["/cpu:0"]) if context == "replica"
              else tf.distribute.get_strategy())
  with strategy.scope():
    variables = [tf.Variable(w) for w in w0]
    opt = stable_adamw.stable_adamw(OptimizerOptions(learning_rate=PEAK, weight_decay=WD),
                                    schedule, variables)
    step = (tf.function(lambda g: strategy.run(lambda *g: opt.apply(g, variables),
                                               args=tuple(g)))
            if context == "replica" else lambda g: opt.apply(g, variables))
    for g in grads:
      step([tf.constant(x) for x in g])
  expected, clipped = _reference(w0, grads, [float(schedule(t)) for t in range(STEPS)])
  assert clipped >= 10, clipped  # the clipping acted (at the jumps), else the test shows nothing
  for ours, ref, w in zip(variables, expected, w0, strict=True):
    np.testing.assert_allclose(ours.numpy(), ref, rtol=0, atol=1e-6)
    assert not np.array_equal(ours.numpy(), w)
  # Plain AdamW (the same steps) is more than 1e-6 away: the test tells them apart.
  plain_vars = [tf.Variable(w) for w in w0]
  plain = optimizer_lib.adamw(OptimizerOptions(learning_rate=PEAK, weight_decay=WD), schedule,
                              plain_vars)
  for g in grads:
    plain.apply([tf.constant(x) for x in g], plain_vars)
  assert max(np.abs(p.numpy() - r).max() for p, r in zip(plain_vars, expected, strict=True)) > 1e-5


@pytest.mark.slow
def test_train_with_stable_adamw_accumulation_and_bfloat16(train_shards, tmp_path):
  out = call_module(
      "roberta_tf.train", "--config=tiny", f"--train_data={train_shards}",
      f"--model_dir={tmp_path / 'm'}", "--max_seq_len=64", "--batch_size=8",
      "--grad_accum_steps=2", "--precision=mixed_bfloat16", "--optimizer=stable_adamw",
      "--train_steps=3", "--warmup_steps=1", "--log_every=1", "--learning_rate=1e-3")
  assert out.returncode == 0, out.stderr[-3000:]
  assert "step 3/3" in out.stdout and "nan" not in out.stdout.lower(), out.stdout[-2000:]
  config = (tmp_path / "m" / "config.json").read_text()
  assert '"optimizer": "stable_adamw"' in config
