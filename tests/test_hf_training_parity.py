"""Training parity with Hugging Face's RobertaForMaskedLM (PyTorch), where it is installed.

benchmarks/quality/pretraining_vs_hf.py compares how often each side leaves the unigram plateau;
these pin the properties that comparison rests on, so a difference in rates cannot come from them:
- the init: every tensor's statistics against transformers' `_init_weights`, the LM head's
  dense, LayerNorm and bias and the tables' padding rows included;
- the learning-rate schedule against transformers.get_linear_schedule_with_warmup;
- one training step from identical weights: the loss and every gradient (exact GELU, dropout
  really 0, float32 loss) and the AdamW update, weight decay groups included.
The optimizer's own parity with torch.optim.AdamW over many steps is in test_optimizer.py.

torch and transformers come from requirements-bench.txt; without them these tests skip.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.models.roberta import hf_weights
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer
from roberta_tf.pretraining.losses import mlm_sums
from roberta_tf.training.optimizer import adamw
from roberta_tf.training.schedule import WarmupLinearDecay
from tests.harness import tiny_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

CONFIG = tiny_config(vocab_size=3000, max_seq_len=62)  # dropout 0, as HF's below


def _hf_model(seed):
  c = CONFIG
  torch.manual_seed(seed)
  return transformers.RobertaForMaskedLM(transformers.RobertaConfig(
      vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
      num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size,
      max_position_embeddings=c.max_positions, type_vocab_size=1, layer_norm_eps=c.layer_norm_eps,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu",
      initializer_range=c.initializer_range, pad_token_id=c.pad_id, bos_token_id=c.bos_id,
      eos_token_id=c.eos_id))


def _ours(seed):
  keras.utils.set_random_seed(seed)
  return RobertaPretrainer(CONFIG, dtype="float32")


def test_every_tensor_starts_like_hf_init_weights():
  ours = hf_weights.to_hf_tensors(_ours(0))
  hf = {k: v.detach().numpy() for k, v in _hf_model(0).state_dict().items()}
  compared = 0
  for key, value in ours.items():
    ref = hf[key]
    if key == hf_weights.TOKEN_TYPE_KEY:  # the shared row: one N(0, 0.02) draw of H values
      assert value.shape == ref.shape and np.abs(value).min() > 0, key
      assert abs(value.std() / ref.std() - 1) < 0.3, (key, value.std(), ref.std())
      compared += 1
      continue
    assert value.shape == ref.shape, key
    zero_rows = lambda t: set(np.flatnonzero(~t.reshape(len(t), -1).any(-1))) if t.ndim > 1 else 0
    assert zero_rows(value) == zero_rows(ref), key  # the pad rows of both tables, and only them
    if np.all(ref == ref.flat[0]):  # biases 0, LayerNorm gamma 1 / beta 0
      np.testing.assert_array_equal(value, ref, err_msg=key)
    else:  # N(0, 0.02) draws: same mean and std (~5 standard errors at >= 16K draws)
      assert abs(value.mean() - ref.mean()) < 6e-4, key
      assert abs(value.std() / ref.std() - 1) < 0.04, (key, value.std(), ref.std())
    compared += 1
  assert compared == len(hf) - 2  # all but position_ids and the tied decoder


def _batch(seed=0, batch=4, seq=40, predictions=6):
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, CONFIG.vocab_size - 1, size=(batch, seq)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 30:] = 0  # a padded row: pads as keys must not matter
  ids[mask == 0] = CONFIG.pad_id
  positions = np.stack([rng.choice(28, predictions, replace=False) for _ in range(batch)])
  targets = np.take_along_axis(ids, positions, 1)
  ids = ids.copy()
  np.put_along_axis(ids, positions[:, :4], CONFIG.vocab_size - 1, 1)  # <mask> at 4 of them
  weights = np.ones(positions.shape, np.float32)
  weights[2, -2:] = 0  # empty prediction slots
  return {"input_ids": ids, "padding_mask": mask, "mask_positions": positions.astype(np.int32),
          "mask_ids": targets.astype(np.int32), "mask_weights": weights}


def _hf_loss(model, b):
  ids = torch.from_numpy(b["input_ids"].astype(np.int64))
  hidden = model.roberta(input_ids=ids, attention_mask=torch.from_numpy(
      b["padding_mask"].astype(np.int64))).last_hidden_state
  hidden = hidden[torch.arange(ids.shape[0])[:, None], torch.from_numpy(
      b["mask_positions"].astype(np.int64))]
  logits = model.lm_head(hidden)
  xent = torch.nn.functional.cross_entropy(
      logits.transpose(1, 2), torch.from_numpy(b["mask_ids"].astype(np.int64)), reduction="none")
  weights = torch.from_numpy(b["mask_weights"])
  return (xent * weights).sum() / weights.sum()


def _ours_loss_and_grads(model, b):
  with tf.GradientTape() as tape:
    logits = model({k: b[k] for k in ("input_ids", "padding_mask", "mask_positions")},
                   training=True)
    loss_sum, count, _ = mlm_sums(logits, b["mask_ids"], b["mask_weights"])
    loss = loss_sum / count
  grads = tape.gradient(loss, model.trainable_variables)
  return loss, [tf.convert_to_tensor(g) for g in grads]


def _hf_copy_of(ours):
  model = _hf_model(1)
  state = {k: torch.from_numpy(v) for k, v in hf_weights.to_hf_tensors(ours).items()}
  model.load_state_dict(state, strict=False)
  model.train()  # dropout layers active: with p = 0 they must change nothing
  return model


def test_loss_and_every_gradient_match_hf_from_identical_weights():
  ours = _ours(3)
  hf = _hf_copy_of(ours)
  b = _batch()
  loss, grads = _ours_loss_and_grads(ours, b)
  hf_loss = _hf_loss(hf, b)
  hf_loss.backward()
  assert float(loss) == pytest.approx(float(hf_loss.detach()), rel=1e-6)
  by_variable = {id(v): g.numpy() for v, g in zip(ours.trainable_variables, grads, strict=True)}
  hf_params = dict(hf.named_parameters())
  for key, variable, transpose in hf_weights._weight_map(ours):  # pylint: disable=protected-access
    g = by_variable[id(variable)]
    g = g.T if transpose else g
    ref = hf_params[key].grad.numpy()
    if key.endswith("key.bias"):  # softmax is shift-invariant: its true gradient is 0
      assert np.abs(g).max() < 1e-7 and np.abs(ref).max() < 1e-7, key
      continue
    np.testing.assert_allclose(g, ref, rtol=1e-3, atol=1e-4 * np.abs(ref).max(), err_msg=key)


def test_one_adamw_step_matches_torch_with_hfs_decay_groups():
  """Decay on matrices only; the first update's rate (warmup 0: the peak) and Adam's step."""
  ours = _ours(4)
  hf = _hf_copy_of(ours)
  b = _batch(seed=1)
  lr = 1e-3
  opt = adamw(OptimizerOptions(learning_rate=lr), WarmupLinearDecay(lr, 0, 10),
              ours.trainable_variables)
  _, grads = _ours_loss_and_grads(ours, b)
  opt.apply(grads, ours.trainable_variables)
  params = list(hf.parameters())
  torch_opt = torch.optim.AdamW(
      [{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.01},
       {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
      lr=lr, betas=(0.9, 0.98), eps=1e-6)
  _hf_loss(hf, b).backward()
  torch_opt.step()
  after = hf_weights.to_hf_tensors(ours)
  for key, value in hf.state_dict().items():
    if key in after and key != hf_weights.TOKEN_TYPE_KEY and not key.endswith("key.bias"):
      # The first Adam step is ~lr * sign(g): a weight whose gradient is ~0 may differ by ~lr.
      differ = np.abs(after[key] - value.detach().numpy()) > 1e-6
      assert differ.mean() < 0.01, (key, differ.mean())


def test_schedule_is_transformers_linear_schedule_with_warmup():
  """The rate of every update, update 0 (rate 0) included, as HF's Trainer schedules it."""
  peak, warmup, total = 1e-3, 60, 550
  param = torch.nn.Parameter(torch.zeros(1))
  opt = torch.optim.AdamW([param], lr=peak)
  sched = transformers.get_linear_schedule_with_warmup(opt, warmup, total)
  ours = WarmupLinearDecay(peak, warmup, total)
  for step in range(total + 5):
    assert float(ours(tf.constant(step))) == pytest.approx(opt.param_groups[0]["lr"], abs=1e-9)
    opt.step()
    sched.step()


