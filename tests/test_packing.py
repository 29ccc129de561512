"""Tests for data_prep/packing.py: exact blocks, and nothing lost, repeated or cut needlessly."""

import random

import numpy as np
import pytest

from data_prep import packing

BOS, EOS = 0, 2


def _pack(docs, max_seq_len, mode):
  return [getattr(b, "ids", b).tolist()
          for b in packing.pack_documents(docs, max_seq_len, mode, BOS, EOS)]


def _unseparated(block, starts):
  """A separate_documents block checked against its starts, in FULL-SENTENCES' form: each
  `</s> <s>` between two segments becomes the one `</s>`."""
  assert starts[0] == 0 and all(block[s] == BOS and block[s - 1] == EOS for s in starts[1:])
  assert [i for i, t in enumerate(block) if t == BOS] == list(starts)
  return [t for i, t in enumerate(block) if i == 0 or i not in set(starts)]


def test_full_sentences_exact_blocks():
  # capacity 6: "a b c" "d e" fill a block; "f g" would not fit -> next block; the extra </s>
  # sits between the documents inside a block.
  docs = [[[10, 11, 12], [13, 14], [15, 16]], [[20], [21, 22]], [[30, 31, 32, 33, 34, 35]]]
  assert _pack(docs, 8, packing.FULL_SENTENCES) == [
      [BOS, 10, 11, 12, 13, 14, EOS],
      [BOS, 15, 16, EOS, 20, 21, 22, EOS],
      [BOS, 30, 31, 32, 33, 34, 35, EOS],  # doc 3 fills a block: separator dropped at boundary
  ]


def test_doc_sentences_exact_blocks():
  docs = [[[10, 11, 12], [13, 14], [15, 16]], [[20], [21, 22]]]
  assert _pack(docs, 8, packing.DOC_SENTENCES) == [
      [BOS, 10, 11, 12, 13, 14, EOS],
      [BOS, 15, 16, EOS],
      [BOS, 20, 21, 22, EOS],
  ]


def test_long_sentence_is_cut_across_blocks_from_the_open_block():
  # capacity 4: the 10-id sentence fills the open block's room after the separator, then runs on.
  docs = [[[10, 11]], [list(range(100, 110)), [50]]]
  assert _pack(docs, 6, packing.FULL_SENTENCES) == [
      [BOS, 10, 11, EOS, 100, EOS],
      [BOS, 101, 102, 103, 104, EOS],
      [BOS, 105, 106, 107, 108, EOS],
      [BOS, 109, 50, EOS],
  ]
  assert _pack(docs, 6, packing.DOC_SENTENCES) == [
      [BOS, 10, 11, EOS],
      [BOS, 100, 101, 102, 103, EOS],
      [BOS, 104, 105, 106, 107, EOS],
      [BOS, 108, 109, 50, EOS],
  ]


def test_separate_documents_exact_blocks_and_starts():
  # capacity 6: as FULL-SENTENCES, but a document boundary inside a block costs </s> <s>.
  docs = [[[10, 11, 12], [13, 14]], [[20], [21]], [[30, 31]], [[40, 41, 42, 43, 44, 45, 46]]]
  blocks = list(packing.pack_documents(docs, 8, packing.SEPARATE_DOCUMENTS, BOS, EOS))
  assert [(b.ids.tolist(), b.starts.tolist()) for b in blocks] == [
      ([BOS, 10, 11, 12, 13, 14, EOS], [0]),
      ([BOS, 20, 21, EOS, BOS, 30, 31, EOS], [0, 4]),
      # doc 4 is longer than a block: cut, starting in no open block (no room after </s> <s>)
      ([BOS, 40, 41, 42, 43, 44, 45, EOS], [0]),
      ([BOS, 46, EOS], [0]),
  ]
  assert all(len(b) == len(b.ids) for b in blocks)
  # The same documents in FULL-SENTENCES: the paper's blocks, untouched by the new packing.
  assert _pack(docs, 8, packing.FULL_SENTENCES) == [
      [BOS, 10, 11, 12, 13, 14, EOS], [BOS, 20, 21, EOS, 30, 31, EOS],
      [BOS, 40, 41, 42, 43, 44, 45, EOS], [BOS, 46, EOS]]


