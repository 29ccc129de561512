"""File access for every path a binary or library takes: local paths and URLs alike.

A path is either local (`runs/base`, `/data/shards`) or a URL (`gs://bucket/shards`,
`ram://model`, `s3://...`, `hdfs://...`: any scheme TensorFlow's file systems register; s3 and
hdfs need their plugin loaded). Local paths go to the operating system (builtins, `os`,
`fcntl`: the exact local semantics, no TensorFlow import); URLs go to `tf.io.gfile`. A URL is
never normalized into a local path (`os.path.normpath("gs://b/x")` is `gs:/b/x`, a local
relative path); an unknown scheme is refused by `check` naming the flag and the registered
schemes.

What differs per scheme, and what this module promises (docs/reliability.md, "Storage"):
- local disks and ram:// rename atomically (`has_atomic_move`); object stores (gs://, s3://)
  copy, and a listing may lag a write. atomic_write.py builds "complete or absent" on that.
- `open` gives Python file objects either way (text or binary, seekable for reading), so
  `gzip`, `json`, `csv` and pyarrow read a URL as they read a local file.
- `local_copy` hands a library that needs a real file (safetensors, tokenizers) a local one.

Only this module (and atomic_write.py, directory_lock.py on top of it) may call `open`, `os`'s
file functions, `glob` or `shutil` on a path: tests/test_file_access.py checks the packages.
URL files are GFiles under io's buffered and text layers (gfile_stream.py, used only here).
"""

from __future__ import annotations

import builtins
import contextlib
import glob as _glob
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

from roberta_tf.common import gfile_stream

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


class UnknownSchemeError(ValueError):
  """A URL whose scheme no TensorFlow file system handles (the message names the flag)."""


def _gfile():
  import tensorflow as tf  # only for URLs: local work needs no TensorFlow import
  return tf.io.gfile


def _errors():
  import tensorflow as tf
  return tf.errors


def scheme(path: str) -> str:
  """'' for a local path, else the URL's scheme ('gs', 'ram', ...)."""
  m = _URL.match(os.fspath(path))
  return m.group(1).lower() if m else ""


def is_url(path: str) -> bool:
  return bool(scheme(path))


def registered_schemes() -> list[str]:
  """The URL schemes TensorFlow's file systems handle in this process (plugins included)."""
  return sorted(s for s in _gfile().get_registered_schemes() if s)


def check(path: str, flag: str | None = None) -> str:
  """Returns `path`; raises UnknownSchemeError when it is a URL of an unregistered scheme."""
  s = scheme(path)
  if s and s not in registered_schemes():
    name = f"{flag}={path}" if flag else path
    raise UnknownSchemeError(
        f"{name}: no file system handles '{s}://' here (registered: "
        f"{', '.join(f'{x}://' for x in registered_schemes())}; s3:// and hdfs:// need their "
        "TensorFlow file system plugin loaded, e.g. `import tensorflow_io`)")
  return path


# --- names -----------------------------------------------------------------------------------

def join(base: str, *parts: str) -> str:
  """`os.path.join` for local paths; for a URL, '/'-joined without touching the scheme."""
  if not is_url(base):
    return os.path.join(base, *parts)
  out = base
  for p in parts:
    out = p if is_url(p) else (out.rstrip("/") + "/" + p.lstrip("/") if p else out + "/")
  return out


def normalize(path: str) -> str:
  """`os.path.normpath` for a local path; a URL only loses a trailing '/'."""
  if not is_url(path):
    return os.path.normpath(path)
  head = _URL.match(path).group(0)
  return head + path[len(head):].rstrip("/") if len(path) > len(head) else path


def dirname(path: str) -> str:
  if not is_url(path):
    return os.path.dirname(path)
  path = normalize(path)
  head = _URL.match(path).group(0)
  rest = path[len(head):]
  return head + rest.rsplit("/", 1)[0] if "/" in rest else head + rest


def basename(path: str) -> str:
  return normalize(path).rsplit("/", 1)[-1] if is_url(path) else os.path.basename(path)


# --- queries ---------------------------------------------------------------------------------

def _ram_listed(path: str) -> bool:
  """ram:// answers `exists` for any prefix of a stored name (`ram://d/x` exists once
  `ram://d/x.tmp/f` does): there the parent's listing decides."""
  if scheme(path) != "ram" or dirname(path) == normalize(path):
    return True
  try:
    return basename(path) in listdir(dirname(path))
  except OSError:
    return False


def exists(path: str) -> bool:
  if not is_url(path):
    return os.path.exists(path)
  return _gfile().exists(path) and _ram_listed(path)


