"""Writing shards: TFRecord files under temporary names, renamed together when all are done.

Both engines write a shard in one go from its records in write order
(data_prep/block_order.py, data_prep/external_sort.py): ``write_shard`` writes
``<name>.tmp``; ``commit`` renames a run's shards once every split is complete and
``remove_temp`` removes them on failure. (Not `roberta_tf.common.atomic_write`: a run's shards
are committed together, and `dataset_info.json` -- written last, atomically -- is what marks
the directory complete.)
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable

import tensorflow as tf

from data_prep import block_order
from roberta_tf.data import dataset_info

TMP_SUFFIX = ".tmp"
COMPRESSIONS = dataset_info.COMPRESSIONS


def shard_name(split: str, index: int, num_shards: int) -> str:
  return f"{split}-{index:05d}-of-{num_shards:05d}.tfrecord"


@dataclasses.dataclass
class ShardStats:
  file: str
  num_sequences: int = 0
  num_tokens: int = 0


def write_shard(output_dir: str, name: str, entries: Iterable[block_order.Entry],
                compression: str) -> ShardStats:
  """Writes the records of ``entries`` (in the order given) to ``output_dir/<name>.tmp``."""
  if compression not in COMPRESSIONS:
    raise ValueError(f"compression={compression!r}; expected one of {sorted(COMPRESSIONS)}")
  stats = ShardStats(name)
  options = tf.io.TFRecordOptions(compression_type=COMPRESSIONS[compression])
  with tf.io.TFRecordWriter(os.path.join(output_dir, name + TMP_SUFFIX), options) as w:
    for entry in entries:
      w.write(entry[5])
      stats.num_sequences += 1
      stats.num_tokens += entry[4]
  return stats


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
