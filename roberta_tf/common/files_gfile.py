"""The URL backend of roberta_tf.common.files: `tf.io.gfile` (gs://, s3://, hdfs://, ram://...).

TensorFlow is imported on first use only (local work needs none). A URL is never normalized into
a local path: `os.path.normpath("gs://b/x")` is `gs:/b/x`, a local relative path, so names are
'/'-joined text here. Files open as Python file objects: gfile_stream.GFileRaw under io's
buffered and text layers. files.py picks this backend for every URL; only files.py calls it.

What it answers is what the file system says: stores that list lazily, or that keep stale
entries, are not corrected here (tests/ram_filesystem.py fixes ram://, the test bed's store).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Iterator

from roberta_tf.common import gfile_stream

_HEAD = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# File systems whose rename is atomic (TensorFlow's FileSystem::HasAtomicMove answers true:
# hdfs, local files, the in-memory one). Any other scheme is taken for an object store, where
# a rename is a copy and a delete: the safe side (atomic_write.py uploads whole objects there).
ATOMIC_RENAME_SCHEMES = frozenset({"file", "hdfs", "viewfs", "ram"})


def _gfile():
  import tensorflow as tf  # only for URLs: local work needs no TensorFlow import
  return tf.io.gfile


def _not_found():
  import tensorflow as tf
  return tf.errors.NotFoundError


def split(path: str) -> tuple[str, str]:
  """('gs://', 'b/x/') for 'gs://b/x/'."""
  head = _HEAD.match(path).group(0)
  return head, path[len(head):]


class GFileFiles:
  """files.py's backend for URLs (see files.py for each method's contract)."""

  is_local = False

  # --- names ---

  def join(self, base: str, *parts: str) -> str:
    out = base
    for p in parts:
      out = p if _HEAD.match(p) else (out.rstrip("/") + "/" + p.lstrip("/") if p else out + "/")
    return out

  def normalize(self, path: str) -> str:
    head, rest = split(path)
    return head + rest.rstrip("/")

  def dirname(self, path: str) -> str:
    head, rest = split(self.normalize(path))
    return head + rest.rsplit("/", 1)[0] if "/" in rest else head + rest

  def basename(self, path: str) -> str:
    return self.normalize(path).rsplit("/", 1)[-1]

  def escape(self, path: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", path)

  # --- queries ---

  def exists(self, path: str) -> bool:
    return _gfile().exists(path)

  def isdir(self, path: str) -> bool:
    return _gfile().isdir(path)

  def isfile(self, path: str) -> bool:
    return self.exists(path) and not _gfile().isdir(path)

  def listdir(self, path: str) -> list[str]:
    if not _gfile().isdir(path):
      raise FileNotFoundError(2, "No such directory", path)
    return list({n.rstrip("/") for n in _gfile().listdir(path)})

  def glob(self, pattern: str) -> list[str]:
    return sorted(_gfile().glob(pattern))

  def walk(self, top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    for root, dirs, names in _gfile().walk(top):
      yield root, [d.rstrip("/") for d in dirs], list(names)

  def getsize(self, path: str) -> int:
    return _gfile().stat(path).length

  def getmtime(self, path: str) -> float:
    return _gfile().stat(path).mtime_nsec / 1e9

  def readable(self, path: str) -> bool:
    return self.exists(path)  # no permission query: the read itself will say

  def has_atomic_move(self, path: str) -> bool:
    return split(path)[0][:-3].lower() in ATOMIC_RENAME_SCHEMES

  # --- changes ---

  def makedirs(self, path: str) -> None:
    _gfile().makedirs(path)

  def remove(self, path: str) -> None:
    try:
      _gfile().remove(path)
    except _not_found() as e:
      raise FileNotFoundError(2, "No such file", path) from e

  def rmdir(self, path: str) -> None:
    if self.listdir(path):
      raise OSError(39, "Directory not empty", path)
    with contextlib.suppress(Exception):  # stores without directory entries have none to drop
      _gfile().rmtree(path)

  def rmtree(self, path: str) -> None:
    try:
      _gfile().rmtree(path)
    except _not_found() as e:
      raise FileNotFoundError(2, "No such directory", path) from e

  def rename(self, src: str, dst: str, overwrite: bool) -> None:
    _gfile().rename(src, dst, overwrite=overwrite)

  def copy(self, src: str, dst: str, overwrite: bool) -> None:
    _gfile().copy(src, dst, overwrite=overwrite)

  def open(self, path: str, mode: str, encoding: str | None, errors: str | None,  # noqa: A003
           newline: str | None):
    binary = "b" in mode
    base = mode.replace("b", "").replace("t", "")
    if base == "x":
      if self.exists(path):
        raise FileExistsError(17, "File exists", path)
      base = "w"
    if base == "r" and not self.exists(path):
      raise FileNotFoundError(2, "No such file or directory", path)
    if base == "r" and _gfile().isdir(path):
      raise IsADirectoryError(21, "Is a directory", path)
    raw = gfile_stream.GFileRaw(path, base + "b")
    buffered = io.BufferedReader(raw) if base == "r" else io.BufferedWriter(raw)
    if binary:
      return buffered
    return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline=newline)
