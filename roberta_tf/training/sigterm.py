"""SIGTERM (and a first Ctrl-C) as a flag: the training loops check it between updates, save,
and exit cleanly.

Preemptible machines (cloud spot VMs, Borg/Kubernetes evictions) send SIGTERM and wait a grace
period. Raising from the handler could interrupt a checkpoint half-way; a flag lets the current
update finish, then pretraining saves a checkpoint and fine-tuning keeps its best epoch so far.
Ctrl-C (SIGINT) does the same the first time, so an interrupted run keeps its progress; a second
Ctrl-C raises KeyboardInterrupt at once (the previous checkpoints stay intact: every save is
written under a temporary name and renamed).
"""

from __future__ import annotations

import signal
import sys


class SigtermFlag:
  """A context manager: inside it, SIGTERM and a first SIGINT set `raised` (and `name`, the
  signal's) instead of killing the process.

  Off the main thread (where Python cannot install handlers) it does nothing and `raised`
  stays False. The previous handlers come back on exit.
  """

  def __init__(self):
    self.raised = False
    self.name = ""
    self._previous = {}

  def __enter__(self) -> SigtermFlag:
    for sig in (signal.SIGTERM, signal.SIGINT):
      try:
        self._previous[sig] = signal.signal(sig, self._handle)
      except ValueError:  # not the main thread: no signal handling
        break
    return self

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    if signum == signal.SIGINT:
      if self.raised:
        raise KeyboardInterrupt
      print("interrupted (Ctrl-C): finishing this update, then saving and stopping; Ctrl-C "
            "again stops at once", file=sys.stderr, flush=True)
    self.name = self.name or signal.Signals(signum).name
    self.raised = True

  def __exit__(self, *exc):
    for sig, previous in self._previous.items():
      signal.signal(sig, previous)
    self._previous = {}
