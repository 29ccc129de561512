"""BERT's input formats with a next-sentence label: SEGMENT-PAIR and SENTENCE-PAIR (ablations).

RoBERTa's Table 2 compares its FULL-SENTENCES / DOC-SENTENCES blocks (data_prep/packing.py)
with BERT's inputs, which pair two pieces of text and ask a next-sentence-prediction (NSP)
head whether the second followed the first. These are data options for that ablation, never
the default. A pair example is

    <s> A </s> B </s>      token types 0 for `<s> A </s>`, 1 for `B </s>`

with ``first_length = len(A) + 2`` and ``label`` 0 when B is A's real continuation, 1 when B
is random text (the convention of BERT's and HF's ``next_sentence_label``).

- ``segment_pair`` (BERT's create_pretraining_data.py, per document): sentences are gathered
  into a chunk up to a target of ``max_seq_len - 3`` ids (with probability 0.1 a shorter,
  uniformly drawn target); A is the chunk's first 1..n-1 sentences; with probability 0.5 (always
  when the chunk has one sentence) B is a run of sentences from a random other document and
  the chunk's unused sentences are put back, else B is the rest of the chunk.
- ``sentence_pair`` (the paper's SENTENCE-PAIR): A is one sentence; B is the next sentence of
  its document with probability 0.5, else (and always after a document's last sentence) a random
  sentence of another document. Such inputs are much shorter than ``max_seq_len``.

Pairs too long are cut to ``max_seq_len - 3`` ids by dropping ids one at a time from the longer
segment, at its front or back by a coin flip (BERT's truncate_seq_pair): unlike FULL-SENTENCES
these formats lose text, as BERT's do.

Determinism: the "random other document" comes from the same document group and split (a group
is what both shard engines pack as one unit, data_prep/doc_groups.py), and every coin is drawn
from ``random.Random(seed_key)``, a key of (seed, split, group): both engines write the same
bytes. A group or split with a single document draws its random text from that document.

The pairs are fixed when the shards are written (BERT's dupe_factor 1): every epoch reads the
same pairs and labels; only the masks are drawn afresh (dynamic masking).

Sentences: BERT's input has one sentence per line; a corpus line may hold a whole paragraph
(a .jsonl document is often one line), which would leave no real "next sentence" to pair. So
for these packings each line is first cut at sentence ends (`split_sentences`: `.`, `!`, `?`
plus closing quotes or brackets, then whitespace and a capital, digit or opening quote; and
after `。！？`). The block packings never cut lines.
"""

from __future__ import annotations

import dataclasses
import random
import re
from collections.abc import Callable, Sequence

import numpy as np

from roberta_tf.data.packings import PAIR_PACKINGS, SEGMENT_PAIR

SHORT_SEQ_PROB = 0.1   # BERT's short_seq_prob: a chunk's target length drawn shorter
RANDOM_NEXT_PROB = 0.5
_DIFFERENT_DOC_TRIES = 10
# A sentence end: terminal punctuation (+ closing quotes/brackets), whitespace, then what starts
# a sentence; or a full-width terminal mark (no space follows those).
_SENTENCE_END = re.compile(r"""([.!?]["'\u2019\u201d)\]]*)\s+(?=["'\u2018\u201c(\[]?[A-Z0-9])"""
                           r"|([。！？])")


@dataclasses.dataclass(frozen=True)
class PairExample:
  """One pair: ``ids`` int64 [L] = ``<s> A </s> B </s>``; ``first_length`` = len(A) + 2;
  ``label`` 0 (B follows A) or 1 (B is random)."""
  ids: np.ndarray
  first_length: int
  label: int

  def __len__(self) -> int:
    return len(self.ids)


def split_sentences(line: str) -> list[str]:
  """``line`` cut at sentence ends (see the module docstring); the whitespace between two
  sentences is dropped, as a line break would be. "Dr. Smith" is cut too: a heuristic, good
  enough to give most pairs a real next sentence."""
  marked = _SENTENCE_END.sub(lambda m: (m.group(1) or m.group(2)) + "\n", line)
  return [s for s in marked.split("\n") if s.strip()]


def split_document(sentences: list[str]) -> list[str]:
  """A document's lines → its sentences (`split_sentences` of each line, in order)."""
  return [s for line in sentences for s in split_sentences(line)]


