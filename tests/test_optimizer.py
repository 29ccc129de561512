"""AdamW as RoBERTa uses it, and the warmup + linear-decay schedule."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training.schedule import WarmupLinearDecay
from tests.harness import tiny_config


def test_adamw_hyperparameters():
  opt = optimizer_lib.adamw(OptimizerOptions(), WarmupLinearDecay(6e-4, 10, 100), [])
  assert (opt.beta_1, opt.beta_2, opt.epsilon, opt.weight_decay) == (0.9, 0.98, 1e-6, 0.01)


def test_weight_decay_skips_layer_norm_and_biases():
  """Zero gradients: Adam's step is 0, so only decoupled weight decay moves a variable."""
  model = models.RobertaPretrainer(tiny_config(vocab_size=300, max_positions=18))
  lr, decay = 0.5, 0.01
  variables = model.trainable_variables
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=lr, weight_decay=decay),
                            WarmupLinearDecay(lr, 0, 10), variables)
  before = {v.path: np.array(v.numpy()) for v in variables}
  opt.apply([tf.zeros_like(v) for v in variables], variables)
  decayed = {v.path for v in variables if not np.array_equal(v.numpy(), before[v.path])}

  expected = {v.path for v in variables if v.path.endswith(("/kernel", "/embeddings"))}
  assert decayed == expected
  # What stays: every LayerNorm gamma/beta and every bias (the MLM head's output bias too).
  kept = {v.path for v in variables} - decayed
  assert kept == {v.path for v in variables if v.path.endswith(("/gamma", "/beta", "bias"))}
  assert "mlm_head/output_bias" in kept and "embeddings/layer_norm/gamma" in kept
  assert "embeddings/token_embedding/embeddings" in decayed
  for v in variables:
    if v.path in decayed:  # keras AdamW: w <- w - lr * decay * w
      np.testing.assert_allclose(v.numpy(), before[v.path] * (1 - lr * decay), rtol=1e-6)


def test_exactly_the_base_models_matrices_decay():
  """roberta-base's variables, listed: every kernel and the three tables decay (the token-type
  row as in HF, where only biases and LayerNorm weights are exempt); nothing else."""
  model = models.RobertaPretrainer(models.preset("base", vocab_size=500))
  variables = model.trainable_variables
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3), WarmupLinearDecay(1e-3, 0, 10),
                            variables)
  opt.build(variables)
  decayed = sorted(v.path for v in variables if opt._use_weight_decay(v))  # pylint: disable=protected-access
  kernels = ("query", "key", "value", "attention_output", "intermediate_dense", "output_dense")
  assert decayed == sorted(
      ["embeddings/token_embedding/embeddings", "embeddings/position_embedding/embeddings",
       "embeddings/token_type_embedding/embeddings", "mlm_head/intermediate_dense/kernel"]
      + [f"transformer_layer_{i}/{k}/kernel" for i in range(12) for k in kernels])
  exempt = sorted(v.path for v in variables if not opt._use_weight_decay(v))  # pylint: disable=protected-access
  norms = ("attention_layer_norm", "output_layer_norm")
  per_layer = [f"{k}/bias" for k in kernels] + [
      f"{ln}/{p}" for ln in norms for p in ("gamma", "beta")]
  assert exempt == sorted(
      ["embeddings/layer_norm/gamma", "embeddings/layer_norm/beta", "mlm_head/output_bias",
       "mlm_head/intermediate_dense/bias", "mlm_head/intermediate_layer_norm/gamma",
       "mlm_head/intermediate_layer_norm/beta"]
      + [f"transformer_layer_{i}/{p}" for i in range(12) for p in per_layer])


def test_a_vector_named_like_a_kernel_is_still_exempt_and_a_matrix_named_bias_decays():
  """Names do not matter: rank does."""
  bias_like = tf.Variable(np.ones((3, 2), np.float32), name="my_bias")
  gamma_like = tf.Variable(np.ones((3,), np.float32), name="kernel")
  variables = [bias_like, gamma_like]
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=0.5, weight_decay=0.1),
                            WarmupLinearDecay(0.5, 0, 10), variables)
  opt.apply([tf.zeros_like(v) for v in variables], variables)
  np.testing.assert_allclose(bias_like.numpy(), 0.95)
  np.testing.assert_array_equal(gamma_like.numpy(), 1.0)


def test_schedule_warms_up_then_decays_to_zero():
  schedule = WarmupLinearDecay(1e-3, warmup_steps=10, total_steps=50)
  steps = [0, 5, 10, 30, 49, 50, 60]
  values = [float(schedule(tf.constant(s))) for s in steps]
  np.testing.assert_allclose(values, [0.0, 5e-4, 1e-3, 5e-4, 2.5e-5, 0.0, 0.0], atol=1e-9)
  assert float(WarmupLinearDecay(1e-3, 0, 10)(0)) == pytest.approx(1e-3)  # no warmup


@pytest.mark.parametrize("warmup, total", [(5, 0), (11, 10), (-1, 10)])
def test_schedule_rejects_bad_lengths(warmup, total):
  with pytest.raises(ValueError, match="steps"):
    WarmupLinearDecay(1e-3, warmup, total)


