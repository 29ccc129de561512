"""The local backend of roberta_tf.common.files: paths on this machine's file systems.

Everything goes to the operating system (builtins, `os`, `shutil`, `glob`): exactly the local
semantics, and no TensorFlow import. files.py picks this backend for every path without a URL
scheme; only files.py calls it.
"""

from __future__ import annotations

import builtins
import glob as _glob
import os
import shutil
from collections.abc import Iterator


class LocalFiles:
  """files.py's backend for local paths (see files.py for each method's contract)."""

  is_local = True

  # --- names ---

  def join(self, base: str, *parts: str) -> str:
    return os.path.join(base, *parts)

  def normalize(self, path: str) -> str:
    return os.path.normpath(path)

  def dirname(self, path: str) -> str:
    return os.path.dirname(path)

  def basename(self, path: str) -> str:
    return os.path.basename(path)

  def escape(self, path: str) -> str:
    return _glob.escape(path)

  # --- queries ---

  def exists(self, path: str) -> bool:
    return os.path.exists(path)

  def isdir(self, path: str) -> bool:
    return os.path.isdir(path)

  def isfile(self, path: str) -> bool:
    return os.path.isfile(path)

  def listdir(self, path: str) -> list[str]:
    return os.listdir(path)

  def glob(self, pattern: str) -> list[str]:
    return sorted(_glob.glob(pattern, recursive=True))

  def walk(self, top: str) -> Iterator[tuple[str, list[str], list[str]]]:
    yield from os.walk(top)

  def getsize(self, path: str) -> int:
    return os.path.getsize(path)

  def getmtime(self, path: str) -> float:
    return os.path.getmtime(path)

  def readable(self, path: str) -> bool:
    return os.access(path, os.R_OK)

  def has_atomic_move(self, path: str) -> bool:  # pylint: disable=unused-argument
    return True  # rename(2) within one file system

  # --- changes ---

  def makedirs(self, path: str) -> None:
    os.makedirs(path, exist_ok=True)

  def remove(self, path: str) -> None:
    os.remove(path)

  def rmdir(self, path: str) -> None:
    os.rmdir(path)

  def rmtree(self, path: str) -> None:
    shutil.rmtree(path)

  def rename(self, src: str, dst: str, overwrite: bool) -> None:
    if overwrite:
      os.replace(src, dst)
      return
    if os.path.exists(dst):
      raise FileExistsError(17, "File exists", dst)
    os.rename(src, dst)

  def copy(self, src: str, dst: str, overwrite: bool) -> None:
    if not overwrite and os.path.exists(dst):
      raise FileExistsError(17, "File exists", dst)
    shutil.copyfile(src, dst)

  def open(self, path: str, mode: str, encoding: str | None, errors: str | None,  # noqa: A003
           newline: str | None):
    binary = "b" in mode
    return builtins.open(path, mode, encoding=None if binary else encoding,
                         errors=None if binary else errors, newline=None if binary else newline)
