"""Writing packed blocks to TFRecord shards: balanced, shuffled, under temporary names.

A ``SplitWriter`` owns the shards of one split (``train-00000-of-00016.tfrecord`` ...). Blocks go
through a bounded shuffle buffer (seeded, so the output is deterministic) and then round-robin to
the shards, so shards differ by at most one record and a shard is not one document's run of
blocks. Files are written as ``<name>.tmp`` and renamed by ``commit`` once every split is
complete; ``abort`` removes them. (Not `roberta_tf.common.atomic_write`: a run's shards are
committed together, after every split is written, and `dataset_info.json` -- written last,
atomically -- is what marks the directory complete.) Memory is the buffer: ``shuffle_buffer``
serialized records.
"""

from __future__ import annotations

import dataclasses
import os
import random

import numpy as np
import tensorflow as tf

from roberta_tf.data import dataset_info, example_spec

TMP_SUFFIX = ".tmp"
COMPRESSIONS = dataset_info.COMPRESSIONS


def shard_name(split: str, index: int, num_shards: int) -> str:
  return f"{split}-{index:05d}-of-{num_shards:05d}.tfrecord"


@dataclasses.dataclass
class ShardStats:
  file: str
  num_sequences: int = 0
  num_tokens: int = 0


class SplitWriter:
  """Writes one split's blocks to ``num_shards`` TFRecord files in ``output_dir``."""

  def __init__(self, output_dir: str, split: str, num_shards: int, compression: str = "none",
               shuffle_buffer: int = 4096, seed: int = 0):
    if num_shards < 1:
      raise ValueError(f"{split}: num_shards={num_shards} must be >= 1")
    if compression not in COMPRESSIONS:
      raise ValueError(f"compression={compression!r}; expected one of {sorted(COMPRESSIONS)}")
    self.split = split
    self.shards = [ShardStats(shard_name(split, i, num_shards)) for i in range(num_shards)]
    self._paths = [os.path.join(output_dir, s.file) for s in self.shards]
    self._options = tf.io.TFRecordOptions(compression_type=COMPRESSIONS[compression])
    self._writers: list[tf.io.TFRecordWriter] | None = None
    self._buffer: list[tuple[bytes, int]] = []
    self._buffer_size = max(1, shuffle_buffer)
    # Each split draws from its own stream, so one split's size does not shift the other's order.
    self._rng = random.Random(f"{seed}/{split}")
    self._next = 0
    self._closed = False
    self.num_added = 0

  @property
  def temp_paths(self) -> list[str]:
    return [p + TMP_SUFFIX for p in self._paths]

  def add(self, ids: np.ndarray) -> None:
    """Queues one block (int [L], ``<s>`` ... ``</s>``) for writing."""
    if self._writers is None:  # opened lazily: an empty corpus fails before any file exists
      self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.temp_paths]
    self._buffer.append((example_spec.serialize(ids), len(ids)))
    self.num_added += 1
    if len(self._buffer) >= self._buffer_size:
      # Swap a random record to the end and write it: a reservoir-style bounded shuffle.
      i = self._rng.randrange(len(self._buffer))
      self._buffer[i], self._buffer[-1] = self._buffer[-1], self._buffer[i]
      self._write(*self._buffer.pop())

  def close(self) -> list[ShardStats]:
    """Writes what is buffered and closes the temporary files; returns per-shard counts."""
    if self._writers is None:
      self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.temp_paths]
    self._rng.shuffle(self._buffer)
    for record, length in self._buffer:
      self._write(record, length)
    self._buffer = []
    for w in self._writers:
      w.close()
    self._closed = True
    return self.shards

  def commit(self) -> list[str]:
    """Renames the closed temporary files to their final names; returns the final paths."""
    assert self._closed, "close() first"
    for tmp, path in zip(self.temp_paths, self._paths, strict=True):
      os.replace(tmp, path)
    return self._paths

  def abort(self) -> None:
    """Closes and removes the temporary files (on failure)."""
    for w in self._writers or []:
      try:
        w.close()
      except Exception:  # pylint: disable=broad-except
        pass
    for tmp in self.temp_paths:
      if os.path.exists(tmp):
        os.remove(tmp)

  def _write(self, record: bytes, length: int) -> None:
    shard = self._next
    self._next = (self._next + 1) % len(self.shards)
    self._writers[shard].write(record)
    self.shards[shard].num_sequences += 1
    self.shards[shard].num_tokens += length
