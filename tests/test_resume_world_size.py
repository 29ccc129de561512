"""A run resumed with another split of the same global batch continues as if uninterrupted.

Acceptance case of the resume position (data/pipeline.py: a position in one global stream of
sequences, reached by arithmetic, not by replaying batches): A trains 6 steps at batch 32 x 1
accumulation step, checkpointing at step 3; B starts from A's step-3 checkpoint and trains
steps 4-6 at accumulation 2 (per-replica batch 16). B's losses at steps 4-6 and its final
checkpoint equal A's (<= 1e-5, fp32, dropout 0). The shuffle window (100) does not divide the
resume position (96), so B starts inside a window.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.train_config import TrainConfig
from tests.harness import crashed_copy
from tests.test_train_resume import _checkpoint, _train_loss

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

STEPS = 6


def _config(train_shards, model_dir, accum):
  return TrainConfig.from_dict(dict(
      config="tiny", train_data=train_shards, model_dir=model_dir, max_seq_len=64, batch_size=32,
      grad_accum_steps=accum, train_steps=STEPS, warmup_steps=2, learning_rate=1e-3, dropout=0.0,
      seed=7, shuffle_buffer=100, log_every=1, checkpoint_every=3, keep_checkpoints=5))


@pytest.mark.timeout(240)
def test_checkpoint_at_accumulation_1_resumes_at_accumulation_2(train_shards, tmp_path):
  a, b = str(tmp_path / "a"), str(tmp_path / "b")
  pretraining.pretrain(_config(train_shards, a, accum=1))
  crashed_copy(a, b, 3)
  assert tf.train.load_variable(os.path.join(b, "ckpt-3"),
                                "data_position/.ATTRIBUTES/VARIABLE_VALUE") == 3 * 32

  result = pretraining.pretrain(_config(train_shards, b, accum=2))
  assert result.step == STEPS
  for step in range(4, STEPS + 1):
    assert abs(_train_loss(a, step) - _train_loss(b, step)) <= 1e-5, step
  expected, actual = _checkpoint(a), _checkpoint(b)
  expected.pop("data_rounds/.ATTRIBUTES/VARIABLE_VALUE")  # micro-batch rounds: 6 vs 3 + 6
  actual.pop("data_rounds/.ATTRIBUTES/VARIABLE_VALUE")
  assert sorted(expected) == sorted(actual)
  for key, value in expected.items():
    np.testing.assert_allclose(actual[key], value, rtol=0, atol=1e-5, err_msg=key)
