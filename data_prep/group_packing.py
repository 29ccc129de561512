"""Encoding, packing and keying of document groups (data_prep/doc_groups.py).

Both engines run the same three functions, so they produce the same keyed blocks:

- ``encoded_batches``: a group stream's sentences in encoder batches; each sentence is encoded
  on its own, so the batch boundaries never change an id.
- ``pack_groups``: the encoded stream → per group, per split, the packed blocks in corpus order
  (data_prep/packing.py; packing crosses documents within a group only).
- ``group_entries``: a packed group's blocks serialized and keyed (data_prep/block_order.py):
  the key picks the shard and the place in it, so the engines then only route and sort.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import numpy as np

from data_prep import block_order, doc_groups, pair_packing, sentence_encoders
from data_prep import packing as packing_lib
from roberta_tf.data import example_spec

# split -> blocks (int64 [<= max_seq_len], or pair_packing.PairExample) in corpus order
Blocks = dict[str, list[np.ndarray]]


def encoded_batches(groups: Iterable[doc_groups.Group], encode: sentence_encoders.Encoder,
                    batch_sentences: int, num_workers: int | None = 1, packing: str = ""):
  """``(batch, values, row_splits)`` for the groups' sentences, in order; segment keys are
  ``(group_key, split)``. ``num_workers`` encoding threads (sentence_encoders.encode_batches).
  For the pair packings each line is first cut into sentences (pair_packing.split_document)."""
  split = (pair_packing.split_document if packing in packing_lib.PAIR_PACKINGS
           else lambda doc: doc)
  docs = ((((g.key, s), split(doc)) for s, doc in g.docs) for g in groups)
  batches = sentence_encoders.batch_documents(
      (d for group_docs in docs for d in group_docs), batch_sentences)
  return sentence_encoders.encode_batches(batches, encode, num_workers)


def pack_groups(encoded, *, max_seq_len: int, packing: str, bos_id: int, eos_id: int,
                seed: int = 0) -> Iterator[tuple[doc_groups.GroupKey, Blocks]]:
  """Packs ``encoded_batches``' stream; yields ``(group_key, blocks per split)`` per group as
  soon as the next group starts (and the last at the end). The pair packings draw their coins
  from (seed, split, group key) (data_prep/pair_packing.py)."""
  key, blocks, packers = None, {}, {}

  def finish():
    for packer in packers.values():
      packer.finish()
    return key, blocks

  for batch, values, row_splits in encoded:
    # The packer holds int64 ids: convert the batch once, so each sentence is a view, not a copy.
    values = np.asarray(values, np.int64)
    i = 0
    for (group_key, split), count, ends_document in batch.segments:
      if group_key != key:
        if key is not None:
          yield finish()
        key, blocks, packers = group_key, {}, {}
      if split not in packers:
        blocks[split] = []
        packers[split] = packing_lib.make_packer(
            max_seq_len, packing, bos_id, eos_id, blocks[split].append,
            seed_key=f"{seed}/pairs/{split}/{group_key[0]}/{group_key[1]}")
      packer = packers[split]
      for j in range(i, i + count):
        packer.add_sentence(values[row_splits[j]:row_splits[j + 1]])
      i += count
      if ends_document:
        packer.end_document()
  if key is not None:
    yield finish()


def group_entries(group_key: doc_groups.GroupKey, blocks: Blocks, *, seed: int
                  ) -> Iterator[tuple[str, block_order.Entry]]:
  """``(split, entry)`` for each of a packed group's blocks: serialized and keyed for the global
  shuffle (data_prep/block_order.py)."""
  for split, split_blocks in blocks.items():
    serialized = [(example_spec.serialize_block(b), len(b)) for b in split_blocks]
    for entry in block_order.entries(serialized, seed=seed, split=split,
                                     file_index=group_key[0], group_index=group_key[1]):
      yield split, entry
