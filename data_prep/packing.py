"""Packing encoded sentences into input blocks: FULL-SENTENCES, DOC-SENTENCES, separate documents.

(`make_packer` also hands out the pair packings of the input-format ablation,
data_prep/pair_packing.py; everything below is about the block packings.)

A block is ``<s> ids </s>`` with at most ``max_seq_len`` ids in all, so it holds up to
``capacity = max_seq_len - 2`` content ids. Sentences are added in corpus order:

- A sentence that fits in the current block is appended to it.
- A sentence that does not fit, but fits in an empty block, closes the current block and starts
  the next one: sentences are never cut when they could be kept whole (fairseq's
  ``--sample-break-mode complete``, which RoBERTa used).
- A sentence longer than a whole block is the only thing ever cut: it fills the current block's
  remaining room and runs on into as many following blocks as it needs (fairseq would instead
  emit an over-long block, which a fixed-size position table cannot hold).
- FULL-SENTENCES (``full_sentences``, the default): blocks run across documents; between two
  documents in one block sits an extra ``</s>`` (the paper's separator). A block never begins or
  ends with that separator: where a document ends at a block boundary the boundary separates.
- DOC-SENTENCES (``doc_sentences``): a document's end closes the block, so no block mixes
  documents (the last block of each document is usually short).
- Separate documents (``separate_documents``, ModernBERT's way): blocks run across documents as
  in FULL-SENTENCES, but each document is its own segment ``<s> ids </s>``: the separator is
  ``</s> <s>`` (two ids), and the block is a `DocumentBlock` that records where each segment
  starts. A segment alone is what the document (or its piece in this block) would be as a row
  of its own, so a model that keeps segments apart (attention and positions restart at each
  start) gives each the outputs it gives it alone.

The rules above hold for every separator length: with ``</s>`` (FULL-SENTENCES) the blocks are
exactly the paper's. Nothing is lost or repeated: the blocks' content ids with the separators
removed, concatenated,
are the documents' ids concatenated (tests/test_packing.py checks this exactly).
Memory is one block: blocks are emitted as soon as they are complete.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from data_prep import pair_packing
from roberta_tf.data import packings

# The --packing values: the block formats here, and the NSP ablation's pair formats
# (data_prep/pair_packing.py), which are never the default.
FULL_SENTENCES = packings.FULL_SENTENCES
DOC_SENTENCES = packings.DOC_SENTENCES
SEPARATE_DOCUMENTS = packings.SEPARATE_DOCUMENTS
BLOCK_PACKINGS = packings.BLOCK_PACKINGS
PAIR_PACKINGS = packings.PAIR_PACKINGS
PACKINGS = packings.PACKINGS


@dataclasses.dataclass(frozen=True, eq=False)
class DocumentBlock:
  """A block of `separate_documents`: ``ids`` int64 [L] = ``<s> a </s> <s> b </s> ...`` and
  ``starts`` int64 [K]: the index of each segment's ``<s>`` (0 first, increasing)."""
  ids: np.ndarray
  starts: np.ndarray

  def __len__(self) -> int:
    return len(self.ids)


