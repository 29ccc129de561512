"""A one-line progress report for data_prep binaries (stderr, about once a second)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
  """Prints ``phase: MB done / total, MB/s, ETA, sequences`` at most every ``interval`` s.

  On a terminal the line is redrawn in place; elsewhere (logs) each report is its own line.
  A run may have phases (build_shards: "reading", then "writing shards"), each with its own
  clock, total and ETA.
  """

  def __init__(self, stream: TextIO | None = None, interval: float = 1.0):
    self._stream = stream if stream is not None else sys.stderr
    self._interval = interval
    self._tty = hasattr(self._stream, "isatty") and self._stream.isatty()
    self._drawn = False
    self._phase = ""  # reset() starts a named phase
    self._start = self._last = time.monotonic()

  def reset(self, phase: str = ""):
    """Starts ``phase``: rates and ETA count from here (e.g. after a slow setup)."""
    if self._tty and self._drawn:
      self._stream.write("\n")  # keep the last line of the previous phase
      self._drawn = False
    self._phase = f"{phase}: " if phase else ""
    self._start = self._last = time.monotonic()

  def update(self, bytes_done: int, total_bytes: int, sequences: int, force: bool = False):
    now = time.monotonic()
    if not force and now - self._last < self._interval:
      return
    self._last = now
    elapsed = max(now - self._start, 1e-9)
    rate = bytes_done / elapsed
    eta = (total_bytes - bytes_done) / rate if rate > 0 and total_bytes > bytes_done else 0.0
    line = (f"{self._phase}{bytes_done / 1e6:9.1f} / {total_bytes / 1e6:.1f} MB  "
            f"{rate / 1e6:6.2f} MB/s  ETA {eta:5.0f} s  {sequences} sequences")
    self._stream.write(("\r" + line) if self._tty else (line + "\n"))
    self._stream.flush()
    self._drawn = True

  def done(self):
    if self._tty and self._drawn:
      self._stream.write("\n")
      self._stream.flush()
