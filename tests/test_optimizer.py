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
  again = optimizer_lib.AdamW.from_config(opt.get_config())  # Keras' serialization round trip
  assert (again.beta_1, again.beta_2, again.epsilon, again.weight_decay, again.fused) == (
      0.9, 0.98, 1e-6, 0.01, False)
  assert again.get_config()["learning_rate"] == opt.get_config()["learning_rate"]


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
  decayed = sorted(v.path for v in variables if optimizer_lib.decays(v))
  kernels = ("query", "key", "value", "attention_output", "intermediate_dense", "output_dense")
  assert decayed == sorted(
      ["embeddings/token_embedding/embeddings", "embeddings/position_embedding/embeddings",
       "embeddings/token_type_embedding/embeddings", "mlm_head/intermediate_dense/kernel"]
      + [f"transformer_layer_{i}/{k}/kernel" for i in range(12) for k in kernels])
  exempt = sorted(v.path for v in variables if not optimizer_lib.decays(v))
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


def _reference_steps(w0, grads, schedule, wd=0.01, b1=0.9, b2=0.98, eps=1e-6):
  """Keras' AdamW path written out (every matrix decays first, then each variable's Adam step
  with its own scalars), with eps after the bias correction; float32 TF ops, traced. Returns
  the weights, then each variable's m and v."""
  variables = [tf.Variable(w) for w in w0]
  slots = [(tf.Variable(tf.zeros_like(w)), tf.Variable(tf.zeros_like(w))) for w in w0]

  @tf.function
  def step(t, g):
    lr = tf.cast(schedule(t), tf.float32)
    for w in variables:
      if len(w.shape) >= 2:
        w.assign_sub(w * tf.constant(wd, tf.float32) * lr)
    for w, grad, (m, v) in zip(variables, g, slots, strict=True):
      t1 = tf.cast(t + 1, tf.float32)
      m.assign_add((grad - m) * (1 - b1))
      v.assign_add((tf.square(grad) - v) * (1 - b2))
      m_hat = m / (1 - tf.pow(tf.constant(b1, tf.float32), t1))
      v_hat = v / (1 - tf.pow(tf.constant(b2, tf.float32), t1))
      w.assign_sub(m_hat * lr / (tf.sqrt(v_hat) + eps))
  for t, g in enumerate(grads):
    step(tf.constant(t, tf.int64), [tf.constant(x) for x in g])
  return [w.numpy() for w in variables] + [x.numpy() for pair in slots for x in pair]


@pytest.mark.parametrize("context", ["eager", "traced", "replica", "cross_replica"])
def test_apply_is_the_formula_op_for_op_in_every_context(context):
  """4 steps (warmup, decay) of a matrix and a vector: bit for bit Keras' AdamW path with the
  eps after the bias correction (`_reference_steps`), however `apply` is called."""
  rng = np.random.default_rng(4)
  w0 = [rng.normal(0, 0.02, s).astype(np.float32) for s in ((6, 5), (5,))]
  grads = [[(rng.normal(size=w.shape) * 1e-4).astype(np.float32) for w in w0] for _ in range(4)]
  strategy = (tf.distribute.MirroredStrategy(["/cpu:0"])
              if context in ("replica", "cross_replica") else tf.distribute.get_strategy())
  with strategy.scope():
    variables = [tf.Variable(w, name=f"w{i}") for i, w in enumerate(w0)]
    opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3),
                              WarmupLinearDecay(1e-3, 2, 10), variables)
  if context == "eager":
    step = lambda g: opt.apply(g, variables)  # noqa: E731
  elif context == "replica":
    step = tf.function(lambda g: strategy.run(lambda *g: opt.apply(g, variables), args=tuple(g)))
  else:
    step = tf.function(lambda g: opt.apply(g, variables))
  with strategy.scope():
    for g in grads:
      step([tf.constant(x) for x in g])
  slots = [x.numpy() for v in variables for x in opt.slots()[v.name].values()]
  ours = [v.numpy() for v in variables] + slots
  assert int(opt.iterations.numpy()) == 4
  for a, b in zip(ours, _reference_steps(w0, grads, WarmupLinearDecay(1e-3, 2, 10)), strict=True):
    np.testing.assert_array_equal(a, b)


def test_fused_is_within_ulps_of_the_op_by_op_form():
  """XLA-compiled updates (multiply-adds contracted) stay within a few float32 ulps."""
  rng = np.random.default_rng(4)
  w0 = [rng.normal(0, 0.02, s).astype(np.float32) for s in ((6, 5), (5,))]
  grads = [[(rng.normal(size=w.shape) * 1e-4).astype(np.float32) for w in w0] for _ in range(4)]
  variables = [tf.Variable(w) for w in w0]
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3),
                            WarmupLinearDecay(1e-3, 2, 10), variables, fused=True)
  step = tf.function(lambda g: opt.apply(g, variables))
  for g in grads:
    step([tf.constant(x) for x in g])
  for a, b in zip([v.numpy() for v in variables],
                  _reference_steps(w0, grads, WarmupLinearDecay(1e-3, 2, 10)), strict=False):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-12)


def test_slots_by_path_and_checkpoints_of_keras_adamw_restore_into_them(tmp_path):
  """`slots()` names each variable's m and v by its path; a checkpoint of Keras' own AdamW
  (whose slot order these keep) restores into them."""
  model = models.RobertaPretrainer(tiny_config(vocab_size=300, max_positions=18))
  variables = model.trainable_variables
  keras_opt = keras.optimizers.AdamW(learning_rate=WarmupLinearDecay(1e-3, 0, 10))
  keras_opt.build(variables)
  for i, v in enumerate(keras_opt.variables):
    v.assign(tf.fill(v.shape, float(i)))
  path = tf.train.Checkpoint(optimizer=keras_opt).write(str(tmp_path / "ckpt"))
  opt = optimizer_lib.adamw(OptimizerOptions(), WarmupLinearDecay(1e-3, 0, 10), variables)
  tf.train.Checkpoint(optimizer=opt).read(path).assert_existing_objects_matched()
  slots = opt.slots()
  assert list(slots) == [v.path for v in variables]
  for i, v in enumerate(variables):  # Keras' order: iteration, then m and v of each variable
    assert set(np.unique(slots[v.path]["momentum"].numpy())) == {2 * i + 1}
    assert set(np.unique(slots[v.path]["velocity"].numpy())) == {2 * i + 2}
    assert slots[v.path]["momentum"].shape == v.shape
