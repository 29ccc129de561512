"""File access for every path a binary or library takes: local paths and URLs alike.

A path is either local (`runs/base`, `/data/shards`) or a URL (`gs://bucket/shards`,
`ram://model`, `s3://...`, `hdfs://...`: any scheme TensorFlow's file systems register; s3 and
hdfs need their plugin loaded). Each function hands its path to one of two backends, chosen by
the path's scheme: local paths to files_local.py (the operating system: builtins, `os`,
`shutil`; the exact local semantics, no TensorFlow import), URLs to files_gfile.py
(`tf.io.gfile`). A URL is never normalized into a local path.

Paths enter through `check(path, flag)`, which the binaries call on every path flag: it refuses,
in one line naming the flag, what would otherwise go wrong later or silently (PathError): an
unknown scheme, an upper-case one (`RAM://x`), a URL with one slash (`ram:/m`, which the OS takes
for a local folder `ram:`) and a scheme with no path after it (`gs://`, `ram:/`).

What differs per scheme, and what this module promises (docs/reliability.md, "Storage"):
- local disks, ram:// and hdfs:// rename atomically (`has_atomic_move`); object stores (gs://,
  s3://) copy, and a listing may lag a write. atomic_write.py builds "complete or absent" on that.
- `open` gives Python file objects either way (text or binary, seekable for reading), so
  `gzip`, `json`, `csv` and pyarrow read a URL as they read a local file.
- `local_copy` hands a library that needs a real file (safetensors, tokenizers) a local one.
- `set_backend(scheme, backend)` routes one scheme elsewhere: the tests correct ram://'s
  listing quirks that way (tests/ram_filesystem.py), outside production code.

Only this module's backends (and atomic_write.py, directory_lock.py on top of it) may call
`open`, `os`'s file functions, `glob` or `shutil` on a path: tests/test_file_access.py checks
the packages.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Iterator
from typing import Any

from roberta_tf.common import error_text, files_gfile, files_local

_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
# A scheme followed by one slash or none and nothing else ("ram:/m", "gs:/", "ram:"): a URL
# mistyped, which the operating system would take for a local folder named "ram:".
_SHORT_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):(?:/(?!/)|$)")

_LOCAL = files_local.LocalFiles()
_GFILE = files_gfile.GFileFiles()
_BY_SCHEME: dict[str, files_gfile.GFileFiles] = {}


class PathError(ValueError):
  """A path flag that names no usable place (the message names the flag and what to write)."""


class UnknownSchemeError(PathError):
  """A URL whose scheme no TensorFlow file system handles (the message names the flag)."""


def scheme(path: str) -> str:
  """'' for a local path, else the URL's scheme ('gs', 'ram', ...)."""
  m = _URL.match(os.fspath(path))
  return m.group(1).lower() if m else ""


def is_url(path: str) -> bool:
  return bool(scheme(path))


def registered_schemes() -> list[str]:
  """The URL schemes TensorFlow's file systems handle in this process (plugins included)."""
  import tensorflow as tf  # only for URLs: local work needs no TensorFlow import
  return sorted(s for s in tf.io.gfile.get_registered_schemes() if s)


def _unknown_scheme(name: str, s: str) -> str:
  return (f"{name}: no file system handles '{s}://' here (registered: "
          f"{', '.join(f'{x}://' for x in registered_schemes())}; s3:// and hdfs:// need their "
          "TensorFlow file system plugin loaded, e.g. `import tensorflow_io`)")