def isdir(path: str) -> bool:
  if not is_url(path):
    return os.path.isdir(path)
  return _gfile().isdir(path) and _ram_listed(path)


def isfile(path: str) -> bool:
  if not is_url(path):
    return os.path.isfile(path)
  return exists(path) and not _gfile().isdir(path)


def listdir(path: str) -> list[str]:
  """Entry names (no trailing '/'), unsorted; raises FileNotFoundError when `path` is not a
  directory."""
  if not is_url(path):
    return os.listdir(path)
  g = _gfile()
  if not g.isdir(path):
    raise FileNotFoundError(2, "No such directory", path)
  names = {n.rstrip("/") for n in g.listdir(path)}
  if scheme(path) == "ram":
    prefix = normalize(path) + "/"
    # Its listing of `d` also names the tail of a sibling `d_x` ("_x"): keep what is there.
    names = {n for n in names if g.exists(prefix + n)}
    # A directory made only by writing a file in it is missing from its parent's listing.
    for depth in range(1, 9):  # its glob matches stored files only, one level per '*'
      names |= {m[len(prefix):].split("/", 1)[0]
                for m in g.glob(escape(prefix) + "/".join(["*"] * depth))
                if m.startswith(prefix)}
  return sorted(names) if scheme(path) == "ram" else list(names)


def glob(pattern: str) -> list[str]:
  """Sorted matches of a glob pattern ('*', '?', '[..]'; locally '**' too, recursive)."""
  if not is_url(pattern):
    return sorted(_glob.glob(pattern, recursive=True))
  return sorted(_gfile().glob(pattern))


def escape(path: str) -> str:
  """`path` with glob characters escaped, for `glob(escape(prefix) + '*')`."""
  if not is_url(path):
    return _glob.escape(path)
  return re.sub(r"([*?\[])", r"[\1]", path)


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
  """`os.walk` (top-down) for local paths and URLs."""
  if not is_url(top):
    yield from os.walk(top)
    return
  if scheme(top) == "ram":  # its walk misses directories made only by writing files in them
    yield from _walk_by_listing(normalize(top))
    return
  for root, dirs, names in _gfile().walk(top):
    yield root, [d.rstrip("/") for d in dirs], list(names)


