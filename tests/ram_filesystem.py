"""ram:// (TensorFlow's in-memory file system) as the tests' stand-in for gs:// and the like.

The tests run whole journeys on ram:// in one process, as a user would on an object store. Its
answers differ from a real store's in ways no user's store has, corrected here (tests only:
production code takes what a file system says, roberta_tf/common/files_gfile.py):
- `exists` / `isdir` hold for any prefix of a stored name (`ram://d/x` "exists" once
  `ram://d/x.tmp/f` does): the parent's listing decides.
- the listing of `d` names the tail of a sibling `d_x` ("_x"), and misses a directory made only
  by writing a file in it (as TF's checkpoints and SavedModels do); `walk` misses those too;
  `rmtree` of such a directory fails as not found.
- a write (or a copy) over an old file does not truncate it.
- a directory's rename moves its own entry but not the files under it.

`install()` (tests/conftest.py, at start-up) routes ram:// through `RamFiles` for the whole test
process: common/files.py's `set_backend`.
"""

import contextlib
from collections.abc import Iterator

from roberta_tf.common import files, files_gfile

_MAX_DEPTH = 8  # ram:// glob matches stored files only, one level per '*'


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


class RamFiles(files_gfile.GFileFiles):
  """files_gfile's backend with ram://'s quirks (module docstring) corrected."""

  def _listed(self, path: str) -> bool:
    if self.dirname(path) == self.normalize(path):
      return True
    try:
      return self.basename(path) in self.listdir(self.dirname(path))
    except OSError:
      return False

  def exists(self, path: str) -> bool:
    return _gfile().exists(path) and self._listed(path)

  def isdir(self, path: str) -> bool:
    return _gfile().isdir(path) and self._listed(path)

  def isfile(self, path: str) -> bool:
    return self.exists(path) and not _gfile().isdir(path)

  def listdir(self, path: str) -> list[str]:
    g = _gfile()
    if not g.isdir(path):
      raise FileNotFoundError(2, "No such directory", path)
    prefix = self.normalize(path) + "/"
    names = {n.rstrip("/") for n in g.listdir(path)}
    names = {n for n in names if g.exists(prefix + n)}  # not a sibling's tail
    for depth in range(1, _MAX_DEPTH + 1):  # directories made by writing a file in them
      names |= {m[len(prefix):].split("/", 1)[0]
                for m in g.glob(self.escape(prefix) + "/".join(["*"] * depth))
                if m.startswith(prefix)}
    return sorted(names)

  def walk(self, top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    top = self.normalize(top)
    try:
      entries = self.listdir(top)
    except OSError:
      return
    dirs = [e for e in entries if _gfile().isdir(self.join(top, e))]
    yield top, dirs, [e for e in entries if e not in dirs]
    for d in dirs:
      yield from self.walk(self.join(top, d))

  def rmtree(self, path: str) -> None:
    try:
      super().rmtree(path)
      return
    except FileNotFoundError:  # a directory made only by writing files in it: delete them
      found = [self.join(root, n) for root, _, names in self.walk(path) for n in names]
      if not found:
        raise
    for f in found:
      _gfile().remove(f)
    for root in sorted((w[0] for w in self.walk(path)), key=len, reverse=True):
      with contextlib.suppress(Exception):
        _gfile().rmtree(root)

  def rename(self, src: str, dst: str, overwrite: bool) -> None:
    if not self.isdir(src):
      super().rename(src, dst, overwrite)
      return
    if self.exists(dst):
      if not overwrite:
        raise FileExistsError(17, "File exists", dst)
      self.rmtree(dst)
    files.copy_tree(src, dst)
    self.rmtree(src)

  def copy(self, src: str, dst: str, overwrite: bool) -> None:
    if overwrite and _gfile().exists(dst):
      _gfile().remove(dst)
    super().copy(src, dst, overwrite)

  def open(self, path: str, mode: str, encoding, errors, newline):  # noqa: A003
    if mode.replace("b", "").replace("t", "") == "w" and _gfile().exists(path):
      _gfile().remove(path)
    return super().open(path, mode, encoding, errors, newline)


def install() -> None:
  """ram:// through RamFiles in this process (until `uninstall`)."""
  files.set_backend("ram", RamFiles())


def uninstall() -> None:
  files.set_backend("ram", None)


def pytest_configure(config):  # pylint: disable=unused-argument
  """As a pytest plugin (`-p tests.ram_filesystem`): installed for the session."""
  install()
