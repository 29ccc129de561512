"""The train step and the loop in-process: clipping, the NaN guard, precisions, bad configs.

Tiny model (L2 H128), sequences of 64, batches of 8 from the real pipeline over the test shards.
"""

import math
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.data import dataset_info, pipeline
from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.objective import MlmObjective
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import checkpointing
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training.schedule import WarmupLinearDecay
from roberta_tf.training.task import TrainingError
from roberta_tf.training.train_step import StepConfig, TrainStep
from tests.harness import tiny_config

SEQ = 64


def _model_config():
  return tiny_config(max_positions=SEQ + 2)


def _trainer(train_shards, **step_config):
  """A TrainStep on the default strategy, and a function returning the next batch of 8."""
  keras.utils.set_random_seed(0)
  model = models.RobertaPretrainer(_model_config(), dtype=step_config.get("precision"))
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3), WarmupLinearDecay(1e-3, 0, 100),
                            model.trainable_variables)
  train_step = TrainStep(tf.distribute.get_strategy(), model, opt, StepConfig(**step_config),
                         MlmObjective())
  batches = iter(pipeline.build_dataset(train_shards, "train", training=True,
                                        per_replica_batch_size=8,
                                        max_seq_len=SEQ, model_config=model.config,
                                        shuffle_buffer=0))
  return train_step, lambda: next(batches)


def _values(variables):
  return [np.array(v.numpy()) for v in variables]


def _global_norm(arrays):
  return math.sqrt(sum(float(np.sum(np.square(a.astype(np.float64)))) for a in arrays))


@pytest.mark.slow
def test_clip_norm_clips_the_averaged_gradient(train_shards):
  clip = 0.01
  train_step, next_batch = _trainer(train_shards, clip_norm=clip)
  out, _ = train_step(next_batch)
  assert float(out["grad_norm"]) > 10 * clip  # the norm is reported before clipping
  # Adam's first moment after one step is (1 - beta1) x the applied (clipped) gradient.
  momentums = [v for v in train_step.optimizer.variables if v.path.endswith("_momentum")]
  assert len(momentums) == len(train_step.model.trainable_variables)
  assert _global_norm(_values(momentums)) == pytest.approx(0.1 * clip, rel=1e-4)


@pytest.mark.slow
def test_xla_compiled_accumulating_step_matches_the_plain_one(train_shards):
  """--jit_compile changes the kernels, not the update (2 steps of 2 micro-batches)."""
  weights = []
  for jit in (False, True):
    train_step, next_batch = _trainer(train_shards, grad_accum_steps=2, jit_compile=jit)
    for _ in range(2):
      train_step(next_batch)
    weights.append(_values(train_step.model.trainable_variables))
  for a, b in zip(*weights, strict=True):
    np.testing.assert_allclose(b, a, rtol=0, atol=1e-5)


def test_non_finite_step_is_skipped_counted_and_never_saved(train_shards, tmp_path):
  train_step, next_batch = _trainer(train_shards)
  model, opt = train_step.model, train_step.optimizer
  ckpt = checkpointing.Checkpointer(str(tmp_path), {"model": model, "optimizer": opt,
                                                    **train_step.checkpoint_items()})
  out, _ = train_step(next_batch)
  assert float(out["applied"]) == 1.0
  good = ckpt.save(1)
  good_weights = _values(model.variables)

  kernel = next(v for v in model.trainable_variables if v.path.endswith("query/kernel"))
  kernel.assign(tf.tensor_scatter_nd_update(kernel, [[0, 0]], [float("nan")]))
  before_model, before_opt = _values(model.variables), _values(opt.variables)
  out, _ = train_step(next_batch)
  assert float(out["applied"]) == 0.0 and not math.isfinite(float(out["loss"]))
  assert int(train_step.skipped_steps.numpy()) == 1
  assert int(train_step.bad_steps_in_row.numpy()) == 1
  assert int(train_step.step.numpy()) == 2
  # Nothing moved but the iteration (the LR schedule follows the step count) and the counters.
  assert int(opt.iterations.numpy()) == 2
  for v, a, b in zip(model.variables, before_model, _values(model.variables), strict=True):
    np.testing.assert_array_equal(a, b, err_msg=v.path)
  for v, a, b in zip(opt.variables, before_opt, _values(opt.variables), strict=True):
    if not v.path.endswith("iteration"):
      np.testing.assert_array_equal(a, b, err_msg=v.path)

  with pytest.raises(checkpointing.NonFiniteWeightsError, match="non-finite"):
    ckpt.save(2)
  assert tf.train.latest_checkpoint(str(tmp_path)) == good
  assert not os.path.exists(os.path.join(str(tmp_path), "ckpt-2.index"))

  ckpt.restore(good)  # the last good checkpoint: finite again, and it trains on
  for v, a in zip(model.variables, good_weights, strict=True):
    np.testing.assert_array_equal(v.numpy(), a, err_msg=v.path)
  out, _ = train_step(next_batch)
  assert float(out["applied"]) == 1.0 and int(train_step.bad_steps_in_row.numpy()) == 0


