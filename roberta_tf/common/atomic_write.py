"""Atomic writes: a file or directory appears under its final name complete, or not at all.

Everything that a later stage (or a user) takes as finished -- config.json, dataset_info.json,
vocab files, checkpoints' model dirs, SavedModels, results -- is written here. Locally (and on
URLs whose file system renames atomically: ram://, hdfs://): under a temporary name beside the
target (same file system), then renamed over it. On an object store (gs://, s3://: a rename is
a copy) a file is written locally and uploaded as one object, which appears whole or not at
all; a directory is written locally and uploaded file by file with the files its readers look
for first (saved_model.pb, config.json, dataset_info.json, ...: `COMPLETION_FILES`) last, so a
reader never sees them before the rest; an old directory there is deleted first.

An exception (disk full, Ctrl-C) removes the temporary and leaves an existing target as it
was; a failure to write raises WriteError naming the target, not the temporary. Temporary
names are `<target>.tmp-<pid>` (on a URL `<target>.tmp-<host>-<pid>`) so that concurrent
writers never share one; what a killed process left (kill -9: no cleanup ran) is removed by
the next write of the same target from the same host, once its pid is no longer alive (a live
writer's temporary is never touched).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Iterator
from typing import Any

from roberta_tf.common import error_text, files

# The files a reader of a finished directory opens first: uploaded last on object stores.
COMPLETION_FILES = ("saved_model.pb", "fingerprint.pb", "keras_metadata.pb", "config.json",
                    "metadata.json", "dataset_info.json", "tokenizer.json", "checkpoint")


class WriteError(OSError):
  """Writing `filename` failed (disk full, file-size limit, permissions): `filename` is the
  final path, whatever temporary name the writer used."""


def _tmp_name(path: str) -> str:
  """`<path>.tmp-<pid>` locally; on a URL (seen from many hosts) `<path>.tmp-<host>-<pid>`."""
  if files.is_url(path):
    return f"{files.normalize(path)}.tmp-{socket.gethostname()}-{os.getpid()}"
  return f"{os.path.normpath(path)}.tmp-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return False
  except OSError:  # EPERM: alive, another user's
    return True
  return True


def remove_stale_temps(path: str) -> list[str]:
  """Removes `<path>.tmp-<pid>` files or directories whose writer is gone (its pid is not
  alive; this process's own pid is left to its writer). Returns what was removed."""
  path = files.normalize(path)
  # A URL's temporaries name their host: only this host's dead writers are known to be gone.
  own = (rf"\.tmp-{re.escape(socket.gethostname())}-(\d+)" if files.is_url(path)
         else r"\.tmp-(\d+)")
  removed = []
  for tmp in files.glob(files.escape(path) + ".tmp-*"):
    m = re.fullmatch(own, tmp[len(path):])
    if not m or int(m.group(1)) == os.getpid() or _pid_alive(int(m.group(1))):
      continue
    if files.isdir(tmp) and not os.path.islink(tmp):
      files.rmtree(tmp, ignore_errors=True)
    else:
      with contextlib.suppress(OSError):
        files.remove(tmp)
    removed.append(tmp)
  return removed


def _as_write_error(e: BaseException, tmp: str, path: str) -> BaseException:
  """`e` as a WriteError naming `path` when it is about the temporary `tmp`, else `e`."""
  if not isinstance(e, Exception) or tmp not in str(e) and getattr(e, "filename", None) != tmp:
    return e
  if not (isinstance(e, OSError) or error_text.is_tf_error(e)):
    return e
  if error_text.is_disk_full(e):
    code = errno.EFBIG if "File too large" in str(e) else errno.ENOSPC
  else:
    code = getattr(e, "errno", None) or errno.EIO
  return WriteError(code, error_text.one_line(e).replace(tmp, path), path)


def _raise_named(e: BaseException, tmp: str, path: str):
  """Re-raises `e`, as a WriteError naming `path` when it is about the temporary `tmp`."""
  failure = _as_write_error(e, tmp, path)
  if failure is e:
    raise e
  raise failure from e


@contextlib.contextmanager
def _publish_errors(path: str) -> Iterator[None]:
  """A failure to publish to URL `path` as a WriteError naming it."""
  try:
    yield
  except WriteError:
    raise
  except Exception as e:
    raise WriteError(errno.EIO, f"cannot write {path}: {error_text.one_line(e)}", path) from e


def _umask() -> int:
  """The process umask, read without changing it where /proc has it (Linux)."""
  with contextlib.suppress(OSError, ValueError):
    with open("/proc/self/status", encoding="ascii") as f:
      for line in f:
        if line.startswith("Umask:"):
          return int(line.split()[1], 8)
  mask = os.umask(0o022)
  os.umask(mask)
  return mask


@contextlib.contextmanager
def atomic_path(path: str, *, umask_mode: bool = False) -> Iterator[str]:
  """Yields a temporary file path for a writer that takes a path (e.g. safetensors'
  `save_file`); renamed to `path` when the block ends without an exception.

  umask_mode: give the file the mode `open()` gives a new file (0666 less the umask), for
    writers that create private files (safetensors writes 0600).

  On a URL the yielded path is a local temporary file (the writer may be a library that only
  writes local files), published by `_publish_file`.
  """
  if files.is_url(path):
    with _local_temp_file(path) as tmp:
      yield tmp
      _publish_file(tmp, path)
    return
  remove_stale_temps(path)
  tmp = _tmp_name(path)
  try:
    yield tmp
    if umask_mode:
      os.chmod(tmp, 0o666 & ~_umask())
    os.replace(tmp, path)
  except BaseException as e:
    with contextlib.suppress(OSError):
      os.remove(tmp)
    _raise_named(e, tmp, path)


@contextlib.contextmanager
def _local_temp_file(path: str) -> Iterator[str]:
  """A local temporary file for `path`'s content, removed afterwards; errors name `path`."""
  fd, tmp = tempfile.mkstemp(prefix="roberta_tf-", suffix="-" + files.basename(path))
  os.close(fd)
  try:
    yield tmp
  except BaseException as e:
    _raise_named(e, tmp, path)
  finally:
    with contextlib.suppress(OSError):
      os.remove(tmp)


def _publish_file(local: str, path: str) -> None:
  """Puts local file `local` at URL `path` whole: uploaded beside it and renamed where the file
  system renames atomically, else uploaded as one object (object stores show it whole)."""
  with _publish_errors(path):
    if files.has_atomic_move(path):
      remove_stale_temps(path)
      tmp = _tmp_name(path)
      files.copy(local, tmp, overwrite=True)
      try:
        files.rename(tmp, path, overwrite=True)
      except BaseException:
        with contextlib.suppress(Exception):
          files.remove(tmp)
        raise
    else:
      files.copy(local, path, overwrite=True)



@contextlib.contextmanager
def atomic_file(path: str, mode: str = "w", encoding: str | None = "utf-8",
                newline: str | None = None):
  """`open(path, mode)` for writing, made atomic: yields the open temporary file."""
  binary = "b" in mode
  with atomic_path(path) as tmp:
    with open(tmp, mode, encoding=None if binary else encoding,
              newline=None if binary else newline) as f:
      yield f


def write_text(path: str, text: str, newline: str | None = None) -> str:
  """Writes `text` (UTF-8) atomically; returns `path`."""
  with atomic_file(path, newline=newline) as f:
    f.write(text)
  return path


def write_json(path: str, doc: Any, *, indent: int | None = 2, sort_keys: bool = True,
               ensure_ascii: bool = True) -> str:
  """Writes `doc` as JSON (plus a final newline) atomically; returns `path`."""
  return write_text(path, json.dumps(doc, indent=indent, sort_keys=sort_keys,
                                     ensure_ascii=ensure_ascii) + "\n")


def copy_file(src: str, dst: str) -> str:
  """Copies `src` to `dst` atomically; returns `dst`."""
  with atomic_path(dst) as tmp:
    files.copy(src, tmp, overwrite=True)
  return dst


@contextlib.contextmanager
def atomic_dir(path: str) -> Iterator[str]:
  """Yields a fresh temporary directory; when the block succeeds it replaces `path` (an
  existing directory there is removed first), else it is deleted.

  On a URL the yielded directory is local and is published by `_publish_dir`.
  """
  if files.is_url(path):
    with tempfile.TemporaryDirectory(prefix="roberta_tf-") as tmp:
      try:
        yield tmp
      except BaseException as e:
        _raise_named(e, tmp, path)
      _publish_dir(tmp, files.normalize(path))
    return
  path = os.path.normpath(path)
  remove_stale_temps(path)
  tmp = _tmp_name(path)
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  try:
    yield tmp
  except BaseException as e:
    shutil.rmtree(tmp, ignore_errors=True)
    _raise_named(e, tmp, path)
  if os.path.isdir(path):
    shutil.rmtree(path)
  os.replace(tmp, path)


def _publish_dir(local: str, path: str) -> None:
  """Puts local directory `local` at URL `path`, replacing what is there: uploaded beside it
  and renamed where renames are atomic; on an object store the old directory is deleted and
  the files uploaded with COMPLETION_FILES last."""
  with _publish_errors(path):
    if files.has_atomic_move(path):
      remove_stale_temps(path)
      tmp = _tmp_name(path)
      files.rmtree(tmp, ignore_errors=True)
      try:
        files.copy_tree(local, tmp)
        if files.exists(path):
          files.rmtree(path)
        files.rename(tmp, path, overwrite=True)
      except BaseException:
        files.rmtree(tmp, ignore_errors=True)
        raise
    else:
      if files.exists(path):
        files.rmtree(path)
      files.copy_tree(local, path, last=COMPLETION_FILES)

