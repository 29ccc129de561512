"""The one training loop: updates, and what is due every N of them, for every task.

Pretraining (pretraining/run.py) and fine-tuning (finetuning/trial.py) run this loop; each
supplies its task's `Events` (training/task.py: its data, and what a record, an eval, a save and
the end mean for it) and a `LoopSchedule` (when). The loop owns the when:

  start at update `step` (a fresh run: 0; a resume: the checkpoint's)
  → every update: one a `TrainStep` call (accumulation, clipping, loss scaling and the NaN
    guard are inside it), its outputs kept as device tensors in a `StepWindow`
  → every `log_every` updates and at the last: `events.record(step, window, eta_s)`, a new
    window
  → every `eval_every` updates (and at the last, with `eval_last_step`): `events.evaluate(step)`,
    which may end the run early (early stopping)
  → every `save_every` updates (never at the last: `events.finish` decides): `events.save`
  → the bad-step stop: at every record, eval and save (and every `check_every` updates), when
    `max_bad_steps` updates in a row were skipped (the NaN guard), the loop raises what
    `events.diverged(step, bad_in_row)` returns
  → SIGTERM, or a first Ctrl-C, on any worker: all workers stop after the same update
    (preemption.py), `events.save` the state (the window's unrecorded updates included), and
    the run returns `stopped_by_signal`; the same command resumes
  → `period` (fine-tuning's epoch): the data restarts (`events.batches(step)`) every `period`
    updates
  → at the end (not after a signal): `events.finish(step)`.

The host waits for the device only at those events: records, evals, saves and bad-step
checks.
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from roberta_tf.training import preemption
from roberta_tf.training.sigterm import SigtermFlag
from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.task import Events


@dataclasses.dataclass(frozen=True)
class LoopSchedule:
  """When the loop's events happen, in updates.

  Attributes:
    total_steps: the run ends at this update.
    log_every: a record (pretraining: a log line) every N updates (and at the last); 0: only
      at the last.
    eval_every: an eval every N updates; 0: never (the task may evaluate in `finish`).
    save_every: a save every N updates before the last; 0: only on a signal.
    max_bad_steps: this many skipped (non-finite) updates in a row stop the run.
    check_every: the bad-step check also runs every N updates (pretraining: max_bad_steps, so
      a diverged run stops within 2x of them); 0: only at records, evals and saves.
    period: the data restarts every `period` updates (an epoch); 0: one stream.
    eval_last_step: the eval schedule also fires at the last update (fine-tuning: the last
      epoch's dev metrics); False: `finish` evaluates (pretraining: after the final save).
    budget_s: a time budget (train --train_minutes): the run also ends at the first update
      that brings the loop's wall-clock seconds, summed over resumes (train_step.train_seconds),
      to this; before every update the budget's elapsed share goes to `budget_fraction` (the
      BudgetSchedule's). 0: no budget.
  """
  total_steps: int
  log_every: int = 0
  eval_every: int = 0
  save_every: int = 0
  max_bad_steps: int = 1000
  check_every: int = 0
  period: int = 0
  eval_last_step: bool = False
  budget_s: float = 0.0


def due(every: int, step: int) -> bool:
  """An event of period `every` (0: never) falls on update `step`."""
  return bool(every) and step % every == 0


@dataclasses.dataclass
class LoopResult:
  step: int
  stopped_by_signal: bool = False
  stopped_early: bool = False


class Loop:
  """Runs a task's `events` on `train_step` under `strategy` by `schedule` (see the module
  docstring)."""

  def __init__(self, strategy: tf.distribute.Strategy, train_step, events: Events,
               schedule: LoopSchedule, budget_fraction: tf.Variable | None = None):
    self.strategy, self.train_step, self.events = strategy, train_step, events
    self.schedule, self.budget_fraction = schedule, budget_fraction

  def run(self, step: int, sigterm: SigtermFlag | None = None) -> LoopResult:
    """From update `step` to the end, an early stop or a signal. `sigterm`: a flag the caller
    installed already (a fine-tuning sweep holds one across its runs); default: the loop's."""
    if sigterm is None:
      with SigtermFlag() as own:
        return self._run(step, own)
    return self._run(step, sigterm)

  def _run(self, step: int, sigterm: SigtermFlag) -> LoopResult:
    s, events = self.schedule, self.events
    stop = preemption.PreemptionSync(self.strategy, sigterm)
    start_time, start_step = time.perf_counter(), step
    seconds_before = float(self.train_step.train_seconds.numpy())

    def seconds():  # the loop's wall clock, summed over resumes
      return seconds_before + time.perf_counter() - start_time

    window, next_batch = StepWindow(), events.batches(step)
    if s.budget_s and seconds() >= s.budget_s:
      events.finish(step)  # a resume of a spent budget: nothing to train
      return LoopResult(step)
    while step < s.total_steps:
      if s.period and step % s.period == 0 and step > start_step:
        next_batch = events.batches(step)
      if s.budget_s and self.budget_fraction is not None:
        self.budget_fraction.assign(min(seconds() / s.budget_s, 1.0))
      window.add(*self.train_step(next_batch))
      step += 1
      last = step == s.total_steps or bool(s.budget_s and seconds() >= s.budget_s)
      record_now = due(s.log_every, step) or last
      eval_now = due(s.eval_every, step) and (s.eval_last_step or not last)
      stop_now = stop.stop_now()  # read once: a signal arriving later is handled next update
      save_now = stop_now or (due(s.save_every, step) and not last)
      if record_now or eval_now or save_now or due(s.check_every, step):
        bad = int(self.train_step.bad_steps_in_row.numpy())
        if bad >= s.max_bad_steps:
          raise events.diverged(step, bad)
      if record_now:
        eta = (time.perf_counter() - start_time) / (step - start_step) * (s.total_steps - step)
        if s.budget_s:
          eta = min(eta, max(s.budget_s - seconds(), 0.0))
        events.record(step, window, eta)
        window = StepWindow()
      if eval_now and events.evaluate(step):
        events.finish(step)
        return LoopResult(step, stopped_early=True)
      if save_now:
        self.train_step.train_seconds.assign(seconds())
        events.save(step, window if len(window) else None)
      if stop_now:
        where = "" if stop.signalled_here else " (to another worker)"
        events.stopped(step, f"{sigterm.name or 'SIGTERM'}{where}")
        return LoopResult(step, stopped_by_signal=True)
      if last:
        break
    self.train_step.train_seconds.assign(seconds())
    events.finish(step)
    return LoopResult(step)
