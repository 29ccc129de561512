"""The NSP input-format ablation end to end: pair shards → pipeline fields → token types + NSP
head → the combined loss, its parts in TensorBoard, and evaluation on block shards.

Tiny model (L2 H128), sequences of 64, the small test corpus packed as SEGMENT-PAIR.
"""

import glob
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep.shard_builder import build_shards
from data_prep.shard_settings import ShardSettings
from roberta_tf import models
from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.data import dataset_info, example_spec, pipeline
from roberta_tf.pretraining.losses import nsp_sums
from roberta_tf.pretraining.objective import MlmObjective
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training.schedule import WarmupLinearDecay
from roberta_tf.training.train_step import StepConfig, TrainStep
from tests.conftest import HF_TINY, TESTDATA
from tests.harness import call_module, tiny_config

S = 64


@pytest.fixture(scope="module")
def pair_shards(tmp_path_factory):
  out = str(tmp_path_factory.mktemp("pairs"))
  build_shards(ShardSettings(
      input=os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), vocab_dir=HF_TINY,
      output_dir=out, max_seq_len=S, packing="segment_pair", num_shards=2,
      validation_fraction=0.1, seed=0, encoder="hf", overwrite=True, progress=False))
  return out


def _raw(data_dir, split):
  """(ids, first_length, label) of every record of a split, in shard order."""
  info = dataset_info.read(data_dir)
  out = []
  for path in dataset_info.split_files(data_dir, info, split):
    for r in tf.data.TFRecordDataset(path):
      ids, first, label = example_spec.parse_pair_batch(r[None])
      out.append((tuple(ids[0].numpy().tolist()), int(first[0]), int(label[0])))
  return out


def _config(**overrides):
  return tiny_config(max_positions=S + 2, **overrides)


def test_pair_records_hold_first_length_and_label(pair_shards):
  info = dataset_info.read(pair_shards)
  assert info["packing"] == "segment_pair"
  rows = _raw(pair_shards, "train")
  assert len(rows) == info["splits"]["train"]["num_sequences"]
  labels = [label for _, _, label in rows]
  assert 0.3 < np.mean(labels) < 0.8
  for ids, first, _ in rows:
    assert ids[0] == 0 and ids[first - 1] == 2 and ids[-1] == 2 and 3 <= first <= len(ids) - 2


def test_a_pair_record_is_the_same_bytes_in_every_process():
  # The features in name order (protobuf's map order otherwise varies by process): pair shards
  # are byte-for-byte reproducible.
  assert example_spec.serialize([0, 5, 2], 2, 1).hex() == (
      "0a530a1d0a1466697273745f7365676d656e745f6c656e67746812051a030a01020a140a09696e7075745f69"
      "647312071a050a030005020a1c0a136e6578745f73656e74656e63655f6c6162656c12051a030a0101")


def test_eval_batches_carry_token_types_labels_and_weights(pair_shards):
  rows = _raw(pair_shards, "validation")
  ds = pipeline.build_dataset(pair_shards, "validation", training=False, per_replica_batch_size=8,
                              max_seq_len=S)
  seen = 0
  for batch in ds:
    types = batch["token_type_ids"].numpy()
    mask = batch["padding_mask"].numpy()
    weights = batch["next_sentence_weights"].numpy()
    labels = batch["next_sentence_labels"].numpy()
    for r in range(8):
      if weights[r] == 0:  # the padded tail of the last batch
        assert mask[r].sum() == 0 and types[r].sum() == 0
        continue
      ids, first, label = rows[seen]
      assert mask[r].sum() == len(ids) and labels[r] == label
      assert types[r].tolist() == [0] * first + [1] * (len(ids) - first) + [0] * (S - len(ids))
      seen += 1
  assert seen == len(rows)


def test_training_batches_keep_fields_aligned_through_the_shuffle(pair_shards):
  by_ids = {}
  for ids, first, label in _raw(pair_shards, "train"):
    by_ids.setdefault(ids, set()).add((first, label))
  ds = pipeline.build_dataset(pair_shards, "train", training=True, per_replica_batch_size=8,
                              max_seq_len=S,
                              masking=None, shuffle_buffer=50, seed=3,
                              model_config=_config(type_vocab_size=2))
  for batch in ds.take(6):
    # Masking replaced some ids: match each row by its unmasked positions.
    ids = batch["input_ids"].numpy()
    pos, orig = batch["mask_positions"].numpy(), batch["mask_ids"].numpy()
    w = batch["mask_weights"].numpy()
    for r in range(8):
      row = ids[r].copy()
      row[pos[r][w[r] > 0]] = orig[r][w[r] > 0]
      n = int(batch["padding_mask"].numpy()[r].sum())
      first = int(np.argmax(batch["token_type_ids"].numpy()[r]))
      assert (first, int(batch["next_sentence_labels"].numpy()[r])) in by_ids[
          tuple(row[:n].tolist())]


def test_encoder_takes_token_types_only_with_a_type_table():
  plain = models.build_encoder(_config())
  assert sorted(plain.input) == ["input_ids", "padding_mask"]
  typed = models.build_encoder(_config(type_vocab_size=2))
  assert sorted(typed.input) == ["input_ids", "padding_mask", "token_type_ids"]
  ids = tf.constant([[0, 50, 51, 2, 60, 2]])
  mask = tf.ones_like(ids)
  out0 = typed({"input_ids": ids, "padding_mask": mask, "token_type_ids": tf.zeros_like(ids)})
  out1 = typed({"input_ids": ids, "padding_mask": mask,
                "token_type_ids": tf.constant([[0, 0, 0, 0, 1, 1]])})
  diff = np.abs(out0["sequence_output"].numpy() - out1["sequence_output"].numpy()).sum(-1)[0]
  assert diff[4:].min() > 1e-3  # the type-1 tokens changed; attention spreads it to the rest


