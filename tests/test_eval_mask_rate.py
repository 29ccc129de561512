"""--mask_rate (issue 62): a family's training rate by default, any rate by flag; the held-out
evaluation masks 15% for every family and rate, so runs trained at different rates compare on
one scale (a RoBERTa run at 15% evaluates as before)."""

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.data import dataset_info
from roberta_tf.models import registry
from roberta_tf.pretraining import inputs
from roberta_tf.pretraining.task import model_config_for
from roberta_tf.pretraining.train_config import TrainConfig


def _first_batches(train_shards, family, mask_rate):
  cfg = TrainConfig.from_dict(dict(
      family=family, config="tiny", train_data=train_shards, eval_data=train_shards,
      model_dir="unused", max_seq_len=64, batch_size=8, shuffle_buffer=0, seed=2,
      mask_rate=mask_rate))
  model_config = model_config_for(cfg, dataset_info.read(train_shards))
  strategy = tf.distribute.get_strategy()
  train, evaluation = inputs.build_datasets(cfg, strategy, model_config, start=0)
  return next(iter(train)), next(iter(evaluation))


def _masked(batch):
  return int(np.sum(batch["mask_weights"].numpy()))


def _rate(batch):
  """Masked over real tokens (<s> and </s> among them: a little below the rate)."""
  return _masked(batch) / int(np.sum(batch["padding_mask"].numpy()))


@pytest.mark.parametrize("family", ["roberta", "modernbert"])
def test_evaluation_masks_15_percent_whatever_the_training_rate(train_shards, family):
  standard_train, standard_eval = _first_batches(train_shards, family, 0.15)
  high_train, high_eval = _first_batches(train_shards, family, 0.4)
  default_train, _ = _first_batches(train_shards, family, 0.0)  # the family's rate
  assert _masked(high_train) > 2 * _masked(standard_train)  # the flag sets training's rate
  for key in standard_eval:  # the same eval batch, masks included
    np.testing.assert_array_equal(high_eval[key].numpy(), standard_eval[key].numpy(), key)
  assert 0.1 < _rate(standard_eval) < 0.2
  rate = registry.get(family).mask_rate
  assert abs(_rate(default_train) - rate) < 0.06, (family, rate)


def test_a_record_written_with_mask_prob_reads_as_mask_rate():
  """config.json's "training" of runs before the rename: a resume or an evaluate reads the
  rate it trained at (not 0, the family's)."""
  old = {"train_data": "d", "model_dir": "m", "mask_prob": 0.4, "seed": 5}
  cfg = TrainConfig.from_record(old)
  assert (cfg.mask_rate, cfg.runtime.seed) == (0.4, 5)
  assert TrainConfig.from_record(cfg.to_dict()) == cfg