class PairPacker:
  """The `packing.Packer` interface for the pair formats: collects a group's documents (one
  split), and on ``finish`` emits every pair example of them, in document order.

  Memory: the group's ids (a group is a few MB of text, data_prep/doc_groups.py).
  """

  def __init__(self, max_seq_len: int, packing: str, bos_id: int, eos_id: int,
               emit: Callable[[PairExample], None], seed_key: str):
    if packing not in PAIR_PACKINGS:
      raise ValueError(f"packing={packing!r}; expected one of {', '.join(PAIR_PACKINGS)}")
    if max_seq_len < 5:
      raise ValueError(f"max_seq_len={max_seq_len}: a pair needs <s>, A, </s>, B, </s>")
    self.max_tokens = max_seq_len - 3
    self._packing = packing
    self._bos, self._eos = bos_id, eos_id
    self._emit = emit
    self._seed_key = seed_key
    self._docs: list[list[np.ndarray]] = []
    self._open: list[np.ndarray] = []

  def add_sentence(self, ids: Sequence[int] | np.ndarray) -> None:
    ids = np.asarray(ids, np.int64)
    if len(ids):
      self._open.append(ids)

  def end_document(self) -> None:
    if self._open:
      self._docs.append(self._open)
    self._open = []

  def finish(self) -> None:
    self.end_document()
    rng = random.Random(self._seed_key)
    make = self._segment_pairs if self._packing == SEGMENT_PAIR else self._sentence_pairs
    for d in range(len(self._docs)):
      for a, b, label in make(d, rng):
        self._emit(self._example(a, b, label, rng))
    self._docs = []

  # -- the two formats --------------------------------------------------------------------
  def _segment_pairs(self, d: int, rng: random.Random):
    doc = self._docs[d]
    target = self.max_tokens
    if rng.random() < SHORT_SEQ_PROB:
      target = rng.randint(2, self.max_tokens)
    chunk, length, i = [], 0, 0
    while i < len(doc):
      chunk.append(doc[i])
      length += len(doc[i])
      if i == len(doc) - 1 or length >= target:
        a_end = 1 if len(chunk) < 2 else rng.randint(1, len(chunk) - 1)
        a = list(chunk[:a_end])
        if len(chunk) == 1 or rng.random() < RANDOM_NEXT_PROB:
          other = self._docs[self._other_doc(d, rng)]
          b, start = [], rng.randint(0, len(other) - 1)
          b_target = max(target - sum(len(s) for s in a), 1)
          for sentence in other[start:]:
            b.append(sentence)
            if sum(len(s) for s in b) >= b_target:
              break
          i -= len(chunk) - a_end  # the chunk's unused sentences go back
          yield a, b, 1
        else:
          yield a, list(chunk[a_end:]), 0
        chunk, length = [], 0
      i += 1

  def _sentence_pairs(self, d: int, rng: random.Random):
    doc = self._docs[d]
    i = 0
    while i < len(doc):
      if i + 1 < len(doc) and rng.random() >= RANDOM_NEXT_PROB:
        yield [doc[i]], [doc[i + 1]], 0
        i += 2
      else:
        other = self._docs[self._other_doc(d, rng)]
        yield [doc[i]], [other[rng.randint(0, len(other) - 1)]], 1
        i += 1

  def _other_doc(self, d: int, rng: random.Random) -> int:
    """A random document index other than ``d`` (``d`` itself if it is the only one)."""
    if len(self._docs) < 2:
      return d
    for _ in range(_DIFFERENT_DOC_TRIES):
      j = rng.randint(0, len(self._docs) - 1)
      if j != d:
        return j
    return (d + 1) % len(self._docs)

  def _example(self, a: list[np.ndarray], b: list[np.ndarray], label: int,
               rng: random.Random) -> PairExample:
    a_ids, b_ids = truncate_pair(np.concatenate(a), np.concatenate(b), self.max_tokens, rng)
    ids = np.concatenate([[self._bos], a_ids, [self._eos], b_ids, [self._eos]]).astype(np.int64)
    return PairExample(ids, len(a_ids) + 2, label)


def truncate_pair(a: np.ndarray, b: np.ndarray, max_tokens: int,
                  rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
  """BERT's truncate_seq_pair: drops ids from the longer of ``a``, ``b`` (front or back by a
  coin flip) until len(a) + len(b) <= max_tokens; each keeps >= 1 id when max_tokens >= 2."""
  a_start, a_end, b_start, b_end = 0, len(a), 0, len(b)
  while (a_end - a_start) + (b_end - b_start) > max_tokens:
    if a_end - a_start > b_end - b_start:
      if rng.random() < 0.5:
        a_start += 1
      else:
        a_end -= 1
    elif rng.random() < 0.5:
      b_start += 1
    else:
      b_end -= 1
  return a[a_start:a_end], b[b_start:b_end]