@pytest.mark.slow
def test_fp16_overflow_is_skipped_counted_and_halves_the_scale(train_shards):
  """A loss scale of 2^60 overflows fp16 gradients: normal under fp16, not a bad step."""
  train_step, next_batch = _trainer(train_shards, precision="mixed_float16",
                                    loss_scale_initial=2.0**60)
  before = _values(train_step.model.trainable_variables)
  out, _ = train_step(next_batch)
  assert math.isfinite(float(out["loss"])) and float(out["applied"]) == 0.0
  assert float(out["loss_scale"]) == 2.0**60 and float(train_step.loss_scale.numpy()) == 2.0**59
  assert int(train_step.overflow_steps.numpy()) == 1
  assert int(train_step.skipped_steps.numpy()) == int(train_step.bad_steps_in_row.numpy()) == 0
  for v, a in zip(train_step.model.trainable_variables, before, strict=True):
    np.testing.assert_array_equal(v.numpy(), a, err_msg=v.path)


def _config(train_shards, model_dir, **overrides):
  values = dict(model_dir=str(model_dir), train_data=train_shards, eval_data=train_shards,
                config="tiny", max_seq_len=SEQ, batch_size=8, train_steps=12, warmup_steps=2,
                learning_rate=2e-3, log_every=4, checkpoint_every=100, seed=1)
  values.update(overrides)
  return TrainConfig.from_dict(values)


def _train_tags(model_dir):
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  acc = event_accumulator.EventAccumulator(os.path.join(model_dir, "train"))
  acc.Reload()
  return set(acc.Tags()["tensors"])


@pytest.fixture(scope="module")
def float32_run(train_shards, tmp_path_factory):
  model_dir = tmp_path_factory.mktemp("fp32")
  return pretraining.pretrain(_config(train_shards, model_dir)), model_dir


# Mixed precision rounds matmul inputs (bf16: 8 mantissa bits, fp16: 11); after 12 updates the
# held-out loss stays this close to float32's (measured: ~0.01 bf16, ~0.001 fp16).
@pytest.mark.parametrize("precision, tolerance", [("float32", 0.0), ("mixed_bfloat16", 0.05),
                                                  ("mixed_float16", 0.02)])
@pytest.mark.slow
def test_every_precision_trains(train_shards, tmp_path, float32_run, precision, tolerance):
  full_run, full_dir = float32_run
  model_dir = full_dir if precision == "float32" else tmp_path
  result = (full_run if precision == "float32"
            else pretraining.pretrain(_config(train_shards, tmp_path, precision=precision)))
  (first_step, first), (last_step, last) = result.eval_history[0], result.eval_history[-1]
  assert (first_step, last_step) == (0, 12)
  assert math.isfinite(last["loss"]) and last["loss"] < first["loss"] - 0.1, result.eval_history
  # The same updates as float32, not merely some learning: the curves agree.
  for (_, mixed), (_, full) in zip(result.eval_history, full_run.eval_history, strict=True):
    assert abs(mixed["loss"] - full["loss"]) <= tolerance, (precision, mixed, full)
  assert math.isfinite(result.final_train["loss"]) and result.final_train["grad_norm"] > 0
  tags = _train_tags(str(model_dir))
  if precision == "mixed_float16":
    assert {"optim/loss_scale", "optim/overflow_steps"} <= tags
    assert result.final_train["loss_scale"] >= 1.0
  else:
    assert "optim/loss_scale" not in tags


@pytest.mark.slow
def test_non_finite_init_stops_with_error_and_saves_nothing(train_shards, tmp_path):
  init = tmp_path / "nan_model"
  model = models.RobertaPretrainer(_model_config())
  kernel = next(v for v in model.trainable_variables if v.path.endswith("output_dense/kernel"))
  kernel.assign(tf.fill(kernel.shape, float("nan")))
  models.save(str(init), model)
  model_dir = tmp_path / "run"
  with pytest.raises(TrainingError, match=r"3 steps in a row .*--max_bad_steps=3"):
    pretraining.pretrain(_config(train_shards, model_dir, init_from=str(init), eval_data="",
                      max_bad_steps=3, train_steps=10))
  assert tf.train.latest_checkpoint(str(model_dir)) is None


@pytest.mark.parametrize("overrides, message", [
    (dict(batch_size=6, grad_accum_steps=4), r"--batch_size=6 is not divisible"),
    (dict(max_seq_len=32), r"longer than --max_seq_len=32"),
    (dict(warmup_steps=20), r"--warmup_steps=20"),
])
def test_bad_configs_name_the_flag(train_shards, tmp_path, overrides, message):
  with pytest.raises((ValueError, dataset_info.DatasetInfoError), match=message):
    pretraining.pretrain(_config(train_shards, tmp_path, **overrides))


@pytest.mark.slow
def test_resuming_with_another_architecture_is_refused_and_changes_nothing(train_shards, tmp_path):
  pretraining.pretrain(_config(train_shards, tmp_path, train_steps=2, eval_data=""))
  with open(tmp_path / "config.json", encoding="utf-8") as f:
    before = f.read()
  with pytest.raises(ValueError, match=r"holds checkpoints of another model \(.*hidden_size: "
                                       r"128 there, 256 now"):
    pretraining.pretrain(_config(train_shards, tmp_path, config="small", train_steps=4,
                                 eval_data=""))
  with open(tmp_path / "config.json", encoding="utf-8") as f:
    assert f.read() == before
  # A changed dropout is not another architecture: the run resumes.
  result = pretraining.pretrain(_config(train_shards, tmp_path, train_steps=4, eval_data="",
                                        dropout=0.0))
  assert result.step == 4
