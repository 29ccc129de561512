"""The global shuffle (data_prep/block_order.py, external_sort.py): a multi-source corpus read
as the trainer reads it is a well-mixed sample in every window, at shards far larger than the
reader's shuffle window."""

import json
import os
import random

import numpy as np
import pytest

from data_prep import block_order, external_sort
from data_prep.shard_builder import build_shards
from data_prep.shard_settings import ShardSettings
from roberta_tf.data import dataset_info
from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset
from roberta_tf.data.vocab_info import VocabInfo
from tests.batches import restore
from tests.conftest import HF_TINY

S = 32


def _write_source(path, words, docs, seed):
  """A .jsonl file of ``docs`` documents of 12 lines of 10 words drawn from ``words``."""
  rng = random.Random(seed)
  with open(path, "w", encoding="utf-8") as f:
    for _ in range(docs):
      lines = [" ".join(rng.choice(words) for _ in range(10)) for _ in range(12)]
      f.write(json.dumps({"text": "\n".join(lines)}) + "\n")


@pytest.fixture(scope="module")
def two_sources(tmp_path_factory):
  """Source A (words of letters, 2 files) then source B (numbers, 2 files) in file order, and
  the id → "holds a digit" table that tells a block's source."""
  root = tmp_path_factory.mktemp("corpus")
  letters = ["alpha", "river", "stone", "garden", "quiet", "morning", "window", "paper"]
  numbers = [str(n) for n in (12, 345, 6789, 2024, 77, 31415, 808, 1999)]
  for i in range(2):
    _write_source(root / f"a{i}.jsonl", letters, 45, seed=i)
    _write_source(root / f"b{i}.jsonl", numbers, 45, seed=10 + i)
  with open(os.path.join(HF_TINY, "vocab.json"), encoding="utf-8") as f:
    vocab = json.load(f)
  digit = np.zeros(len(vocab), bool)
  for token, i in vocab.items():
    digit[i] = any(c.isdigit() for c in token)
  return str(root), digit


def _settings(corpus, out):
  return ShardSettings(input=corpus, vocab_dir=HF_TINY, output_dir=out, max_seq_len=S,
                       num_shards=2, validation_fraction=0, encoder="hf", progress=False)


def _source_b(rows, digit):
  """1 for a row (ids) from source B (mostly digit tokens), else 0."""
  return np.array([digit[np.array(r[1:-1])].mean() > 0.5 for r in rows], float)


def test_every_window_of_the_stream_holds_each_source_in_proportion(two_sources, tmp_path):
  corpus, digit = two_sources
  out = str(tmp_path / "shards")
  build_shards(_settings(corpus, out))
  info = dataset_info.read(out)
  assert dataset_info.is_globally_shuffled(info)
  per_shard = [s["num_sequences"] for s in info["splits"]["train"]["shards"]]
  window, shuffle_buffer = 100, 50
  assert min(per_shard) > 10 * window  # shards far larger than the reader's shuffle window
  config = InputConfig(per_replica_batch_size=window, max_seq_len=S, seed=1,
                       shuffle_buffer=shuffle_buffer)
  ds = build_pretraining_dataset(out, "train", VocabInfo.from_dir(HF_TINY), config)
  batches = sum(per_shard) // window
  shares = [_source_b(restore(b), digit).mean() for _, b in zip(range(batches), ds)]
  # The global share, from the shards themselves.
  total = [r for b in build_pretraining_dataset(
      out, "train", VocabInfo.from_dir(HF_TINY), config.for_eval()) for r in restore(b)]
  p = _source_b(total, digit).mean()
  assert 0.3 < p < 0.7
  sd = np.sqrt(p * (1 - p) / window)
  # Corpus order (before the global shuffle) gives windows of source A only, then B only.
  worst = max(abs(s - p) for s in shares)
  assert worst < 4 * sd, (p, [round(s, 2) for s in shares])


def test_old_shards_are_read_with_a_note_on_their_order(two_sources, tmp_path, capsys):
  corpus, _ = two_sources
  out = str(tmp_path / "shards")
  build_shards(_settings(corpus, out))
  info = dataset_info.read(out)
  del info["shuffle"]  # as written before the global shuffle
  dataset_info.write(out, info)
  vocab = VocabInfo.from_dir(HF_TINY)
  config = InputConfig(per_replica_batch_size=8, max_seq_len=S)
  next(iter(build_pretraining_dataset(out, "train", vocab, config)))
  assert "hold their blocks in corpus order" in capsys.readouterr().err
  next(iter(build_pretraining_dataset(out, "train", vocab, config.for_eval())))
  assert "corpus order" not in capsys.readouterr().err  # evaluation does not care


def test_keys_are_stable_and_shards_uniform():
  # A fixed value: the key (hence every shard's bytes) must not change across releases.
  assert block_order.block_key(0, "train", (0, 0, 0)) == 0x266F25F56B20466D
  keys = [block_order.block_key(3, "train", (f, g, i))
          for f in range(4) for g in range(5) for i in range(500)]
  assert len(set(keys)) == len(keys)
  counts = np.bincount([block_order.shard_of(k, 7) for k in keys], minlength=7)
  assert np.all(np.abs(counts - len(keys) / 7) < 5 * np.sqrt(len(keys) / 7)), counts
  assert block_order.block_key(3, "validation", (0, 0, 0)) != keys[0]


@pytest.mark.parametrize("order", [block_order.ORDER_GLOBAL, block_order.ORDER_CORPUS])
def test_external_sort_equals_an_in_memory_sort(tmp_path, order):
  rng = random.Random(0)
  entries = [(rng.getrandbits(64), f, g, i, 3, bytes(rng.getrandbits(8) for _ in range(20)))
             for f in range(3) for g in range(4) for i in range(100)]
  entries.append((entries[5][0], 9, 9, 9, 3, b"same key as entry 5"))  # a tie: by position
  rng.shuffle(entries)
  path = str(tmp_path / "spill")
  size = external_sort.write_spill(path, entries)
  # A budget of ~1/30 of the file: two levels of buckets.
  got = list(external_sort.sorted_entries(path, order=order, sort_bytes=size // 30))
  assert got == sorted(entries, key=block_order.sort_key(order))
  assert os.listdir(tmp_path) == []  # the spill file and its buckets are consumed


def test_bucket_ranges_partition_the_keys():
  for n in (1, 2, 3, 7, 64):
    for lo, hi in ((0, external_sort.KEY_SPACE), (10, 1000), (5, 12)):
      ranges = [external_sort._bucket_range(b, n, lo, hi) for b in range(n)]
      assert ranges[0][0] == lo and ranges[-1][1] == hi
      assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
      for key in {lo, hi - 1, (lo + hi) // 2, lo + 1}:
        b = external_sort.bucket_of(key, n, lo, hi)
        assert ranges[b][0] <= key < ranges[b][1]
