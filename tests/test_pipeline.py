"""The tf.data pipeline on real shards: batch contract, determinism, resume, sharding, damage."""

import collections
import dataclasses
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from data_prep.shard_builder import build_shards
from data_prep.shard_settings import ShardSettings
from roberta_tf.data import dataset_info, example_spec
from roberta_tf.data.masking import MaskingConfig
from roberta_tf.data.pipeline import InputConfig, build_dataset, build_pretraining_dataset
from roberta_tf.data.vocab_info import VocabInfo
from roberta_tf.tokenization.vocab_files import VocabId
from tests.batches import restore
from tests.conftest import HF_TINY, TESTDATA
from tests.harness import tiny_config

S = 64


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  """The small corpus encoded by data_prep into 4 train shards (S=64) and 1 validation shard."""
  out = str(tmp_path_factory.mktemp("shards"))
  build_shards(ShardSettings(
      input=os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), vocab_dir=HF_TINY,
      output_dir=out, max_seq_len=S, num_shards=4, validation_fraction=0.1, seed=0,
      encoder="hf", overwrite=True, progress=False))
  return out


@pytest.fixture(scope="module")
def vocab():
  return VocabInfo.from_dir(HF_TINY)


def records(data_dir, split="train"):
  """Every record of a split as a tuple of ids, in shard order."""
  info = dataset_info.read(data_dir)
  out = []
  for path in dataset_info.split_files(data_dir, info, split):
    for r in tf.data.TFRecordDataset(path):
      out.append(tuple(example_spec.parse(r).numpy().tolist()))
  return out


def take(ds, n):
  return [b for _, b in zip(range(n), ds)]


def as_numpy(batches):
  return [{k: v.numpy() for k, v in b.items()} for b in batches]


def assert_same(a, b):
  assert len(a) == len(b)
  for x, y in zip(as_numpy(a), as_numpy(b)):
    for k in x:
      np.testing.assert_array_equal(x[k], y[k], err_msg=k)


