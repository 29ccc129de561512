"""The loop controller (training/loop.py) with the real TrainStep: when each event happens.

Tiny model, batches of 8 from the real pipeline over the test shards; the events record what the
loop asks of it, in order.
"""

import os
import signal
import threading

import keras
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.data import pipeline
from roberta_tf.pretraining.objective import MlmObjective
from roberta_tf.training import loop as loop_lib
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training.schedule import WarmupLinearDecay
from roberta_tf.training.sigterm import SigtermFlag
from roberta_tf.training.train_step import StepConfig, TrainStep
from tests.harness import tiny_config

SEQ = 64


class _Recorder:
  """A task's events (training/task.py's Events) that record the loop's calls: ("record", step,
  updates in the window), ("eval", step),
  ("save", step, updates not recorded yet), ("batches", step), ("stopped", step, reason),
  ("finish", step)."""

  def __init__(self, shards, stop_at_eval=None, on_log=None):
    self.shards, self.stop_at_eval, self.on_log = shards, stop_at_eval, on_log
    self.calls = []

  def batches(self, step):
    self.calls.append(("batches", step))
    it = iter(pipeline.build_dataset(self.shards, "train", training=True,
                                     per_replica_batch_size=8, max_seq_len=SEQ,
                                     model_config=tiny_config(max_positions=SEQ + 2),
                                     shuffle_buffer=0))
    return lambda: next(it)

  def record(self, step, window, eta_s):
    assert eta_s >= 0
    self.calls.append(("record", step, len(window)))
    if self.on_log:
      self.on_log(step)

  def evaluate(self, step):
    self.calls.append(("eval", step))
    return step == self.stop_at_eval

  def save(self, step, window):
    self.calls.append(("save", step, len(window) if window else 0))

  def diverged(self, step, bad_in_row):
    return RuntimeError(f"{bad_in_row} bad steps in a row at {step}")

  def stopped(self, step, reason):
    self.calls.append(("stopped", step, reason))

  def finish(self, step):
    self.calls.append(("finish", step))


@pytest.fixture(scope="module")
def train_step():
  """One TrainStep for the file (its step is traced once); the loop's events do not depend on
  the weights."""
  keras.utils.set_random_seed(0)
  model = models.RobertaPretrainer(tiny_config(max_positions=SEQ + 2))
  opt = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-3), WarmupLinearDecay(1e-3, 0, 100),
                            model.trainable_variables)
  return TrainStep(tf.distribute.get_strategy(), model, opt, StepConfig(), MlmObjective())


def _run(events, train_step, sigterm=None, **schedule):
  loop = loop_lib.Loop(tf.distribute.get_strategy(), train_step, events,
                       loop_lib.LoopSchedule(**schedule))
  return loop.run(0, sigterm)


def test_logs_evals_saves_and_periods_fire_on_their_updates(train_shards, train_step):
  events = _Recorder(train_shards)
  result = _run(events, train_step, total_steps=6, log_every=2, eval_every=3, save_every=4,
                period=5)
  assert result == loop_lib.LoopResult(6)
  assert events.calls == [
      ("batches", 0), ("record", 2, 2), ("eval", 3), ("record", 4, 2), ("save", 4, 0),
      ("batches", 5),  # a new period (epoch) restarts the data
      ("record", 6, 2), ("finish", 6)]  # no eval at the last update, no save: finish decides


def test_eval_at_the_last_update_and_early_stopping(train_shards, train_step):
  events = _Recorder(train_shards)
  _run(events, train_step, total_steps=4, log_every=0, eval_every=2, eval_last_step=True)
  assert events.calls == [("batches", 0), ("eval", 2), ("record", 4, 4), ("eval", 4),
                         ("finish", 4)]
  events = _Recorder(train_shards, stop_at_eval=2)
  result = _run(events, train_step, total_steps=6, eval_every=2)
  assert result == loop_lib.LoopResult(2, stopped_early=True)
  assert events.calls == [("batches", 0), ("eval", 2), ("finish", 2)]


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                    reason="signal handlers need the main thread")
def test_sigterm_saves_after_the_next_update_with_the_unlogged_window_and_stops(train_shards,
                                                                                 train_step):
  events = _Recorder(train_shards, on_log=lambda step: os.kill(os.getpid(), signal.SIGTERM))
  with SigtermFlag() as flag:
    result = _run(events, train_step, sigterm=flag, total_steps=10, log_every=2)
  assert result == loop_lib.LoopResult(3, stopped_by_signal=True)
  # The signal came during the log at update 2; update 3 runs, then its state is saved with
  # the one update not logged yet, and the run stops without `finish`.
  assert events.calls == [("batches", 0), ("record", 2, 2), ("save", 3, 1),
                         ("stopped", 3, "SIGTERM")]


def test_bad_steps_in_a_row_stop_the_run_at_the_next_check(train_shards, train_step):
  weights = train_step.model.trainable_variables[0]
  kept = weights.numpy()
  weights.assign(tf.fill(weights.shape, float("nan")))  # every step non-finite
  events = _Recorder(train_shards)
  try:
    with pytest.raises(RuntimeError, match="^3 bad steps in a row at 3$"):
      _run(events, train_step, total_steps=10, log_every=5, max_bad_steps=3, check_every=3)
  finally:
    weights.assign(kept)
    train_step.bad_steps_in_row.assign(0)
  assert events.calls == [("batches", 0)]  # checked before the log, the eval or the save
