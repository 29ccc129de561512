"""Which shard each packed block goes to, and where in it: build_shards' global shuffle.

Every block has a position ``(file_index, group_index, block_index)`` in its split
(data_prep/doc_groups.py: files in sorted order, a file's document groups, a group's blocks in
packing order) and a key: a 64-bit hash of (seed, split, position). The key alone decides
(``ORDER_GLOBAL``, the default):

- the shard: ``key % num_shards``;
- the place in the shard: records are written sorted by ``(key, position)``.

So every shard is a uniform random sample of its split, in uniformly random order, at any
corpus size and shard count: a window of any ``W`` consecutive records of a shard is a random
sample of the whole corpus (sources mixed in proportion), which is what the reader's windowed
shuffle (roberta_tf/data/pipeline.py) needs when a shard holds far more than its window. The
position breaks the (astronomically rare) ties between equal keys, so the order is total.
Keys are pure functions of positions, so the local and the Beam engine agree byte for byte
whatever the order work is done in. Shard sizes are multinomial: they differ by about
``sqrt(n / num_shards)`` records, not by at most one as in a round-robin deal.

``ORDER_CORPUS`` (tests only: ``shuffle_blocks=False``): the same shards, each in corpus
order, i.e. sorted by position.
"""

from __future__ import annotations

import hashlib

from roberta_tf.data import dataset_info

ORDER_GLOBAL = dataset_info.GLOBAL_SHUFFLE
ORDER_CORPUS = "corpus"

Position = tuple[int, int, int]  # (file_index, group_index, block_index): corpus order
# (key, file_index, group_index, block_index, num_ids, serialized record): one block, ready to
# be sorted and written; the tuple sorts by (key, position).
Entry = tuple[int, int, int, int, int, bytes]


def block_key(seed: int, split: str, position: Position) -> int:
  """The block's 64-bit key (blake2b: stable across runs, machines and Python versions)."""
  text = f"{seed}/order/{split}/{position[0]}/{position[1]}/{position[2]}"
  return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def shard_of(key: int, num_shards: int) -> int:
  """The shard a key goes to (low bits; the order inside a shard uses the whole key)."""
  return key % num_shards


def entries(blocks: list[tuple[bytes, int]], *, seed: int, split: str, file_index: int,
            group_index: int) -> list[Entry]:
  """One group's serialized blocks ``[(record, num_ids)]`` of ``split`` as entries."""
  return [(block_key(seed, split, (file_index, group_index, i)), file_index, group_index, i,
           length, record) for i, (record, length) in enumerate(blocks)]


def sort_key(order: str):
  """The key function that sorts entries into write order for ``order``."""
  if order == ORDER_GLOBAL:
    return lambda e: e[:4]
  if order == ORDER_CORPUS:
    return lambda e: e[1:4]
  raise ValueError(f"unknown block order {order!r}")
