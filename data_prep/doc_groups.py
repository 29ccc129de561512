"""Documents in deterministic groups: the unit both shard-building engines pack and shuffle.

Every document has a position: ``(file_index, doc_index)`` in the sorted file list of
``corpus.resolve_inputs``. Everything decided per document or group is a pure function of
positions and the seed, never of the order work is done in, so the local engine (one process,
streaming) and the Beam engine (any number of workers) write the same bytes:

- The split: a document goes to validation when ``uniform(seed, file_index, doc_index) <
  validation_fraction`` (a hash, not a sequential generator, so a worker needs no other file).
  One rule is global: when ``validation_fraction > 0`` and the corpus has two or more documents,
  neither split is left empty: the corpus's last document goes to whichever split has none
  (``last_document_split``).
- The group: a file's documents are cut into consecutive groups of about ``group_bytes``
  characters (a group closes after the document that reaches it; groups never span files).
  Packing crosses documents within a group only, so each group is an independent piece of work;
  the cost is one partial block per group and split (about 0.05% of blocks at 8 MB groups).
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import Any

from data_prep import corpus

TRAIN = "train"
VALIDATION = "validation"
# ~2M tokens of text: a few thousand 512-token blocks to shuffle per group, a few tens of MB of
# ids in memory per worker, and a partial block per group that costs ~0.05% of the blocks.
DEFAULT_GROUP_BYTES = 8 << 20

GroupKey = tuple[int, int]  # (file_index, group_index): sorts in corpus order


@dataclasses.dataclass
class Group:
  """Consecutive documents of one file.

  Attributes:
    key: (file_index, group_index).
    docs: [(split, sentences)] in corpus order.
    last_in_corpus: holds the corpus's last document (the last group of the last file).
  """
  key: GroupKey
  docs: list[tuple[str, list[str]]]
  last_in_corpus: bool = False


def uniform(*parts) -> float:
  """A deterministic uniform in [0, 1) from the parts' text (blake2b: stable across runs)."""
  digest = hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=8).digest()
  return int.from_bytes(digest, "big") / 2.0 ** 64


def document_split(seed: int, validation_fraction: float, file_index: int, doc_index: int) -> str:
  if validation_fraction > 0 and uniform(seed, "validation", file_index,
                                         doc_index) < validation_fraction:
    return VALIDATION
  return TRAIN


def read_file_groups(files: list[str], file_index: int, *, text_field: str, max_line_bytes: int,
                     seed: int, validation_fraction: float, group_bytes: int,
                     stats: corpus.CorpusStats, fs: Any = None) -> Iterator[Group]:
  """The groups of ``files[file_index]``, documents labelled train/validation; fills ``stats``.

  ``files`` is ``corpus.resolve_inputs``'s list (``["stdlib"]`` included); ``fs`` opens it
  (``corpus.iter_documents``; default roberta_tf.common.files).
  """
  docs = corpus.iter_documents([files[file_index]], text_field, stats, max_line_bytes, fs=fs)
  group: list[tuple[str, list[str]]] = []
  size, index = 0, 0
  last_file = file_index == len(files) - 1
  for doc_index, doc in enumerate(docs):
    if size >= group_bytes:
      yield Group((file_index, index), group)
      group, size, index = [], 0, index + 1
    group.append((document_split(seed, validation_fraction, file_index, doc_index), doc))
    size += sum(len(s) for s in doc)
  if group:
    yield Group((file_index, index), group, last_in_corpus=last_file)


def last_document_split(counts: dict[str, int], split: str, validation_fraction: float) -> str:
  """The corpus's last document's split, given ``counts`` of documents per split (all of them,
  the last included, labelled ``split``): the rule that leaves neither split empty."""
  others = dict(counts)
  others[split] -= 1
  if others[TRAIN] == 0:  # also a one-document corpus: train it, no validation split
    return TRAIN
  if validation_fraction > 0 and others[VALIDATION] == 0:
    return VALIDATION
  return split


def apply_last_document_rule(group: Group, counts: dict[str, int],
                             validation_fraction: float) -> Group:
  """``group`` with its last document moved per ``last_document_split`` if it ends the corpus;
  ``counts`` are updated to match."""
  if not group.last_in_corpus:
    return group
  split, doc = group.docs[-1]
  new = last_document_split(counts, split, validation_fraction)
  if new == split:
    return group
  counts[split] -= 1
  counts[new] += 1
  return dataclasses.replace(group, docs=group.docs[:-1] + [(new, doc)])