def test_eval_pass_follows_the_batch_contract_and_covers_the_split_once(shards, vocab):
  config = InputConfig(per_replica_batch_size=16, max_seq_len=S, seed=3).for_eval()
  ds = build_pretraining_dataset(shards, "train", vocab, config)
  p = MaskingConfig().resolved_max_predictions(S)
  assert p == 16
  spec = ds.element_spec
  assert {k: (v.shape.as_list(), v.dtype) for k, v in spec.items()} == {
      "input_ids": ([16, S], tf.int32), "padding_mask": ([16, S], tf.int32),
      "mask_positions": ([16, p], tf.int32), "mask_ids": ([16, p], tf.int32),
      "mask_weights": ([16, p], tf.float32)}
  batches = list(ds)
  seen = [row for b in batches for row in restore(b)]
  want = records(shards)
  assert collections.Counter(seen) == collections.Counter(want)
  assert len(batches) == -(-len(want) // 16)
  special = vocab.special_flags()
  for b in as_numpy(batches):
    w, pos = b["mask_weights"] > 0, b["mask_positions"]
    assert np.all(pos[~w] == 0) and np.all(b["mask_ids"][~w] == 0)
    for r in range(16):
      filled = pos[r][w[r]]
      assert np.all(np.diff(filled) > 0)  # ascending, no duplicates
      assert np.all(b["padding_mask"][r][filled] == 1)
      assert not special[b["mask_ids"][r][w[r]]].any()
      assert (b["input_ids"][r] == vocab.pad_id).sum() == S - b["padding_mask"][r].sum()
  # The last batch is padded with empty rows.
  last = as_numpy(batches[-1:])[0]
  empty = last["padding_mask"].sum(1) == 0
  assert empty.sum() == 16 * len(batches) - len(want)
  assert np.all(last["mask_weights"][empty] == 0)


def test_training_stream_is_seeded_and_deterministic(shards, vocab):
  def first(seed):
    config = InputConfig(per_replica_batch_size=8, max_seq_len=S, seed=seed, shuffle_buffer=50)
    return take(build_pretraining_dataset(shards, "train", vocab, config), 3)
  assert_same(first(5), first(5))
  a, b = as_numpy(first(5)), as_numpy(first(6))
  assert not np.array_equal(a[0]["input_ids"], b[0]["input_ids"])


def test_mask_is_a_function_of_the_sequence_not_of_its_batch(shards, vocab):
  def masked_rows(batch_size, cycle_length):
    config = InputConfig(per_replica_batch_size=batch_size, max_seq_len=S, seed=1,
                         cycle_length=cycle_length).for_eval()
    out = {}
    for b in build_pretraining_dataset(shards, "train", vocab, config):
      for orig, row, m in zip(restore(b), b["input_ids"].numpy(), b["mask_weights"].numpy()):
        out[orig] = (tuple(row[:len(orig)]), m.sum())
    return out
  a, b = masked_rows(4, 2), masked_rows(7, 4)
  assert a == b
  assert sum(masked != orig for orig, (masked, _) in a.items()) > 0.8 * len(a)


@pytest.mark.timeout(90)
@pytest.mark.parametrize("lanes", [1, 4])
def test_resume_from_iterator_checkpoint_equals_uninterrupted_run(shards, vocab, tmp_path,
                                                                  lanes):
  # 443 sequences / 16 = 27.7 batches an epoch: the save point (30) lies in the second epoch.
  config = InputConfig(per_replica_batch_size=16, max_seq_len=S, seed=2, shuffle_buffer=64,
                       cycle_length=3, lanes=lanes)
  build = lambda: build_pretraining_dataset(shards, "train", vocab, config)  # noqa: E731
  straight = take(build(), 33)

  it = iter(build())
  take(it, 30)
  path = tf.train.Checkpoint(iterator=it).save(str(tmp_path / "data"))
  resumed_it = iter(build())
  tf.train.Checkpoint(iterator=resumed_it).restore(path).assert_consumed()
  assert_same(take(resumed_it, 3), straight[30:])


def _rows(batches):
  """The batches' masked rows, concatenated: {name: [N, ...]}."""
  return {k: np.concatenate([b[k] for b in as_numpy(batches)]) for k in batches[0]}


@pytest.mark.timeout(90)
def test_start_positions_the_stream_without_reading_what_precedes_it(shards, vocab):
  # 443 sequences an epoch, windows of 40: starts inside a window of epoch 0 and of epoch 1.
  config = InputConfig(per_replica_batch_size=16, max_seq_len=S, seed=4, shuffle_buffer=40)
  straight = _rows(take(build_pretraining_dataset(shards, "train", vocab, config), 40))
  first_epoch = list(map(tuple, straight["input_ids"][:443].tolist()))
  assert sorted(first_epoch) != first_epoch  # shuffled
  for start in (37, 443 + 85):
    resumed = _rows(take(build_pretraining_dataset(
        shards, "train", vocab, dataclasses.replace(config, start=start)), 3))
    for k, v in resumed.items():
      np.testing.assert_array_equal(v, straight[k][start:start + 48], err_msg=f"{k} @ {start}")


def test_replica_batches_are_rounds_of_the_global_stream(shards, vocab):
  # 4 replicas on 2 input pipelines (2 each): pipeline p takes batches 4r + 2p, 4r + 2p + 1.
  config = InputConfig(per_replica_batch_size=8, max_seq_len=S, seed=1, shuffle_buffer=64)
  single = as_numpy(take(build_pretraining_dataset(shards, "train", vocab, config), 12))
  for p in range(2):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=p,
                                     num_replicas_in_sync=4)
    mine = as_numpy(take(build_pretraining_dataset(shards, "train", vocab, config,
                                                   input_context=ctx), 6))
    want = [single[j] for j in range(12) if (j % 4) // 2 == p]
    for got, expected in zip(mine, want, strict=True):
      np.testing.assert_array_equal(got["input_ids"], expected["input_ids"])


@pytest.mark.parametrize("static", [False, True])
def test_static_masking_cycles_through_dupe_factor_copies(shards, vocab, static):
  n = dataset_info.read(shards)["splits"]["train"]["num_sequences"]
  # One batch = one epoch in a fixed order (no shuffle), so batch e holds epoch e's masks.
  config = InputConfig(per_replica_batch_size=n, max_seq_len=S, seed=0, shuffle_buffer=0)
  masking = MaskingConfig(static=static, dupe_factor=2)
  epochs = as_numpy(take(build_pretraining_dataset(shards, "train", vocab, config, masking), 4))
  same = lambda a, b: np.array_equal(epochs[a]["input_ids"], epochs[b]["input_ids"])  # noqa
  assert sorted(restore({k: tf.constant(v) for k, v in epochs[0].items()})) == sorted(
      records(shards))
  assert not same(0, 1) and not same(1, 2)
  assert same(0, 2) == static and same(1, 3) == static


@pytest.mark.parametrize("num_pipelines", [2, 5])  # 4 files: by file, then by record
def test_input_context_splits_the_data_disjointly(shards, vocab, num_pipelines):
  config = InputConfig(per_replica_batch_size=8, max_seq_len=S, seed=0).for_eval()
  parts = []
  for i in range(num_pipelines):
    ctx = tf.distribute.InputContext(num_input_pipelines=num_pipelines, input_pipeline_id=i)
    ds = build_pretraining_dataset(shards, "train", vocab, config, input_context=ctx)
    parts.append([row for b in ds for row in restore(b)])
  assert all(parts)
  assert collections.Counter(sum(parts, [])) == collections.Counter(records(shards))


def test_mismatches_with_vocab_or_model_fail_clearly(shards, vocab, tmp_path):
  config = InputConfig(per_replica_batch_size=4, max_seq_len=S)
  other = VocabInfo(vocab.vocab_size, vocab.special_ids, vocab.word_start,
                    vocab_id=VocabId.of({"vocab.json": "0" * 64}, vocab.vocab_size))
  with pytest.raises(dataset_info.DatasetInfoError, match="encoded with another vocabulary"):
    build_pretraining_dataset(shards, "train", other, config)
  with pytest.raises(dataset_info.DatasetInfoError, match="position table has 60 rows"):
    build_pretraining_dataset(shards, "train", vocab, config, max_positions=60)
  with pytest.raises(dataset_info.DatasetInfoError, match="longer than --max_seq_len=32"):
    build_pretraining_dataset(shards, "train", vocab, InputConfig(per_replica_batch_size=4,
                                                                  max_seq_len=32))
  with pytest.raises(dataset_info.DatasetInfoError, match="no 'test' split"):
    build_pretraining_dataset(shards, "test", vocab, config)
  with pytest.raises(dataset_info.DatasetInfoError, match="vocab size 8000 in the shards, 9000"):
    build_dataset(shards, "train", training=True, per_replica_batch_size=4, max_seq_len=S,
                  model_config=tiny_config(vocab_size=9000, max_positions=S + 2))
  with pytest.raises(dataset_info.DatasetInfoError, match="not found"):
    build_pretraining_dataset(str(tmp_path), "train", vocab, config)


def test_build_dataset_for_the_training_loop(shards):
  model_config = tiny_config(max_positions=S + 2)
  masking = MaskingConfig(whole_word=True)  # needs the vocab_dir recorded by data_prep
  train = build_dataset(shards, "train", training=True, per_replica_batch_size=4, max_seq_len=S,
                        masking=masking, model_config=model_config, seed=1)
  evaluation = build_dataset(shards, "validation", training=False, per_replica_batch_size=4,
                             max_seq_len=S,
                             masking=masking, model_config=model_config)
  assert next(iter(train))["input_ids"].shape == [4, S]
  assert sorted(r for b in evaluation for r in restore(b)) == sorted(records(shards, "validation"))


def damaged_copy(shards, tmp_path, damage):
  """A copy of the shard directory whose train-00001 shard `damage(path)` has broken."""
  out = str(tmp_path / "damaged")
  shutil.copytree(shards, out)
  path = os.path.join(out, "train-00001-of-00004.tfrecord")
  damage(path)
  return out, path


def truncate(path):
  with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) * 3 // 4)