def _numpy_torch_adamw(weights, grads, lrs, wd, b1=0.9, b2=0.98, eps=1e-6):
  """torch.optim.AdamW's algorithm (its documentation's pseudo-code), in float64."""
  w, m, v = weights.astype(np.float64), np.zeros_like(weights, np.float64), 0.0
  for t, (g, lr) in enumerate(zip(grads, lrs, strict=True), start=1):
    w = w * (1 - lr * wd)
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    w = w - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
  return w


def _gradient_stream(steps, shape, seed=0):
  """Gradients whose scale spans 1e-7..1e-2 across columns (eps = 1e-6 sits inside it)."""
  rng = np.random.default_rng(seed)
  scales = np.logspace(-7, -2, shape[1])
  return [(rng.normal(size=shape) * scales + 0.3 * scales).astype(np.float32)
          for _ in range(steps)]


def test_update_is_torch_adamw_for_many_steps_at_every_gradient_scale():
  """Identical weights and gradients, 200 steps of the warmup + decay schedule: ours equals
  torch's AdamW (eps after the bias correction), also where |g| ~ eps."""
  steps, shape = 200, (4, 12)
  w0 = np.random.default_rng(1).normal(0, 0.02, shape).astype(np.float32)
  grads = _gradient_stream(steps, shape)
  schedule = WarmupLinearDecay(1e-3, warmup_steps=20, total_steps=steps)
  lrs = [float(schedule(tf.constant(t))) for t in range(steps)]
  var = tf.Variable(w0)
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3),
                            WarmupLinearDecay(1e-3, 20, steps), [var])
  for g in grads:
    opt.apply([tf.constant(g)], [var])
  expected = _numpy_torch_adamw(w0, grads, lrs, wd=0.01)
  moved = expected - w0
  np.testing.assert_allclose(var.numpy() - w0, moved, rtol=2e-3, atol=1e-9)

  # Keras' own AdamW (eps added to the uncorrected sqrt(v)) is measurably different there.
  keras_var = tf.Variable(w0)
  keras_opt = keras.optimizers.AdamW(learning_rate=schedule, weight_decay=0.01, beta_1=0.9,
                                     beta_2=0.98, epsilon=1e-6)
  for g in grads:
    keras_opt.apply([tf.constant(g)], [keras_var])
  small = np.abs(moved[:, :4]).sum()
  assert np.abs(keras_var.numpy() - var.numpy())[:, :4].sum() > 0.05 * small


def test_matches_torch_adamw_itself():
  """The same against torch.optim.AdamW where torch is installed (requirements-bench.txt)."""
  torch = pytest.importorskip("torch")
  steps, shape = 150, (3, 10)
  w0 = np.random.default_rng(2).normal(0, 0.02, shape).astype(np.float32)
  grads = _gradient_stream(steps, shape, seed=3)
  schedule = WarmupLinearDecay(2e-3, warmup_steps=15, total_steps=steps)
  var = tf.Variable(w0)
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=2e-3),
                            WarmupLinearDecay(2e-3, 15, steps), [var])
  param = torch.nn.Parameter(torch.from_numpy(w0.copy()))
  torch_opt = torch.optim.AdamW([param], lr=2e-3, betas=(0.9, 0.98), eps=1e-6, weight_decay=0.01)
  sched = torch.optim.lr_scheduler.LambdaLR(torch_opt, lambda t: float(schedule(tf.constant(t)))
                                            / 2e-3)
  for g in grads:
    opt.apply([tf.constant(g)], [var])
    param.grad = torch.from_numpy(g.copy())
    torch_opt.step()
    sched.step()
  np.testing.assert_allclose(var.numpy() - w0, param.detach().numpy() - w0, rtol=2e-3,
                             atol=1e-9)


@pytest.mark.parametrize("fused", [False, True])
def test_apply_is_keras_per_variable_update_op_for_op(fused):
  """`apply` (scalars once, decay folded into each variable's step) against Keras' own path
  (`_apply_weight_decay`, then `update_step` per variable), traced, 4 steps: bit for bit
  unfused; fused (XLA, multiply-adds contracted) within a few float32 ulps."""
  rng = np.random.default_rng(4)
  w0 = [rng.normal(0, 0.02, s).astype(np.float32) for s in ((6, 5), (5,))]
  grads = [[(rng.normal(size=w.shape) * 1e-4).astype(np.float32) for w in w0] for _ in range(4)]
  runs = []
  for ours in (True, False):
    variables = [tf.Variable(w) for w in w0]
    opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3),
                              WarmupLinearDecay(1e-3, 2, 10), variables, fused=fused and ours)
    opt.build(variables)

    def keras_path(g, opt=opt, variables=variables):
      keras.optimizers.AdamW._apply_weight_decay(opt, variables)  # pylint: disable=protected-access
      lr = opt.learning_rate
      for grad, var in zip(g, variables, strict=True):
        opt.update_step(grad, var, lr)
      opt.iterations.assign_add(1)
    step = tf.function(lambda g, opt=opt, v=variables: opt.apply(g, v)) if ours else (
        tf.function(keras_path))
    for g in grads:
      step([tf.constant(x) for x in g])
    runs.append([v.numpy() for v in variables + list(opt.variables)])
  for a, b in zip(*runs, strict=True):
    if fused:
      np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)
    else:
      np.testing.assert_array_equal(a, b)
