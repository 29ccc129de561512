"""`DirectoryLock`: one process at a time writes a run directory (train's --model_dir,
finetune's --model_dir, ablate's --work_dir).

Local directories: flock on the directory itself (no lock file is created, nothing is left
behind by a killed process: the kernel drops the lock with the process). Where the file system
has no flock (some network mounts) it locks nothing.

URLs (gs://, ram://, ...; no flock there): a lock object `<dir>/LOCK_NAME`, JSON naming its
owner (host, pid, start time, a random token). It is taken only when absent, and re-read after
a short wait to see that this process's token won (two processes that both found it absent:
the later write wins, the other backs off; object stores give no create-if-absent through
tf.io.gfile, so this narrows the race to writes within `_SETTLE_S` of each other). It is
removed on exit. A lock whose owner ran on this host and whose pid is gone is stale and taken
over (with a note); any other lock stops the run with a message naming the owner and how to
break it: delete the lock object once that run is known to be gone.

A second process gets DirectoryBusyError naming the directory, the flag and (URLs) the owner,
before it reads or writes anything there, so the first run is unaffected.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import secrets
import socket
import sys
import time

from roberta_tf.common import files

LOCK_NAME = ".roberta_tf.lock"
_SETTLE_S = 0.5


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
    self._token = None

  def __enter__(self) -> DirectoryLock:
    if files.is_url(self.directory):
      return self._enter_url()
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

  @property
  def lock_path(self) -> str:
    return files.join(self.directory, LOCK_NAME)

  def _busy(self, owner: dict) -> DirectoryBusyError:
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(owner.get("started", 0)))
    return DirectoryBusyError(
        f"{self.what}={self.directory} is in use by another {self.holder} process ("
        f"{self.lock_path} names pid {owner.get('pid')} on host {owner.get('host')}, started "
        f"{since}); wait for it to finish or use another {self.what}; if that run is gone "
        f"(killed, its machine lost), delete {self.lock_path} and start again")

  def _read_owner(self) -> dict | None:
    try:
      return json.loads(files.read_text(self.lock_path))
    except FileNotFoundError:
      return None
    except (ValueError, OSError):
      return {}  # half-written or unreadable: someone is writing it

  def _enter_url(self) -> DirectoryLock:
    self._created = not files.isdir(self.directory)
    files.makedirs(self.directory)
    owner = self._read_owner()
    if owner is not None:
      if not self._stale(owner):
        raise self._busy(owner)
      print(f"note: {self.lock_path}: its owner (pid {owner.get('pid')} on this host, "
            f"{owner.get('host')}) is gone; taking the lock over", file=sys.stderr)
    self._token = secrets.token_hex(8)
    mine = {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time(),
            "holder": self.holder, "token": self._token}
    with files.open(self.lock_path, "w") as f:
      json.dump(mine, f)
    time.sleep(_SETTLE_S)
    owner = self._read_owner()
    if not owner or owner.get("token") != self._token:
      self._token = None
      raise self._busy(owner or {})
    return self

  @staticmethod
  def _stale(owner: dict) -> bool:
    """True for a lock left by a dead process of this host (its pid is gone)."""
    if owner.get("host") != socket.gethostname() or not isinstance(owner.get("pid"), int):
      return False
    try:
      os.kill(owner["pid"], 0)
    except ProcessLookupError:
      return True
    except OSError:
      return False
    return False

  def _exit_url(self) -> None:
    if self._token is None:
      return
    owner = self._read_owner()
    if owner and owner.get("token") == self._token:
      with contextlib.suppress(OSError, FileNotFoundError):
        files.remove(self.lock_path)
    self._token = None
    if self._created:
      with contextlib.suppress(OSError):
        files.rmdir(self.directory)

  def __exit__(self, *exc) -> None:
    if files.is_url(self.directory):
      self._exit_url()
      return
    if self._fd is not None:
      os.close(self._fd)  # releases the lock
      self._fd = None
    if self._created:  # a run that failed before writing anything leaves no empty directory
      with contextlib.suppress(OSError):
        os.rmdir(self.directory)  # only if empty