def flip_a_byte(path):
  data = bytearray(open(path, "rb").read())
  data[len(data) // 2] ^= 0xFF
  open(path, "wb").write(bytes(data))


def out_of_vocab_record(path):
  good = [r.numpy() for r in tf.data.TFRecordDataset(path)]
  with tf.io.TFRecordWriter(path) as w:
    for i, r in enumerate(good):
      w.write(example_spec.serialize([0, 99999, 2]) if i == 3 else r)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("damage", [truncate, flip_a_byte, out_of_vocab_record])
def test_damaged_shard_raises_an_error_naming_it(shards, vocab, tmp_path, damage):
  data, path = damaged_copy(shards, tmp_path, damage)
  config = InputConfig(per_replica_batch_size=16, max_seq_len=S, shuffle_buffer=32)
  with pytest.raises(tf.errors.InvalidArgumentError, match="train-00001-of-00004.tfrecord"):
    for _ in build_pretraining_dataset(data, "train", vocab, config):
      pass


@pytest.mark.timeout(60)
def test_damaged_shard_is_skipped_and_counted_on_request(shards, vocab, tmp_path, capfd):
  data, path = damaged_copy(shards, tmp_path, truncate)
  readable = sum(1 for _ in tf.data.TFRecordDataset(path).ignore_errors())
  counter = tf.Variable(0, dtype=tf.int64)
  config = InputConfig(per_replica_batch_size=16, max_seq_len=S,
                       skip_corrupt_shards=True).for_eval()
  seen = [r for b in build_pretraining_dataset(data, "train", vocab, config,
                                               skipped_shards=counter) for r in restore(b)]
  assert int(counter.numpy()) == 1
  assert "skipped the damaged part of" in capfd.readouterr().err
  expected = dataset_info.read(data)["splits"]["train"]["num_sequences"]
  shard_count = dataset_info.read(data)["splits"]["train"]["shards"][1]["num_sequences"]
  assert 64 <= readable < shard_count
  # Records are read in chunks of 64: the damaged shard is used up to its damaged chunk.
  assert len(seen) == expected - shard_count + readable // 64 * 64
  assert set(seen) <= set(records(shards))
