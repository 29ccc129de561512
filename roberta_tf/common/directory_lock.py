"""`DirectoryLock`: one process at a time writes a run directory (train's --model_dir,
finetune's --model_dir, ablate's --work_dir).

flock on the directory itself (no lock file is created, nothing is left behind by a killed
process: the kernel drops the lock with the process). A second process gets DirectoryBusyError
naming the directory and the flag, before it reads or writes anything there, so the first run
is unaffected. Where the file system has no flock (some network mounts) it locks nothing.
TensorFlow-free.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os


class DirectoryBusyError(RuntimeError):
  """Another process holds the directory's lock."""


class DirectoryLock:
  """An exclusive lock on `directory` for the life of a `with` block.

  The directory is created when missing; if the block leaves it empty (a run that failed
  before writing anything) it is removed again.
  """

  def __init__(self, directory: str, what: str = "--model_dir", holder: str = "training"):
    self.directory, self.what, self.holder = directory, what, holder
    self._fd, self._created = None, False

  def __enter__(self) -> DirectoryLock:
    self._created = not os.path.isdir(self.directory)
    os.makedirs(self.directory, exist_ok=True)
    self._fd = os.open(self.directory, os.O_RDONLY)
    try:
      fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
      if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        os.close(self._fd)
        self._fd = None
        raise DirectoryBusyError(
            f"{self.what}={self.directory} is in use by another {self.holder} process (it "
            f"holds the directory's lock); wait for it to finish, or use another "
            f"{self.what}") from e
      # ENOLCK / EINVAL: no flock here; go on unlocked.
    return self

  def __exit__(self, *exc) -> None:
    if self._fd is not None:
      os.close(self._fd)  # releases the lock
      self._fd = None
    if self._created:  # a run that failed before writing anything leaves no empty directory
      with contextlib.suppress(OSError):
        os.rmdir(self.directory)  # only if empty
