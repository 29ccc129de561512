"""Masking: statistics over > 1M real tokens, exactness, whole words, caps, purity; VocabInfo."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from data_prep.shard_builder import build_shards
from data_prep.shard_settings import ShardSettings
from roberta_tf.data import dataset_info, example_spec
from roberta_tf.data.masking import (
  Masker,
  MaskingConfig,
  default_max_predictions,
  sequence_seed,
  shard_key,
)
from roberta_tf.data.vocab_info import VocabError, VocabInfo, is_space_piece
from roberta_tf.tokenization import vocab_files
from tests.conftest import HF_TINY, TESTDATA

S = 64


@pytest.fixture(scope="module")
def vocab():
  return VocabInfo.from_dir(HF_TINY)


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
  """int32 [N, S]: every train sequence of the small corpus (data_prep shards), padded."""
  out = str(tmp_path_factory.mktemp("shards"))
  build_shards(ShardSettings(
      input=os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), vocab_dir=HF_TINY,
      output_dir=out, max_seq_len=S, num_shards=2, validation_fraction=0.0, encoder="hf",
      overwrite=True, progress=False))
  info = dataset_info.read(out)
  seqs = [example_spec.parse(r).numpy() for f in dataset_info.split_files(out, info, "train")
          for r in tf.data.TFRecordDataset(f)]
  ids = np.ones([len(seqs), S], np.int32)
  for i, s in enumerate(seqs):
    ids[i, :len(s)] = s
  return ids


def seeds_for(n, copy, seed=7):
  """The pipeline's seeds for records 0..n-1 of shard 0 in epoch (or copy) `copy`."""
  key = shard_key(seed, copy, 0).numpy()
  return np.stack([np.full([n], key), np.arange(n)], 1).astype(np.int64)


def run(masker, ids, seeds, chunk=4096):
  fn = tf.function(masker)
  parts = [fn(tf.constant(ids[i:i + chunk]), tf.constant(seeds[i:i + chunk]))
           for i in range(0, len(ids), chunk)]
  return {k: np.concatenate([p[k].numpy() for p in parts]) for k in parts[0]}


def maskable(ids, vocab):
  return ~vocab.special_flags()[ids]


