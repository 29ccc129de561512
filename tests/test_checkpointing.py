"""roberta_tf.training.checkpointing.restore_checkpoint: a checkpoint written before
`data_position` existed still restores (the item keeps its value); any other missing item is an
error."""

import pytest
import tensorflow as tf

from roberta_tf.training.checkpointing import restore_checkpoint


def test_old_checkpoint_without_data_position_restores(tmp_path):
  path = tf.train.Checkpoint(step=tf.Variable(7, dtype=tf.int64),
                             data_rounds=tf.Variable(3, dtype=tf.int64)).save(
                                 str(tmp_path / "ckpt"))
  items = {name: tf.Variable(0, dtype=tf.int64)
           for name in ("step", "data_rounds", "data_position")}
  restore_checkpoint(items, path)
  assert [int(items[k]) for k in ("step", "data_rounds", "data_position")] == [7, 3, 0]


def test_a_missing_required_item_is_an_error(tmp_path):
  path = tf.train.Checkpoint(step=tf.Variable(7, dtype=tf.int64)).save(str(tmp_path / "ckpt"))
  with pytest.raises(AssertionError):
    restore_checkpoint({"step": tf.Variable(0, dtype=tf.int64),
                        "data_rounds": tf.Variable(0, dtype=tf.int64)}, path)
