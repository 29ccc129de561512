"""Tests for data_prep/pair_packing.py: BERT's SEGMENT-PAIR / SENTENCE-PAIR examples, exactly."""

import random

import numpy as np
import pytest

from data_prep import packing, pair_packing

BOS, EOS = 0, 2
# Three documents of distinct id ranges, so every id says where it came from.
DOCS = [[list(range(10, 15)), list(range(20, 23)), list(range(30, 38))],
        [list(range(40, 44)), list(range(50, 52))],
        [[60, 61, 62]]]


def _pairs(docs, max_seq_len, mode, key="0/pairs/train/0/0"):
  return [(e.ids.tolist(), e.first_length, e.label)
          for e in packing.pack_documents(docs, max_seq_len, mode, BOS, EOS, seed_key=key)]


def test_segment_pair_exact_examples():
  # max_seq_len 16: at most 13 content ids; the chunk target is 13 (no short target drawn).
  assert _pairs(DOCS, 16, "segment_pair") == [
      # doc 0: chunk s0 s1 s2 (16 >= 13); A = s0 s1; B random (doc 2, all 3 of its ids);
      # the unused s2 goes back ...
      ([BOS, 10, 11, 12, 13, 14, 20, 21, 22, EOS, 60, 61, 62, EOS], 10, 1),
      # ... and is a one-sentence chunk: always a random B
      ([BOS, 30, 31, 32, 33, 34, 35, 36, 37, EOS, 60, 61, 62, EOS], 10, 1),
      # doc 1: chunk s0 s1 (the document's end); A = s0, B random, s1 goes back
      ([BOS, 40, 41, 42, 43, EOS, 60, 61, 62, EOS], 6, 1),
      ([BOS, 50, 51, EOS, 60, 61, 62, EOS], 4, 1),
      # doc 2: B random from doc 1, sentences from a random start up to the 10 ids left
      ([BOS, 60, 61, 62, EOS, 40, 41, 42, 43, 50, 51, EOS], 5, 1),
  ]


def test_sentence_pair_exact_examples():
  assert _pairs(DOCS, 16, "sentence_pair") == [
      ([BOS, 10, 11, 12, 13, 14, EOS, 20, 21, 22, EOS], 7, 0),  # doc 0's s0 and its next, s1
      ([BOS, 30, 31, 32, 33, 34, 35, 36, 37, EOS, 40, 41, 42, 43, EOS], 10, 1),  # last: random
      ([BOS, 40, 41, 42, 43, EOS, 60, 61, 62, EOS], 6, 1),
      ([BOS, 50, 51, EOS, 60, 61, 62, EOS], 4, 1),
      ([BOS, 60, 61, 62, EOS, 50, 51, EOS], 5, 1),
  ]


@pytest.mark.parametrize("mode", ["segment_pair", "sentence_pair"])
@pytest.mark.parametrize("max_seq_len", [48, 1000])  # 1000: nothing is truncated
def test_pairs_follow_the_contract_on_a_random_corpus(mode, max_seq_len):
  rng = random.Random(7)
  next_id = iter(range(10, 10**6))
  docs = [[[next(next_id) for _ in range(rng.randint(1, 30))] for _ in range(rng.randint(1, 9))]
          for _ in range(40)]
  where = {}  # id -> (document, sentence)
  for d, doc in enumerate(docs):
    for i, s in enumerate(doc):
      where.update({t: (d, i) for t in s})
  key = "3/pairs/train/1/2"
  out = list(packing.pack_documents(docs, max_seq_len, mode, BOS, EOS, seed_key=key))
  labels = []
  for e in out:
    ids, n = e.ids.tolist(), e.first_length
    assert ids[0] == BOS and ids[n - 1] == EOS and ids[-1] == EOS and len(ids) <= max_seq_len
    a, b = ids[1:n - 1], ids[n:-1]
    assert a and b and EOS not in a + b and BOS not in a + b
    if max_seq_len == 1000:
      # Whole sentences, consecutive in one document; label 0: B starts at A's next sentence.
      for seg in (a, b):
        d, i = where[seg[0]]
        j = where[seg[-1]][1]
        assert where[seg[-1]][0] == d and seg == [t for s in docs[d][i:j + 1] for t in s]
      a_doc, a_last = where[a[-1]]
      b_doc, b_first = where[b[0]]
      if e.label == 0:
        assert b_doc == a_doc and b_first == a_last + 1, (a, b)
    labels.append(e.label)
  # About half are random (more: a document's last sentence / single-sentence chunk forces it)
  assert 0.35 < np.mean(labels) < 0.8, np.mean(labels)
  again = list(packing.pack_documents(docs, max_seq_len, mode, BOS, EOS, seed_key=key))
  assert [e.ids.tolist() for e in again] == [e.ids.tolist() for e in out]
  other = list(packing.pack_documents(docs, max_seq_len, mode, BOS, EOS,
                                      seed_key="3/pairs/train/1/3"))
  assert [e.ids.tolist() for e in other] != [e.ids.tolist() for e in out]


def test_sentence_pair_uses_every_sentence_as_a_first_segment_or_continuation():
  docs = [[[10, 11], [12], [13, 14, 15]], [[20], [21]]]
  out = _pairs(docs, 64, "sentence_pair")
  firsts = [ids[1:n - 1] for ids, n, _ in out]
  seconds = [ids[n:-1] for ids, n, label in out if label == 0]
  assert sorted(map(tuple, firsts + seconds)) == sorted(
      tuple(s) for doc in docs for s in doc)


def test_truncate_pair_drops_from_the_longer_side_only():
  rng = random.Random(0)
  a, b = np.arange(10), np.arange(100, 103)
  ta, tb = pair_packing.truncate_pair(a, b, 8, rng)
  assert len(ta) + len(tb) == 8 and tb.tolist() == [100, 101, 102]
  assert ta.tolist() == a[a.tolist().index(ta[0]):][:5].tolist()  # a contiguous run of a
  ta, tb = pair_packing.truncate_pair(np.arange(6), np.arange(100, 106), 2, rng)
  assert len(ta) == 1 and len(tb) == 1


def test_bad_settings_are_refused():
  with pytest.raises(ValueError, match="max_seq_len=4"):
    pair_packing.PairPacker(4, "segment_pair", BOS, EOS, print, "k")
  with pytest.raises(ValueError, match="full_sentences"):
    pair_packing.PairPacker(16, "full_sentences", BOS, EOS, print, "k")


def test_lines_are_cut_into_sentences_for_the_pair_formats():
  assert pair_packing.split_sentences(
      'Hello world. This is it! Is it? "Yes." Then (ok). e.g. foo. 3 cats.') == [
          "Hello world.", "This is it!", "Is it?", '"Yes."', "Then (ok). e.g. foo.", "3 cats."]
  assert pair_packing.split_sentences("version 3.11 is out.  Next one") == [
      "version 3.11 is out.", "Next one"]
  assert pair_packing.split_sentences("日本語です。次の文！最後？") == [
      "日本語です。", "次の文！", "最後？"]
  assert pair_packing.split_sentences("   ") == []
  # A one-line paragraph document becomes several sentences: real next sentences to pair.
  assert pair_packing.split_document(["A b. C d.", "E f"]) == ["A b.", "C d.", "E f"]