def check(path: str, flag: str | None = None) -> str:
  """Returns `path` when it names a place this process can use; else raises PathError (see the
  module docstring), one line starting `<flag>=<path>: `."""
  name = f"{flag}={path}" if flag else path
  short = _SHORT_URL.match(path)
  if short:
    s, rest = short.group(1), path[short.end():]
    local = f" (for a local folder named '{s}:', ./{path})" if rest else ""
    if s.lower() not in registered_schemes():  # `write scheme://...` would fail next
      raise UnknownSchemeError(_unknown_scheme(name, s.lower()) + local)
    if not rest:
      raise PathError(f"{name}: no path after the scheme: write {s.lower()}://<directory>")
    if s.lower() == "file":  # file:/tmp/x means the absolute path /tmp/x (RFC 8089)
      raise PathError(f"{name}: a file URL takes three slashes: write file:///{rest} (or "
                      f"/{rest}){local}")
    raise PathError(f"{name}: a URL takes two slashes after its scheme: write "
                    f"{s.lower()}://{rest}{local}")
  s = scheme(path)
  if not s:
    return path
  if s not in registered_schemes():
    raise UnknownSchemeError(_unknown_scheme(name, s))
  head, rest = files_gfile.split(path)
  if not rest.strip("/"):
    raise PathError(f"{name}: no path after the scheme: write {s}://<directory>")
  if head[:-3] != s:
    raise PathError(f"{name}: a URL's scheme is lower-case: write {s}://{rest}")
  return path


def set_backend(scheme_name: str, backend: files_gfile.GFileFiles | None) -> None:
  """Routes the URLs of `scheme_name` to `backend` (None: back to files_gfile's): a stand-in
  that corrects a store's quirks, as tests/ram_filesystem.py does for ram://."""
  if backend is None:
    _BY_SCHEME.pop(scheme_name, None)
  else:
    _BY_SCHEME[scheme_name] = backend


def _backend(path: str):
  s = scheme(path)
  return _BY_SCHEME.get(s, _GFILE) if s else _LOCAL


def _backend_of_pair(src: str, dst: str):
  """Local for two local paths, else the URL side's (gfile also reads and writes local paths)."""
  return _backend(dst) if is_url(dst) else _backend(src)


# --- names -----------------------------------------------------------------------------------

def join(base: str, *parts: str) -> str:
  """`os.path.join` for local paths; for a URL, '/'-joined without touching the scheme."""
  return _backend(base).join(base, *parts)


def normalize(path: str) -> str:
  """`os.path.normpath` for a local path; a URL only loses a trailing '/'."""
  return _backend(path).normalize(path)


def dirname(path: str) -> str:
  return _backend(path).dirname(path)


def basename(path: str) -> str:
  return _backend(path).basename(path)


def escape(path: str) -> str:
  """`path` with glob characters escaped, for `glob(escape(prefix) + '*')`."""
  return _backend(path).escape(path)


# --- queries ---------------------------------------------------------------------------------

def exists(path: str) -> bool:
  return _backend(path).exists(path)


def isdir(path: str) -> bool:
  return _backend(path).isdir(path)


def isfile(path: str) -> bool:
  return _backend(path).isfile(path)


def listdir(path: str) -> list[str]:
  """Entry names (no trailing '/'), unsorted; raises FileNotFoundError when `path` is not a
  directory."""
  return _backend(path).listdir(path)


def glob(pattern: str) -> list[str]:
  """Sorted matches of a glob pattern ('*', '?', '[..]'; locally '**' too, recursive)."""
  return _backend(pattern).glob(pattern)


def walk(top: str) -> Iterator[tuple[str, list[str], list[str]]]:
  """`os.walk` (top-down) for local paths and URLs."""
  return _backend(top).walk(top)


def getsize(path: str) -> int:
  return _backend(path).getsize(path)


def getmtime(path: str) -> float:
  return _backend(path).getmtime(path)


def readable(path: str) -> bool:
  """Locally: os.access R_OK; a URL that exists is taken as readable (the read will say)."""
  return _backend(path).readable(path)


def has_atomic_move(path: str) -> bool:
  """True where a rename is atomic (local disks, ram://, hdfs://); False on object stores,
  where it is a copy and a delete, and on any scheme not known to rename atomically."""
  return _backend(path).has_atomic_move(path)


# --- changes ---------------------------------------------------------------------------------

