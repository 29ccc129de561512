"""Writing packed blocks to TFRecord shards, under temporary names.

A ``SplitWriter`` owns the shards of one split (``train-00000-of-00016.tfrecord`` ...); the
caller says which shard each block goes to (data_prep/group_packing.py deals them round-robin,
so shards differ by at most one record). Files are written as ``<name>.tmp`` and renamed by
``commit`` once every split is complete; ``abort`` removes them. (Not
`roberta_tf.common.atomic_write`: a run's shards are committed together, after every split is
written, and `dataset_info.json` -- written last, atomically -- is what marks the directory
complete.) Nothing is buffered: a block is written when it is added.
"""

from __future__ import annotations

import dataclasses
import os

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

  def __init__(self, output_dir: str, split: str, num_shards: int, compression: str = "none"):
    if num_shards < 1:
      raise ValueError(f"{split}: num_shards={num_shards} must be >= 1")
    if compression not in COMPRESSIONS:
      raise ValueError(f"compression={compression!r}; expected one of {sorted(COMPRESSIONS)}")
    self.split = split
    self.shards = [ShardStats(shard_name(split, i, num_shards)) for i in range(num_shards)]
    self._paths = [os.path.join(output_dir, s.file) for s in self.shards]
    self._options = tf.io.TFRecordOptions(compression_type=COMPRESSIONS[compression])
    self._writers: list[tf.io.TFRecordWriter] | None = None
    self._closed = False
    self.num_added = 0

  @property
  def temp_paths(self) -> list[str]:
    return [p + TMP_SUFFIX for p in self._paths]

  def add(self, shard: int, block: np.ndarray) -> None:
    """Writes one block (int [L], ``<s>`` ... ``</s>``, or a pair example) to shard ``shard``."""
    self.add_record(shard, example_spec.serialize_block(block), len(block))

  def add_record(self, shard: int, record: bytes, length: int) -> None:
    """Writes one serialized block of ``length`` ids to shard ``shard``."""
    if self._writers is None:  # opened lazily: an empty corpus fails before any file exists
      self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.temp_paths]
    self._writers[shard].write(record)
    self.shards[shard].num_sequences += 1
    self.shards[shard].num_tokens += length
    self.num_added += 1

  def close(self) -> list[ShardStats]:
    """Closes the temporary files (creating empty ones if nothing was added); returns counts."""
    if self._writers is None:
      self._writers = [tf.io.TFRecordWriter(p, self._options) for p in self.temp_paths]
    for w in self._writers:
      w.close()
    self._closed = True
    return self.shards

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


def commit(output_dir: str, names: list[str]) -> None:
  """Renames the closed temporary files of shards ``names`` to their final names."""
  for name in names:
    os.replace(os.path.join(output_dir, name + TMP_SUFFIX), os.path.join(output_dir, name))


def remove_temp(output_dir: str, names: list[str]) -> None:
  """Removes the temporary files of shards ``names`` that exist (on failure, or unused)."""
  for name in names:
    path = os.path.join(output_dir, name + TMP_SUFFIX)
    if os.path.exists(path):
      os.remove(path)
