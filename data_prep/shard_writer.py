"""Writing shards: TFRecord files under temporary names, renamed together when all are done.

Both engines write a shard in one go from its records in write order
(data_prep/block_order.py, data_prep/external_sort.py): ``write_shard`` writes
``<name>.tmp``; ``commit`` renames a run's shards once every split is complete and
``remove_temp`` removes them on failure. (Not `roberta_tf.common.atomic_write`: a run's shards
are committed together, and `dataset_info.json` -- written last, atomically -- is what marks
the directory complete.)

``output_dir`` may be a URL (gs://, ram://: TFRecordWriter writes through TF's file systems,
renames and removals go through roberta_tf.common.files; on an object store a rename is a
copy, and dataset_info.json, written last, still marks a complete directory). The Beam engine
writes a shard with ``write_records`` to a worker-local scratch file and copies it through
Beam's file systems (data_prep/beam_engine.py): the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

import tensorflow as tf

from data_prep import block_order
from roberta_tf.common import files as files_lib
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
  return write_records(files_lib.join(output_dir, name + TMP_SUFFIX), name, entries,
                       compression)


def write_records(path: str, name: str, entries: Iterable[block_order.Entry],
                  compression: str) -> ShardStats:
  """Writes the records of ``entries`` (in the order given) as TFRecord file ``path`` (a local
  path or a URL of TF's file systems); returns shard ``name``'s counts."""
  if compression not in COMPRESSIONS:
    raise ValueError(f"compression={compression!r}; expected one of {sorted(COMPRESSIONS)}")
  stats = ShardStats(name)
  options = tf.io.TFRecordOptions(compression_type=COMPRESSIONS[compression])
  with tf.io.TFRecordWriter(path, options) as w:
    for entry in entries:
      w.write(entry[5])
      stats.num_sequences += 1
      stats.num_tokens += entry[4]
  return stats


def commit(output_dir: str, names: list[str]) -> None:
  """Renames the closed temporary files of shards ``names`` to their final names."""
  for name in names:
    files_lib.rename(files_lib.join(output_dir, name + TMP_SUFFIX),
                     files_lib.join(output_dir, name), overwrite=True)


def remove_temp(output_dir: str, names: list[str]) -> None:
  """Removes the temporary files of shards ``names`` that exist (on failure, or unused)."""
  for name in names:
    path = files_lib.join(output_dir, name + TMP_SUFFIX)
    if files_lib.exists(path):
      files_lib.remove(path)