def _walk_by_listing(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
  try:
    entries = listdir(top)
  except OSError:
    return
  dirs = [e for e in entries if _gfile().isdir(join(top, e))]
  yield top, dirs, [e for e in entries if e not in dirs]
  for d in dirs:
    yield from _walk_by_listing(join(top, d))


def getsize(path: str) -> int:
  return _gfile().stat(path).length if is_url(path) else os.path.getsize(path)


def getmtime(path: str) -> float:
  return _gfile().stat(path).mtime_nsec / 1e9 if is_url(path) else os.path.getmtime(path)


def readable(path: str) -> bool:
  """Locally: os.access R_OK; a URL that exists is taken as readable (the read will say)."""
  return exists(path) if is_url(path) else os.access(path, os.R_OK)


def has_atomic_move(path: str) -> bool:
  """True where a rename is atomic (local disks, ram://, hdfs://); False on object stores,
  where it is a copy and a delete."""
  if not is_url(path):
    return True
  from tensorflow.python.lib.io import _pywrap_file_io  # no public API for this
  try:
    return bool(_pywrap_file_io.HasAtomicMove(path))
  except Exception:  # noqa: BLE001 - an unknown answer is "not atomic", the safe side
    return False


# --- changes ---------------------------------------------------------------------------------

def makedirs(path: str) -> None:
  """Creates `path` and its parents; no error when it exists."""
  if is_url(path):
    _gfile().makedirs(path)
  else:
    os.makedirs(path, exist_ok=True)


def remove(path: str) -> None:
  """Removes a file; FileNotFoundError when absent."""
  if not is_url(path):
    os.remove(path)
    return
  try:
    _gfile().remove(path)
  except _errors().NotFoundError as e:
    raise FileNotFoundError(2, "No such file", path) from e


def rmdir(path: str) -> None:
  """Removes an empty directory (OSError when not empty)."""
  if not is_url(path):
    os.rmdir(path)
    return
  if listdir(path):
    raise OSError(39, "Directory not empty", path)
  with contextlib.suppress(Exception):
    _gfile().rmtree(path)


def rmtree(path: str, ignore_errors: bool = False) -> None:
  try:
    if not is_url(path):
      shutil.rmtree(path)
      return
    try:
      _gfile().rmtree(path)
    except _errors().NotFoundError:
      # ram:// has no entry for a directory made only by writing files in it: delete them.
      found = [join(root, n) for root, _, names in walk(path) for n in names]
      if not found:
        raise FileNotFoundError(2, "No such directory", path) from None
      for f in found:
        _gfile().remove(f)
      for root, _, _ in sorted(walk(path), key=lambda w: -len(w[0])):
        with contextlib.suppress(Exception):
          _gfile().rmtree(root)
  except Exception:
    if not ignore_errors:
      raise


def rename(src: str, dst: str, overwrite: bool = True) -> None:
  """Moves a file or directory (a copy and delete on object stores)."""
  if not is_url(src) and not is_url(dst):
    if overwrite:
      os.replace(src, dst)
    else:
      if os.path.exists(dst):
        raise FileExistsError(17, "File exists", dst)
      os.rename(src, dst)
    return
  _gfile().rename(src, dst, overwrite=overwrite)


def copy(src: str, dst: str, overwrite: bool = True) -> None:
  """Copies a file (local or URL on either side)."""
  if not is_url(src) and not is_url(dst):
    if not overwrite and os.path.exists(dst):
      raise FileExistsError(17, "File exists", dst)
    shutil.copyfile(src, dst)
    return
  if overwrite and scheme(dst) == "ram" and _gfile().exists(dst):
    _gfile().remove(dst)  # ram:// writes over an old file without truncating it
  _gfile().copy(src, dst, overwrite=overwrite)


def copy_tree(src: str, dst: str, last: tuple[str, ...] = ()) -> None:
  """Copies directory `src` into `dst` (created), file by file; the files named in `last`
  (base names, at any depth) are copied after every other one, so that a reader who looks for
  them never finds them before the rest (object stores: no directory rename)."""
  files = []
  for root, _, names in walk(src):
    rel = os.path.relpath(root, src) if not is_url(src) else root[len(normalize(src)):].strip("/")
    for n in names:
      files.append((rel if rel not in (".", "") else "", n))
  files.sort(key=lambda rn: (rn[1] in last, rn[0].count("/"), rn))
  made = set()
  for rel, name in files:
    target_dir = join(dst, *rel.split("/")) if rel else dst
    if target_dir not in made:
      makedirs(target_dir)
      made.add(target_dir)
    copy(join(src, *rel.split("/"), name) if rel else join(src, name),
         join(target_dir, name), overwrite=True)
  if not files:
    makedirs(dst)


# --- reading and writing ---------------------------------------------------------------------

def open(path: str, mode: str = "r", encoding: str | None = None,  # noqa: A001
         errors: str | None = None, newline: str | None = None):
  """`open` for local paths and URLs; modes r, w, a, x with b or text (UTF-8 by default)."""
  binary = "b" in mode
  if not binary and encoding is None:
    encoding = "utf-8"
  if not is_url(path):
    return builtins.open(path, mode, encoding=None if binary else encoding,
                   errors=None if binary else errors, newline=None if binary else newline)
  g = _gfile()
  base = mode.replace("b", "").replace("t", "")
  if base == "x":
    if g.exists(path):
      raise FileExistsError(17, "File exists", path)
    base = "w"
  if base == "w" and scheme(path) == "ram" and g.exists(path):
    g.remove(path)  # ram:// writes over an old file without truncating it
  if base == "r" and not g.exists(path):
    raise FileNotFoundError(2, "No such file or directory", path)
  if base == "r" and g.isdir(path):
    raise IsADirectoryError(21, "Is a directory", path)
  raw = gfile_stream.GFileRaw(path, base + "b")
  buffered = io.BufferedReader(raw) if base == "r" else io.BufferedWriter(raw)
  if binary:
    return buffered
  return io.TextIOWrapper(buffered, encoding=encoding, errors=errors, newline=newline)


def read_bytes(path: str) -> bytes:
  with open(path, "rb") as f:
    return f.read()


def read_text(path: str, errors: str | None = None) -> str:
  with open(path, "r", encoding="utf-8", errors=errors) as f:
    return f.read()


def read_json(path: str) -> Any:
  with open(path, "r", encoding="utf-8") as f:
    return json.load(f)


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
  """A local path with `path`'s content, for libraries that need a real file: `path` itself
  when local, else a temporary copy (a file or a directory tree), removed afterwards."""
  if not is_url(path):
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="roberta_tf-") as tmp:
    local = os.path.join(tmp, basename(path) or "copy")
    if isdir(path):
      copy_tree(path, local)
    else:
      copy(path, local)
    yield local

