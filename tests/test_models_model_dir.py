"""Model directories: save → load round trip, training-style checkpoints, clear errors."""

import gc
import logging
import os
import uuid

import keras
import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.models.model_dir import ModelDirError
from tests.harness import tiny_config

CONFIG = tiny_config(vocab_size=120, max_seq_len=16, hidden_size=32, intermediate_size=64,
                     num_heads=2)  # smaller than the tests' model: quick saves
BATCH = {"input_ids": np.array([[0, 5, 6, 7, 2, 1]], np.int32),
         "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], np.int32),
         "mask_positions": np.array([[1, 3]], np.int32)}


@pytest.fixture(scope="module")
def pretrainer():
  keras.utils.set_random_seed(3)
  return models.RobertaPretrainer(CONFIG)


def test_save_load_round_trip(pretrainer, tmp_path):
  model_dir = str(tmp_path / "model")
  models.save(model_dir, pretrainer)
  assert sorted(os.listdir(model_dir)) == [
      "checkpoint", "ckpt-0.data-00000-of-00001", "ckpt-0.index", "config.json"]
  assert models.read_config(model_dir) == CONFIG
  loaded = models.load(model_dir)
  for a, b in zip(pretrainer.weights, loaded.weights, strict=True):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
  np.testing.assert_array_equal(loaded(BATCH), pretrainer(BATCH))
  # Loaded under a mixed policy: same float32 weights.
  mixed = models.load(model_dir, dtype="mixed_bfloat16")
  np.testing.assert_array_equal(mixed.weights[0].numpy(), pretrainer.weights[0].numpy())


def test_load_reads_training_checkpoints_with_extra_keys(pretrainer, tmp_path):
  """Training writes model + optimizer + step into its checkpoints; load takes the model."""
  model_dir = str(tmp_path / "train")
  os.makedirs(model_dir)
  CONFIG.save(os.path.join(model_dir, "config.json"))
  optimizer = keras.optimizers.AdamW(1e-3)
  optimizer.build(pretrainer.trainable_variables)
  ckpt = tf.train.Checkpoint(model=pretrainer, optimizer=optimizer, step=tf.Variable(7))
  manager = tf.train.CheckpointManager(ckpt, model_dir, max_to_keep=2)
  manager.save()
  manager.save()
  loaded = models.load(model_dir)
  np.testing.assert_array_equal(loaded(BATCH), pretrainer(BATCH))


def test_save_refuses_a_non_empty_dir_and_leaves_no_temp(pretrainer, tmp_path):
  model_dir = tmp_path / "model"
  model_dir.mkdir()
  (model_dir / "other.txt").write_text("x")
  with pytest.raises(ModelDirError, match="not empty"):
    models.save(str(model_dir), pretrainer)
  models.save(str(model_dir), pretrainer, overwrite=True)
  assert not (model_dir / "other.txt").exists()
  assert sorted(os.listdir(tmp_path)) == ["model"]


def test_missing_files_are_named(pretrainer, tmp_path):
  with pytest.raises(ModelDirError, match="config.json not found"):
    models.load(str(tmp_path))
  CONFIG.save(str(tmp_path / "config.json"))
  with pytest.raises(ModelDirError, match="no TF checkpoint"):
    models.load(str(tmp_path))
  with pytest.raises(ModelDirError, match="checkpoint '.*ckpt-7' not found"):
    models.load(str(tmp_path), checkpoint=str(tmp_path / "ckpt-7"))


def test_config_checkpoint_mismatch_names_shapes_and_variables(pretrainer, tmp_path):
  model_dir = str(tmp_path / "model")
  models.save(model_dir, pretrainer)
  CONFIG.replace(vocab_size=121).save(os.path.join(model_dir, "config.json"))
  with pytest.raises(ModelDirError, match=r"shape \(120,\).*shape \(121,\)"):
    models.load(model_dir)
  CONFIG.replace(num_layers=3).save(os.path.join(model_dir, "config.json"))
  with pytest.raises(ModelDirError, match=r"lacks variables.*transformer_layer_2/"):
    models.load(model_dir)


def test_a_checkpoint_of_another_model_is_one_error_without_tf_warnings(pretrainer, tmp_path):
  """A training checkpoint (optimizer, step) under a config of another vocabulary size: the error
  names both shapes, and TF's warning of every value the failed restore left (a hundred lines
  before the error in `evaluate --checkpoint`'s stderr) is not logged."""
  model_dir = str(tmp_path / "train")
  os.makedirs(model_dir)
  CONFIG.replace(vocab_size=121).save(os.path.join(model_dir, "config.json"))
  optimizer = keras.optimizers.AdamW(1e-3)
  optimizer.build(pretrainer.trainable_variables)
  tf.train.CheckpointManager(tf.train.Checkpoint(model=pretrainer, optimizer=optimizer,
                                                 step=tf.Variable(7)), model_dir, 1).save()
  records = []
  handler = logging.Handler()
  handler.emit = records.append
  tf.get_logger().addHandler(handler)
  try:
    with pytest.raises(ModelDirError, match=r"shape \(120,\).*shape \(121,\)"):
      models.load(model_dir)
    gc.collect()
  finally:
    tf.get_logger().removeHandler(handler)
  assert not [r for r in records if r.levelno >= logging.WARNING], records[0].getMessage()


def test_model_dir_on_a_url(pretrainer, tmp_path):
  """save / read_config / load on TF's in-memory ram:// (a URL, as gs://... is): the same
  files and weights as on disk, files= copied from a URL, the same refusals; no local `ram:`."""
  cwd = os.listdir(".")
  root = f"ram://model-dir-{uuid.uuid4().hex[:8]}"
  model_dir, local_dir = files.join(root, "model"), str(tmp_path / "model")
  try:
    files.makedirs(root)
    extra = files.join(root, "notes.txt")
    with files.open(extra, "w") as f:
      f.write("vocab stand-in")
    prefix = models.save(model_dir, pretrainer, files={"notes.txt": extra})
    models.save(local_dir, pretrainer)
    assert prefix == f"{model_dir}/ckpt-0"
    assert sorted(files.listdir(model_dir)) == sorted(os.listdir(local_dir) + ["notes.txt"])
    assert files.read_text(files.join(model_dir, "notes.txt")) == "vocab stand-in"
    assert sorted(files.listdir(root)) == ["model", "notes.txt"]  # no temporary left
    assert models.read_config(model_dir) == CONFIG
    for loaded in (models.load(model_dir), models.load(model_dir, checkpoint=prefix)):
      for a, b in zip(pretrainer.weights, loaded.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    with pytest.raises(ModelDirError, match=f"'{model_dir}' exists and is not empty"):
      models.save(model_dir, pretrainer)
    with pytest.raises(ModelDirError, match=f"{root}/none/config.json not found"):
      models.load(files.join(root, "none"))
    with pytest.raises(ModelDirError, match=f"checkpoint '{model_dir}/ckpt-7' not found"):
      models.load(model_dir, checkpoint=files.join(model_dir, "ckpt-7"))
  finally:
    files.rmtree(root, ignore_errors=True)
  assert os.listdir(".") == cwd and not os.path.exists("ram:")