class Packer:
  """Streams sentences (id arrays) in, emits complete blocks (int64 [<= max_seq_len]) out.

  Call ``add_sentence`` for each sentence of a document in order, ``end_document`` after its
  last sentence, and ``finish`` after the last document; every complete block is passed to
  ``emit`` at once: an int64 array, or for `separate_documents` a `DocumentBlock`.
  """

  def __init__(self, max_seq_len: int, packing: str, bos_id: int, eos_id: int,
               emit: Callable[[np.ndarray], None]):
    if packing not in BLOCK_PACKINGS:
      raise ValueError(f"packing={packing!r}; expected one of {', '.join(BLOCK_PACKINGS)}")
    if max_seq_len < 3:
      raise ValueError(f"max_seq_len={max_seq_len}: a block needs <s>, >= 1 id and </s>")
    self.capacity = max_seq_len - 2
    self._cross_documents = packing != DOC_SENTENCES
    self._bos = np.array([bos_id], np.int64)
    self._eos = np.array([eos_id], np.int64)
    # What sits between two documents in a block; with starts, each segment's start is recorded.
    self._with_starts = packing == SEPARATE_DOCUMENTS
    self._separator = np.array([eos_id, bos_id] if self._with_starts else [eos_id], np.int64)
    self._starts: list[int] = [0]         # the open block's segment starts (block indices)
    self._emit = emit
    self._pieces: list[np.ndarray] = []  # the open block's content, in order
    self._len = 0                         # content ids in the open block
    self._separate = False                # a document ended; the next sentence is a new one

  def add_sentence(self, ids: Sequence[int] | np.ndarray) -> None:
    """Adds one sentence's ids (no special tokens around them)."""
    ids = np.asarray(ids, np.int64)
    n = len(ids)
    if n == 0:
      return
    separate = self._separate and self._len > 0
    self._separate = False
    room = self.capacity - self._len
    gap = len(self._separator) if separate else 0
    if n + gap <= room:
      if separate:
        self._append_separator()
      self._append(ids)
      return
    if n <= self.capacity:  # whole in a fresh block; its boundary separates the documents
      self._close()
      self._append(ids)
      return
    # Longer than a block: cut it, starting in the open block if there is room for a token of it
    # (after the separator, if one is due).
    if separate and room >= gap + 1:
      self._append_separator()
    elif separate or room == 0:
      self._close()
    start = 0
    while start < n:
      take = min(self.capacity - self._len, n - start)
      self._append(ids[start:start + take])
      start += take
      if self._len == self.capacity:
        self._close()

  def end_document(self) -> None:
    """Marks the end of the current document."""
    if self._cross_documents:
      self._separate = True
    else:
      self._close()

  def finish(self) -> None:
    """Emits the last, partial block."""
    self._close()
    self._separate = False

  def _append(self, ids: np.ndarray) -> None:
    self._pieces.append(ids)
    self._len += len(ids)

  def _append_separator(self) -> None:
    self._append(self._separator)
    if self._with_starts:  # the new segment's <s>: block index = 1 (<s>) + content index
      self._starts.append(self._len)

  def _close(self) -> None:
    if self._len:
      ids = np.concatenate([self._bos, *self._pieces, self._eos])
      self._emit(DocumentBlock(ids, np.array(self._starts, np.int64)) if self._with_starts
                 else ids)
    self._pieces = []
    self._len = 0
    self._starts = [0]


def make_packer(max_seq_len: int, packing: str, bos_id: int, eos_id: int, emit,
                seed_key: str = ""):
  """The packer of ``packing``: a `Packer`, or for the pair formats a
  `pair_packing.PairPacker` drawing its coins from ``seed_key`` (same interface)."""
  if packing in PAIR_PACKINGS:
    return pair_packing.PairPacker(max_seq_len, packing, bos_id, eos_id, emit, seed_key)
  return Packer(max_seq_len, packing, bos_id, eos_id, emit)


def pack_documents(documents: Iterable[Iterable[Sequence[int]]], max_seq_len: int,
                   packing: str = FULL_SENTENCES, bos_id: int = 0, eos_id: int = 2,
                   seed_key: str = "") -> Iterator[np.ndarray]:
  """Packs documents (each an iterable of sentence id lists); yields blocks as they complete
  (pair formats: `PairExample`s, all at the end)."""
  ready: list[np.ndarray] = []
  packer = make_packer(max_seq_len, packing, bos_id, eos_id, ready.append, seed_key)
  for doc in documents:
    for sentence in doc:
      packer.add_sentence(sentence)
      yield from ready
      ready.clear()
    packer.end_document()
    yield from ready
    ready.clear()
  packer.finish()
  yield from ready