@pytest.mark.parametrize("recipe", [{"pre_layer_norm": True}, {"use_bias": False},
                                    {"pre_layer_norm": True, "use_bias": False}], ids=str)
def test_transformers_loads_the_recipe_options_with_the_same_logits(recipe, tmp_path):
  """--to_hf of a pre-LN model is a RobertaPreLayerNormForMaskedLM for transformers, a
  bias-free one a RobertaForMaskedLM with zero biases: same logits as ours."""
  keras.utils.set_random_seed(0)
  config = tiny_config(vocab_size=300, max_seq_len=30, **recipe)
  ours = RobertaPretrainer(config, dtype="float32")
  rng = np.random.default_rng(0)
  for w in ours.weights:  # non-trivial LayerNorms and biases
    w.assign(rng.normal(0, 0.05, w.shape).astype(np.float32) + (1.0 if "gamma" in w.path else 0))
  hf_weights.save_hf(str(tmp_path), ours)
  hf = transformers.AutoModelForMaskedLM.from_pretrained(str(tmp_path))
  expected = ("RobertaPreLayerNormForMaskedLM" if recipe.get("pre_layer_norm")
              else "RobertaForMaskedLM")
  assert type(hf).__name__ == expected
  ids = np.array([[0, 5, 6, 7, 8, 2, 1, 1], [0, 9, 10, 2, 1, 1, 1, 1]], np.int32)
  mask = (ids != 1).astype(np.int32)
  with torch.no_grad():
    theirs = hf(input_ids=torch.from_numpy(ids.astype(np.int64)),
                attention_mask=torch.from_numpy(mask.astype(np.int64))).logits.numpy()
  real = mask.astype(bool)
  assert np.abs(ours.full_logits(ids, mask).numpy() - theirs)[real].max() < 1e-5
