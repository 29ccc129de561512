"""Sorting a shard's records when the shard may not fit in memory: spill files, key buckets.

A spill file holds entries (data_prep/block_order.py: ``(key, file, group, block, num_ids,
record)``) one after another, each a fixed header and the serialized record. ``sorted_entries``
gives a spill file's entries back in write order: sorted in memory when the file is at most
``sort_bytes``; otherwise split by key range into buckets (one streaming pass; each bucket
about half the budget, as keys are uniform) that are sorted one at a time, in key order,
recursively. Memory is then one bucket whatever the shard's size, and disk at most the shard
twice. Buckets are ranges of the key, so the order (by key, then position) does not depend on
how many there are: an engine may bucket differently (the Beam engine buckets before its
GroupByKey) and still write the same bytes.

Spill files are local scratch files (the local engine puts them beside a local --output_dir or
in a temporary directory: data_prep/shard_builder.py), hence the plain file calls here. The Beam
engine writes its sorted buckets through Beam's file systems with ``write_entries`` and reads
them with ``iter_entries``: the same format on any file object.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Iterator
from typing import BinaryIO

from data_prep import block_order

# key, file_index, group_index, block_index, num_ids, record bytes (little-endian, fixed size)
HEADER = struct.Struct("<QIIIII")
KEY_SPACE = 1 << 64
# Spill bytes sorted in memory at once (Python's objects add ~10-40% on top). Larger budgets
# sort in fewer passes; the output is the same for any budget.
DEFAULT_SORT_BYTES = 256 << 20


def entry_bytes(entry: block_order.Entry) -> int:
  """The entry's size in a spill file."""
  return HEADER.size + len(entry[5])


class SpillWriter:
  """Appends entries to a new spill file at ``path`` (buffered; ``close`` when done)."""

  def __init__(self, path: str):
    self.path = path
    self.num_bytes = 0
    self._f = open(path, "wb", buffering=1 << 16)  # local-only: a spill file (local scratch)

  def add(self, entry: block_order.Entry) -> None:
    self.num_bytes += _write_entry(self._f, entry)

  def close(self) -> None:
    self._f.close()


def _write_entry(f: BinaryIO, entry: block_order.Entry) -> int:
  key, file_index, group_index, block_index, num_ids, record = entry
  f.write(HEADER.pack(key, file_index, group_index, block_index, num_ids, len(record)))
  f.write(record)
  return HEADER.size + len(record)


def write_entries(f: BinaryIO, entries: Iterable[block_order.Entry]) -> int:
  """Writes ``entries`` to the binary file object ``f`` in spill format; returns the bytes."""
  return sum(_write_entry(f, e) for e in entries)


def write_spill(path: str, entries: Iterable[block_order.Entry]) -> int:
  """Writes ``entries`` to a new spill file; returns its size in bytes."""
  w = SpillWriter(path)
  try:
    for e in entries:
      w.add(e)
  finally:
    w.close()
  return w.num_bytes


def read_entries(path: str) -> Iterator[block_order.Entry]:
  """The entries of a spill file, in file order."""
  with open(path, "rb", buffering=1 << 20) as f:  # local-only: a spill file (local scratch)
    yield from iter_entries(f, path)


def iter_entries(f: BinaryIO, name: str) -> Iterator[block_order.Entry]:
  """The entries of spill-format binary file object ``f`` (named ``name`` in errors)."""
  while head := f.read(HEADER.size):
    if len(head) < HEADER.size:
      raise OSError(f"spill file {name} is truncated (was the disk full?)")
    key, file_index, group_index, block_index, num_ids, size = HEADER.unpack(head)
    record = f.read(size)
    if len(record) < size:
      raise OSError(f"spill file {name} is truncated (was the disk full?)")
    yield key, file_index, group_index, block_index, num_ids, record


def bucket_of(key: int, num_buckets: int, lo: int = 0, hi: int = KEY_SPACE) -> int:
  """The bucket of ``key`` when [lo, hi) is cut into ``num_buckets`` equal ranges."""
  return (key - lo) * num_buckets // (hi - lo)


def _bucket_range(bucket: int, num_buckets: int, lo: int, hi: int) -> tuple[int, int]:
  """The keys ``bucket_of`` puts in ``bucket``: [start, end)."""
  width = hi - lo
  return (lo - (-bucket * width // num_buckets),
          lo - (-(bucket + 1) * width // num_buckets))


def num_buckets(num_bytes: int, sort_bytes: int, order: str) -> int:
  """Key-range buckets for ``num_bytes`` of spill so each fits ``sort_bytes`` (1 in corpus
  order, whose order is not by key: tests only, sorted in memory)."""
  if order != block_order.ORDER_GLOBAL:
    return 1
  return max(1, -(-num_bytes // sort_bytes))


def sorted_entries(path: str, *, order: str, sort_bytes: int = DEFAULT_SORT_BYTES,
                   lo: int = 0, hi: int = KEY_SPACE) -> Iterator[block_order.Entry]:
  """The entries of spill file ``path`` (keys in [lo, hi)) in write order; removes the file
  (and its buckets) once read."""
  size = os.path.getsize(path)  # local-only: a spill file (local scratch)
  if num_buckets(size, sort_bytes, order) == 1 or hi - lo < 2:
    ordered = sorted(read_entries(path), key=block_order.sort_key(order))
    os.remove(path)  # local-only: a spill file (local scratch)
    yield from ordered
    return
  n = 2 * num_buckets(size, sort_bytes, order)  # half the budget each: room for uneven buckets
  writers = [SpillWriter(f"{path}.{b}") for b in range(n)]
  try:
    for e in read_entries(path):
      writers[bucket_of(e[0], n, lo, hi)].add(e)
  finally:
    for w in writers:
      w.close()
  os.remove(path)  # local-only: a spill file (local scratch)
  for b, w in enumerate(writers):
    start, end = _bucket_range(b, n, lo, hi)
    yield from sorted_entries(w.path, order=order, sort_bytes=sort_bytes, lo=start, hi=end)