def _random_docs(rng, num_docs, capacity):
  """Documents whose ids are unique (>= 10), so each id names its document and sentence."""
  docs, next_id = [], 10
  for _ in range(num_docs):
    doc = []
    for _ in range(rng.randint(1, 6)):
      # Mostly short sentences, some exactly a block, some longer than a block.
      short = rng.randint(1, max(1, capacity // 2))
      n = rng.choice([short, capacity, rng.randint(1, 3 * capacity)])
      doc.append(list(range(next_id, next_id + n)))
      next_id += n
    docs.append(doc)
  return docs


@pytest.mark.parametrize("mode", packing.BLOCK_PACKINGS)
@pytest.mark.parametrize("max_seq_len", [3, 4, 9, 32])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lossless_and_sentences_whole(mode, max_seq_len, seed):
  capacity = max_seq_len - 2
  docs = _random_docs(random.Random(seed), 30, capacity)
  packed = list(packing.pack_documents(docs, max_seq_len, mode, BOS, EOS))
  lengths = [len(b) for b in packed]
  blocks = [_unseparated(b.ids.tolist(), b.starts.tolist()) if mode == packing.SEPARATE_DOCUMENTS
            else b.tolist() for b in packed]
  gap = 2 if mode == packing.SEPARATE_DOCUMENTS else 1  # ids between two documents
  where = {}  # id -> (document, sentence)
  for d, doc in enumerate(docs):
    for s, sentence in enumerate(doc):
      where.update((i, (d, s)) for i in sentence)

  for block, length in zip(blocks, lengths):
    assert length <= max_seq_len and block[0] == BOS and block[-1] == EOS
    inner = block[1:-1]
    assert inner and BOS not in inner and inner[0] != EOS and inner[-1] != EOS
    for k, i in enumerate(inner):
      if i == EOS:  # a separator: only between two documents, once
        assert mode != packing.DOC_SENTENCES
        assert where[inner[k - 1]][0] + 1 == where[inner[k + 1]][0]
      elif k and inner[k - 1] != EOS:  # two neighbouring ids of one block, no separator between
        assert where[inner[k - 1]][0] == where[i][0]

  # Nothing lost or repeated: the content without separators is the documents' ids in order.
  content = [i for b in blocks for i in b[1:-1] if i != EOS]
  assert content == [i for doc in docs for sentence in doc for i in sentence]

  # A sentence that fits a block lies in one block.
  block_of = {i: n for n, b in enumerate(blocks) for i in b[1:-1] if i != EOS}
  for doc in docs:
    for sentence in doc:
      if len(sentence) <= capacity:
        assert len({block_of[i] for i in sentence}) == 1, sentence

  # A block closes early only when the next sentence (plus a separator) would not fit.
  for b, length, nxt in zip(blocks, lengths, blocks[1:]):
    first = nxt[1]
    d, s = where[first]
    sentence = docs[d][s]
    new_doc = s == 0 and where[b[-2]][0] != d
    if mode == packing.DOC_SENTENCES and new_doc:
      continue
    if sentence[0] == first:  # the next block starts with a whole sentence
      assert length - 2 + len(sentence) + gap * new_doc > capacity
    else:  # a cut sentence: the block was full
      assert length - 2 == capacity


def test_empty_sentence_is_skipped_and_numpy_input_accepted():
  docs = [[np.array([10, 11], np.int32), [], np.array([12], np.int64)]]
  assert _pack(docs, 8, packing.FULL_SENTENCES) == [[BOS, 10, 11, 12, EOS]]


def test_bad_arguments():
  with pytest.raises(ValueError, match="packing"):
    packing.Packer(8, "segment_pair", BOS, EOS, print)
  with pytest.raises(ValueError, match="max_seq_len"):
    packing.Packer(2, packing.FULL_SENTENCES, BOS, EOS, print)
