"""Stopping every worker at the same step when any one of them gets SIGTERM.

In a multi-worker run each save is a collective: all workers must call it at the same step, or
the run hangs. A preempted worker (SIGTERM) therefore cannot just save and leave. After each
update every worker contributes its SIGTERM flag (0 or 1) to a SUM all-reduce over the
strategy's collectives; the result is read one update later (so the host never waits for the
device just for this), and since every worker reads the same reduced value after the same
update, all of them stop at the same step, save one common checkpoint and exit. The cost is one
scalar all-reduce per update and, multi-worker, up to two updates after the signal: the one
running when it arrives, and the next, whose end reads the reduced flag. (tf.distribute's
PreemptionCheckpointHandler does the same over the coordination service, but owns the
checkpoint manager and the exit; this keeps ours.)

Off multi-worker the flag is read directly.
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.training.sigterm import SigtermFlag


class PreemptionSync:
  """``stop_now()``, called once after every update on every worker, says whether to save and
  stop; True on all workers after the same update."""

  def __init__(self, strategy: tf.distribute.Strategy, sigterm: SigtermFlag):
    self._strategy, self._sigterm = strategy, sigterm
    self._collective = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
    self._pending = None  # the last update's reduced flag, not read yet
    self.signalled_here = False

    def reduce(flag):
      per_replica = strategy.run(tf.identity, args=(flag,))
      return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    self._reduce = tf.function(reduce, autograph=False)

  def stop_now(self) -> bool:
    self.signalled_here = self._sigterm.raised
    if not self._collective:
      return self._sigterm.raised
    previous = self._pending
    self._pending = self._reduce(tf.constant(1.0 if self._sigterm.raised else 0.0))
    if previous is None:
      return False
    return float(previous) > 0
