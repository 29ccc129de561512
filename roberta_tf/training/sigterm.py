"""SIGTERM as a flag: the training loops check it between updates, save, and exit cleanly.

Preemptible machines (cloud spot VMs, Borg/Kubernetes evictions) send SIGTERM and wait a grace
period. Raising from the handler could interrupt a checkpoint half-way; a flag lets the current
update finish, then pretraining saves a checkpoint and fine-tuning keeps its best epoch so far.
"""

from __future__ import annotations

import signal


class SigtermFlag:
  """A context manager: inside it, SIGTERM sets `raised` instead of killing the process.

  Off the main thread (where Python cannot install handlers) it does nothing and `raised`
  stays False. The previous handler comes back on exit.
  """

  def __init__(self):
    self.raised = False
    self._previous = None

  def __enter__(self) -> SigtermFlag:
    try:
      self._previous = signal.signal(signal.SIGTERM, self._handle)
    except ValueError:  # not the main thread: no signal handling
      self._previous = None
    return self

  def _handle(self, signum, frame):  # pylint: disable=unused-argument
    self.raised = True

  def __exit__(self, *exc):
    if self._previous is not None:
      signal.signal(signal.SIGTERM, self._previous)