def makedirs(path: str) -> None:
  """Creates `path` and its parents; no error when it exists."""
  _backend(path).makedirs(path)


def remove(path: str) -> None:
  """Removes a file; FileNotFoundError when absent."""
  _backend(path).remove(path)


def rmdir(path: str) -> None:
  """Removes an empty directory (OSError when not empty)."""
  _backend(path).rmdir(path)


def rmtree(path: str, ignore_errors: bool = False) -> None:
  """Removes a directory tree; FileNotFoundError when absent (unless ignore_errors)."""
  try:
    _backend(path).rmtree(path)
  except Exception:
    if not ignore_errors:
      raise


def rename(src: str, dst: str, overwrite: bool = True) -> None:
  """Moves a file or directory (a copy and delete on object stores)."""
  _backend_of_pair(src, dst).rename(src, dst, overwrite)


def copy(src: str, dst: str, overwrite: bool = True) -> None:
  """Copies a file (local or URL on either side)."""
  _backend_of_pair(src, dst).copy(src, dst, overwrite)


def copy_tree(src: str, dst: str, last: tuple[str, ...] = ()) -> None:
  """Copies directory `src` into `dst` (created), file by file; the files named in `last`
  (base names, at any depth) are copied after every other one, so that a reader who looks for
  them never finds them before the rest (object stores: no directory rename)."""
  top = normalize(src)
  files = []
  for root, _, names in walk(top):
    rel = root[len(top):].strip("/")
    files.extend((rel, n) for n in names)
  files.sort(key=lambda rn: (rn[1] in last, rn[0].count("/"), rn))
  made = set()
  for rel, name in files:
    target_dir = join(dst, *rel.split("/")) if rel else dst
    if target_dir not in made:
      makedirs(target_dir)
      made.add(target_dir)
    copy(join(top, *rel.split("/"), name) if rel else join(top, name),
         join(target_dir, name), overwrite=True)
  if not files:
    makedirs(dst)


# --- reading and writing ---------------------------------------------------------------------

def open(path: str, mode: str = "r", encoding: str | None = None,  # noqa: A001
         errors: str | None = None, newline: str | None = None):
  """`open` for local paths and URLs; modes r, w, a, x with b or text (UTF-8 by default)."""
  if "b" not in mode and encoding is None:
    encoding = "utf-8"
  return _backend(path).open(path, mode, encoding, errors, newline)


def read_bytes(path: str) -> bytes:
  with open(path, "rb") as f:
    return f.read()


def read_text(path: str, errors: str | None = None) -> str:
  with open(path, "r", encoding="utf-8", errors=errors) as f:
    return f.read()


def read_json(path: str) -> Any:
  with open(path, "r", encoding="utf-8") as f:
    return json.load(f)


def read_json_object(path: str, error: type[Exception]) -> dict:
  """The JSON object in `path`; `error` with one line naming the path when it cannot be read
  (a TF file system's error on a URL included), is not JSON or is not an object."""
  try:
    doc = read_json(path)
  except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
    raise error(f"{path} is not valid JSON: {e}") from e
  except Exception as e:  # a TF file system's error on a URL
    if not error_text.is_tf_error(e):
      raise
    raise error(f"cannot read {path}: {error_text.one_line(e)}") from e
  if not isinstance(doc, dict):
    raise error(f"{path}: expected a JSON object, got {type(doc).__name__}")
  return doc


@contextlib.contextmanager
def local_copy(path: str) -> Iterator[str]:
  """A local path with `path`'s content, for libraries that need a real file: `path` itself
  when local, else a temporary copy (a file or a directory tree), removed afterwards."""
  if _backend(path).is_local:
    yield path
    return
  with tempfile.TemporaryDirectory(prefix="roberta_tf-") as tmp:
    local = os.path.join(tmp, basename(path) or "copy")
    if isdir(path):
      copy_tree(path, local)
    else:
      copy(path, local)
    yield local

