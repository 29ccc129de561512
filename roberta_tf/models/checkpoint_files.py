"""A directory's checkpoints as the files on disk say, not only as its `checkpoint` index says.

tf.train.CheckpointManager writes `ckpt-N.data-0000k-of-0000K` and `ckpt-N.index` (through a
`ckpt-N_temp/` directory, renamed when complete), then names the newest in the `checkpoint`
index file and deletes the oldest beyond its `max_to_keep`. `tf.train.latest_checkpoint` reads
only that index: without it (a copied model dir), or when its newest entry lost a file, it
reports no checkpoint at all, and a run would start over and overwrite the others. Here:

- `steps_on_disk`: every N with a `ckpt-N.index` or `ckpt-N.data-*` file.
- `problem(prefix)`: None for a complete checkpoint, else what is wrong, naming the file: the
  index or a data shard missing, an unreadable index, a data file shorter than the tensors its
  index lists (truncated). Cheap: reads the index, not the data. Damage inside the data (flipped
  bytes) shows when it is read: `read_problem` names the files then.
- `newest_complete`, `damaged_message` (what evaluate/export say about a damaged newest
  checkpoint, with the complete one to pass instead), `rebuild_index` (the `checkpoint` file
  from the files on disk), `move_aside` (a damaged checkpoint's files into `damaged/`, so a
  resumed run never overwrites them), `remove_stale_temps` (what a killed save leaves).

Any scheme (common/files.py). On an object store TF's rename of `ckpt-N_temp/` is a copy, file
by file, so a killed save can leave a `ckpt-N` with some files: `problem` judges from the files
themselves (index readable, every data shard there and as long as the index says), so such a
checkpoint is never taken as complete; a listing that lags a save shows an older newest
checkpoint, never a partial one as complete.
"""

from __future__ import annotations

import re

import numpy as np
import tensorflow as tf

from roberta_tf.common import atomic_write, error_text, files

CHECKPOINT_NAME = "ckpt"
INDEX_FILE = "checkpoint"
DAMAGED_DIR = "damaged"
_FILE = re.compile(rf"^{CHECKPOINT_NAME}-(\d+)\.(?:index|data-\d+-of-\d+)$")
_DATA = re.compile(r"\.data-(\d+)-of-(\d+)$")


class CheckpointDamagedError(ValueError):
  """A checkpoint's files are missing, truncated or unreadable; the message names them."""


def prefix_of(directory: str, step: int) -> str:
  return files.join(directory, f"{CHECKPOINT_NAME}-{step}")


def step_of(prefix: str) -> int | None:
  m = re.search(rf"{CHECKPOINT_NAME}-(\d+)$", prefix)
  return int(m.group(1)) if m else None


def steps_on_disk(directory: str) -> list[int]:
  """Sorted steps N with any `ckpt-N.index` or `ckpt-N.data-*` file in `directory`."""
  try:
    names = files.listdir(directory)
  except OSError:
    return []
  return sorted({int(m.group(1)) for m in map(_FILE.match, names) if m})


def files_of(prefix: str) -> list[str]:
  """The existing files of checkpoint `prefix` (index and data shards)."""
  return sorted(p for p in files.glob(files.escape(prefix) + ".*")
                if p.endswith(".index") or _DATA.search(p))


def reader(prefix: str):
  """A CheckpointReader of `prefix`. Not `tf.train.load_checkpoint`: it first asks whether the
  prefix is a directory, which ram:// answers yes for any prefix of a stored name."""
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def variable_names(prefix: str) -> list[str]:
  """The names of the variables checkpoint `prefix` holds (`tf.train.list_variables`'s)."""
  return sorted(reader(prefix).get_variable_to_shape_map())


def problem(prefix: str) -> str | None:
  """None when checkpoint `prefix` looks complete, else what is wrong, naming the file."""
  name = files.basename(prefix)
  if not files.isfile(prefix + ".index"):
    return f"{name}.index is missing"
  data = [p for p in files_of(prefix) if _DATA.search(p)]
  if not data:
    return f"its data file ({name}.data-00000-of-00001) is missing"
  shards = int(_DATA.search(data[0]).group(2))
  for k in range(shards):
    path = f"{prefix}.data-{k:05d}-of-{shards:05d}"
    if not files.isfile(path):
      return f"{files.basename(path)} is missing"
  try:
    found = reader(prefix)
    shapes, dtypes = found.get_variable_to_shape_map(), found.get_variable_to_dtype_map()
  except (tf.errors.OpError, ValueError, IndexError, RuntimeError) as e:
    return f"{name}.index is unreadable ({error_text.tf_message(e)})"
  needed = sum(int(np.prod(shapes[k], dtype=np.int64)) * d.size
               for k, d in dtypes.items() if d != tf.string)
  have = sum(files.getsize(f"{prefix}.data-{k:05d}-of-{shards:05d}") for k in range(shards))
  if have < needed:
    which = f"{name}.data-00000-of-00001" if shards == 1 else f"{name}.data-* ({shards} files)"
    return f"{which} is truncated ({have:,} bytes; its index lists {needed:,} bytes of tensors)"
  return None