def test_statistics_over_a_million_real_tokens(rows, vocab):
  ids = np.tile(rows, [-(-1_050_000 // int((rows != 1).sum())), 1])  # > 1M real tokens
  seeds = seeds_for(len(ids), copy=0)
  config = MaskingConfig()
  out = run(Masker(vocab, config, S), ids, seeds)
  n = maskable(ids, vocab).sum(1)
  w = out["mask_weights"] > 0
  k = w.sum(1)
  assert (ids != vocab.pad_id).sum() >= 1_000_000
  # Exact count per sequence: floor(0.15 n + u), at least one.
  floor = np.floor(0.15 * n)
  assert np.all((k == floor) | (k == floor + 1)) and np.all(k >= 1)
  assert abs(k.sum() / n.sum() - 0.15) < 0.005

  pos = out["mask_positions"]
  original = np.take_along_axis(ids, pos, 1)
  np.testing.assert_array_equal(out["mask_ids"][w], original[w])
  assert not vocab.special_flags()[original[w]].any()  # never <s>, </s>, <pad>, ...
  shown = np.take_along_axis(out["input_ids"], pos, 1)[w]
  as_mask = shown == vocab.mask_id
  as_random = ~as_mask & (shown != original[w])
  kept = shown == original[w]
  # A random draw equal to the original (p = 1/7995) counts as kept: 0.001 pp, well inside.
  assert abs(as_mask.mean() - 0.8) < 0.005
  assert abs(as_random.mean() - 0.1) < 0.005
  assert abs(kept.mean() - 0.1) < 0.005
  randoms = shown[as_random]
  assert not vocab.special_flags()[randoms].any()
  assert len(np.unique(randoms)) > 0.75 * (vocab.vocab_size - 5)  # spread over the vocab
  # Everything not selected is untouched, padding included.
  unselected = np.ones_like(ids, bool)
  np.put_along_axis(unselected, np.where(w, pos, 0), False, 1)
  unselected[:, 0] |= ~w.any(1) | (pos[:, 0] != 0)
  np.testing.assert_array_equal(out["input_ids"][unselected], ids[unselected])
  np.testing.assert_array_equal(out["padding_mask"], (ids != vocab.pad_id).astype(np.int32))

  # Deterministic per (seed, epoch, sequence); another epoch gives another mask.
  again = run(Masker(vocab, config, S), ids[:2000], seeds[:2000])
  np.testing.assert_array_equal(again["input_ids"], out["input_ids"][:2000])
  epoch1 = run(Masker(vocab, config, S), ids[:2000], seeds_for(2000, copy=1))
  differs = np.any(epoch1["mask_positions"] != out["mask_positions"][:2000], axis=1)
  assert differs.mean() > 0.99


def test_mask_is_independent_of_batch_company_and_padding(rows, vocab):
  ids, seeds = rows[:32], seeds_for(32, copy=3)
  masker = Masker(vocab, MaskingConfig(), S)
  together = masker(ids, seeds)
  alone = masker(ids[5:6], seeds[5:6])
  np.testing.assert_array_equal(alone["input_ids"][0], together["input_ids"][5])
  longer = np.pad(ids, [[0, 0], [0, 32]], constant_values=vocab.pad_id)
  wide = Masker(vocab, MaskingConfig(max_predictions_per_seq=16), S + 32)(longer, seeds)
  np.testing.assert_array_equal(wide["input_ids"][:, :S], together["input_ids"])
  np.testing.assert_array_equal(wide["mask_positions"], together["mask_positions"])


def word_ids(ids, vocab):
  """Numpy reference: the word index of every maskable token (-1 for special/pad)."""
  special = vocab.special_flags()[ids]
  breaks = special | (vocab.space[ids] if vocab.space is not None else False)  # after these
  prev_break = np.pad(breaks, [[0, 0], [1, 0]], constant_values=True)[:, :-1]
  start = ~special & (vocab.word_start[ids] | prev_break)
  return np.where(special, -1, np.cumsum(start, 1)), start


def test_whole_word_masking_takes_every_piece_of_a_word(rows, vocab):
  ids = np.tile(rows, [4, 1])
  config = MaskingConfig(whole_word=True, max_predictions_per_seq=S)  # no cap
  out = Masker(vocab, config, S)(ids, seeds_for(len(ids), copy=0))
  words, start = word_ids(ids, vocab)
  selected = np.zeros_like(ids, bool)
  w = out["mask_weights"].numpy() > 0
  np.put_along_axis(selected, np.where(w, out["mask_positions"].numpy(), 0), True, 1)
  selected[:, 0] &= np.any(w & (out["mask_positions"].numpy() == 0), 1)
  multi_piece = 0
  for r in range(len(ids)):
    chosen_words = set(words[r][selected[r]])
    assert -1 not in chosen_words
    for word in chosen_words:
      pieces = words[r] == word
      assert selected[r][pieces].all()
      multi_piece += pieces.sum() > 1
    n_words = start[r].sum()
    assert len(chosen_words) in (np.floor(0.15 * n_words), np.floor(0.15 * n_words) + 1)
  assert multi_piece > 100  # the test saw real multi-piece words
  rate = selected.sum() / maskable(ids, vocab).sum()
  assert 0.12 < rate < 0.18


def test_excess_selection_beyond_max_predictions_is_dropped_and_restored(rows, vocab):
  ids = rows[:64]
  out = Masker(vocab, MaskingConfig(whole_word=True, max_predictions_per_seq=3), S)(
      ids, seeds_for(64, copy=0))
  w = out["mask_weights"].numpy() > 0
  assert out["mask_positions"].shape == [64, 3] and w.sum(1).max() == 3
  pos = out["mask_positions"].numpy()
  changed = out["input_ids"].numpy() != ids
  for r in range(64):
    assert set(np.flatnonzero(changed[r])) <= set(pos[r][w[r]])


def test_rows_without_maskable_tokens_get_no_predictions(vocab):
  ids = np.array([[1] * 8, [0, 2] + [1] * 6, [0, 500, 2] + [1] * 5], np.int32)
  out = Masker(vocab, MaskingConfig(), 8)(ids, seeds_for(3, copy=0))
  np.testing.assert_array_equal(out["mask_weights"].numpy().sum(1), [0, 0, 1])
  np.testing.assert_array_equal(out["mask_positions"].numpy()[2], [1, 0, 0, 0, 0, 0, 0, 0])
  np.testing.assert_array_equal(out["mask_ids"].numpy()[2, 0], 500)


def test_seeds_and_config():
  assert [default_max_predictions(s) for s in (64, 128, 512)] == [16, 32, 104]
  assert MaskingConfig(max_predictions_per_seq=200).resolved_max_predictions(128) == 128
  static = MaskingConfig(static=True, dupe_factor=3)
  assert [static.mask_copy(e) for e in range(5)] == [0, 1, 2, 0, 1]
  assert MaskingConfig().mask_copy(4) == 4
  a = sequence_seed(1, 0, 2, 5).numpy()
  assert a.tolist() == [shard_key(1, 0, 2).numpy(), 5]
  assert len({tuple(sequence_seed(1, c, s, 5).numpy()) for c in (0, 1) for s in (0, 1)}) == 4
  for bad in (dict(mask_prob=0), dict(mask_token_prob=0.95, random_token_prob=0.1),
              dict(dupe_factor=0), dict(max_predictions_per_seq=0)):
    with pytest.raises(ValueError):
      MaskingConfig(**bad)


def test_vocab_info_reads_vocab_json(vocab, tmp_path):
  pieces = json.load(open(os.path.join(HF_TINY, "vocab.json"), encoding="utf-8"))
  assert vocab.vocab_size == 8000
  assert vocab.special_ids == {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 4}
  assert vocab.word_start[pieces["\u0120the"]] and not vocab.word_start[pieces["the"]]
  assert vocab.word_start.sum() == sum(p.startswith("\u0120") or is_space_piece(p) for p in pieces)
  assert vocab.space[pieces["\u010a\u010a"]] and not vocab.space[pieces["\u0120the"]]  # "\n\n"
  assert vocab.special_flags().sum() == 5
  assert vocab.vocab_id == vocab_files.VocabId.of_dir(HF_TINY)  # vocab.json and merges.txt
  assert vocab.vocab_id.sha256_of("vocab.json") == vocab_files.file_sha256(
      os.path.join(HF_TINY, "vocab.json"))
  del pieces["<mask>"]
  pieces["Ġzz"] = 4
  (tmp_path / "vocab.json").write_text(json.dumps(pieces))
  with pytest.raises(VocabError, match="lacks the special tokens.*<mask>"):
    VocabInfo.from_dir(str(tmp_path))
  pieces["<mask>"] = 4  # two pieces share id 4
  (tmp_path / "vocab.json").write_text(json.dumps(pieces))
  with pytest.raises(VocabError, match="two tokens the same id"):
    VocabInfo.from_dir(str(tmp_path))
  pieces["Ġzz"] = 8000  # unique ids 0..8000
  del pieces[next(p for p, i in pieces.items() if i == 100)]  # the gap: id 100
  (tmp_path / "vocab.json").write_text(json.dumps(pieces))
  with pytest.raises(VocabError, match=r"ids are not exactly 0\.\.7999"):
    VocabInfo.from_dir(str(tmp_path))
  with pytest.raises(ValueError, match="word starts"):
    Masker(VocabInfo(8000, vocab.special_ids), MaskingConfig(whole_word=True), S)