def test_nsp_head_shapes_and_loss():
  keras.utils.set_random_seed(0)
  model = models.RobertaPretrainer(_config(type_vocab_size=2, next_sentence_head=True))
  inputs = {"input_ids": tf.constant([[0, 50, 51, 2, 60, 2, 1, 1]] * 3),
            "padding_mask": tf.constant([[1] * 6 + [0, 0]] * 3),
            "mask_positions": tf.constant([[1, 4]] * 3),
            "token_type_ids": tf.constant([[0, 0, 0, 0, 1, 1, 0, 0]] * 3)}
  mlm, nsp = model(inputs, with_nsp=True)
  assert mlm.shape == (3, 2, 8000) and nsp.shape == (3, 2) and nsp.dtype == tf.float32
  labels, weights = tf.constant([0, 1, 1]), tf.constant([1.0, 1.0, 0.0])
  loss, count, correct = (float(x) for x in nsp_sums(nsp, labels, weights))
  logp = tf.nn.log_softmax(nsp).numpy()
  assert loss == pytest.approx(-(logp[0, 0] + logp[1, 1]), rel=1e-5) and count == 2.0
  assert correct == float((np.argmax(logp[0]) == 0) + (np.argmax(logp[1]) == 1))
  with pytest.raises(ValueError, match="no NSP head"):
    models.RobertaPretrainer(_config())(inputs, with_nsp=True)


@pytest.mark.slow
def test_combined_loss_is_mlm_mean_plus_nsp_mean_and_reported_apart(pair_shards):
  keras.utils.set_random_seed(0)
  model = models.RobertaPretrainer(_config(type_vocab_size=2, next_sentence_head=True))
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3), WarmupLinearDecay(1e-3, 0, 10),
                            model.trainable_variables)
  train_step = TrainStep(tf.distribute.get_strategy(), model, opt, StepConfig(),
                         objective=MlmObjective(next_sentence=True))
  batch = next(iter(pipeline.build_dataset(pair_shards, "train", training=True,
                                           per_replica_batch_size=8,
                                           max_seq_len=S, model_config=model.config)))
  # The sums at the weights the step starts from (dropout 0: the same forward pass).
  sums = MlmObjective(next_sentence=True)(model, batch)
  extras = sums.extras
  out, _ = train_step(lambda: batch)
  mlm_mean = float(extras["mlm_loss"]) / float(sums.count)
  nsp_mean = float(extras["nsp_loss"]) / float(extras["nsp_count"])
  assert float(extras["nsp_count"]) == 8.0
  assert float(out["loss"]) == pytest.approx(mlm_mean + nsp_mean, rel=1e-5)
  assert float(out["sum/nsp_loss"]) == pytest.approx(float(extras["nsp_loss"]), rel=1e-5)
  assert float(out["applied"]) == 1.0


@pytest.mark.slow
def test_train_binary_on_pairs_logs_nsp_and_evaluates_on_blocks(pair_shards, train_shards,
                                                                tmp_path):
  model_dir = str(tmp_path / "model")
  run = call_module(
      "roberta_tf.train", f"--model_dir={model_dir}",
      f"--train_data={pair_shards}", f"--eval_data={pair_shards}", "--config=tiny",
      f"--max_seq_len={S}", "--batch_size=8", "--grad_accum_steps=2", "--train_steps=4",
      "--log_every=2", "--eval_every=2", "--eval_steps=2", "--warmup_steps=1")
  assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
  assert "nsp_loss" in run.stdout and "nsp_accuracy" in run.stdout
  config = models.read_config(model_dir)
  assert config.type_vocab_size == 2 and config.next_sentence_head
  tags = set()
  for split in ("train", "eval"):
    for path in glob.glob(os.path.join(model_dir, split, "events.out.tfevents.*")):
      for event in tf.compat.v1.train.summary_iterator(path):
        tags.update(f"{split}/{v.tag}" for v in event.summary.value)
  # Training's objective is MLM + NSP (optim/total_loss); mlm/loss stays the MLM part.
  assert {"train/nsp/loss", "train/nsp/accuracy", "train/mlm/loss", "train/optim/total_loss",
          "eval/nsp/accuracy", "eval/mlm/perplexity"} <= tags
  # The shared held-out set of the ablation: block shards, no token types (all type 0).
  ev = call_module("roberta_tf.evaluate", f"--model_dir={model_dir}",
                   f"--eval_data={train_shards}", "--json")
  assert ev.returncode == 0, ev.stderr[-2000:]
  assert '"perplexity"' in ev.stdout and "nsp_accuracy" not in ev.stdout
  # Continuing the pair model on block shards is refused, naming both.
  cont = call_module("roberta_tf.train", f"--model_dir={tmp_path / 'cont'}",
                     f"--train_data={train_shards}", f"--init_from={model_dir}",
                     f"--max_seq_len={S}", "--batch_size=8", "--train_steps=1",
                     "--warmup_steps=0")
  assert cont.returncode != 0 and "NSP head" in cont.stdout + cont.stderr