def read_problem(prefix: str, exc: BaseException) -> str:
  """What a failed read of checkpoint `prefix` means, naming its data files."""
  data = ", ".join(files.basename(p) for p in files_of(prefix) if _DATA.search(p)) or (
      files.basename(prefix) + ".data-*")
  why = error_text.tf_message(exc) if error_text.is_tf_error(exc) else str(exc).strip()
  return f"{data} could not be read ({why or type(exc).__name__}): truncated or corrupt"


def newest_complete(directory: str, below: int | None = None) -> str | None:
  """The prefix of the newest checkpoint (older than step `below`, if given) with no
  `problem`, or None."""
  for step in reversed(steps_on_disk(directory)):
    if below is not None and step >= below:
      continue
    if problem(prefix_of(directory, step)) is None:
      return prefix_of(directory, step)
  return None


def damaged_message(prefix: str, what: str) -> str:
  """`checkpoint P is damaged: <what>; restore its files, or pass --checkpoint=<older>`."""
  step = step_of(prefix)
  older = newest_complete(files.dirname(prefix), below=step) if step is not None else None
  advice = (f"restore its files, or pass --checkpoint={older} (the newest complete one before "
            "it)") if older else "restore its files (no older complete checkpoint is there)"
  return f"checkpoint {prefix} is damaged: {what}; {advice}"


def index_steps(directory: str) -> list[int] | None:
  """The steps the `checkpoint` index file lists (newest last), or None without a readable one."""
  path = files.join(directory, INDEX_FILE)
  if not files.isfile(path):
    return None
  try:
    state = tf.train.get_checkpoint_state(directory)
  except (tf.errors.OpError, ValueError):
    return None
  if state is None:
    return None
  steps = [step_of(p) for p in [*state.all_model_checkpoint_paths, state.model_checkpoint_path]]
  return list(dict.fromkeys(s for s in steps if s is not None))


def rebuild_index(directory: str, keep: int) -> list[str]:
  """Writes the `checkpoint` index file naming the newest `keep` complete checkpoints on disk
  (older ones stay on disk, unlisted, as CheckpointManager leaves them); returns their names."""
  complete = [s for s in steps_on_disk(directory) if problem(prefix_of(directory, s)) is None]
  names = [f"{CHECKPOINT_NAME}-{s}" for s in complete[-keep:]]
  if names:
    times = [files.getmtime(files.join(directory, n + ".index")) for n in names]
    # The CheckpointState text proto CheckpointManager writes. last_preserved_timestamp below
    # every listed checkpoint: all of them may rotate out as usual (none is kept forever).
    atomic_write.write_text(files.join(directory, INDEX_FILE), "".join(
        [f'model_checkpoint_path: "{names[-1]}"\n']
        + [f'all_model_checkpoint_paths: "{n}"\n' for n in names]
        + [f"all_model_checkpoint_timestamps: {t!r}\n" for t in times]
        + [f"last_preserved_timestamp: {min(times) - 1.0!r}\n"]))
  return names


def move_aside(prefix: str) -> str:
  """Moves checkpoint `prefix`'s files into `<its dir>/damaged/` (a numbered subdirectory if
  that already holds files of the same name); returns where they went."""
  directory = files.dirname(prefix)
  dest = files.join(directory, DAMAGED_DIR)
  moved = files_of(prefix)
  n = 1
  while any(files.exists(files.join(dest, files.basename(f))) for f in moved):
    n += 1
    dest = files.join(directory, DAMAGED_DIR, str(n))
  files.makedirs(dest)
  for f in moved:
    files.rename(f, files.join(dest, files.basename(f)))
  return dest


def remove_stale_temps(directory: str) -> list[str]:
  """Removes what an interrupted save leaves in `directory`: `ckpt-N_temp/` directories, TF's
  `*.tempstate*` files and `checkpoint.tmp*` index files. Only call it while no other process
  writes there (the training lock, checkpointing.DirectoryLock). Returns the names removed."""
  removed = []
  try:
    names = files.listdir(directory)
  except OSError:
    return removed
  for name in sorted(names):
    path = files.join(directory, name)
    if re.fullmatch(rf"{CHECKPOINT_NAME}-\d+_temp", name) and files.isdir(path):
      files.rmtree(path, ignore_errors=True)
    elif ".tempstate" in name or name.startswith(INDEX_FILE + ".tmp"):
      if not files.isfile(path):
        continue
      files.remove(path)
    else:
      continue
    removed.append(name)
  return removed
