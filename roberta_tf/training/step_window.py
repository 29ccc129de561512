"""The updates between two log lines: kept as device tensors, summarized on the host at once.

a `TrainStep` call returns its metrics as tensors so the host does not wait for the device
after every update; a window collects them and converts them only when the loop logs (a log
step, an epoch end).
"""

from __future__ import annotations

import time


class StepWindow:
  """Step outputs (a TrainStep call's dicts) since the window opened."""

  def __init__(self):
    self.start = time.perf_counter()
    self.outputs = []
    self.wait_s = 0.0

  def __len__(self) -> int:
    return len(self.outputs)

  def add(self, outputs: dict, wait_s: float = 0.0) -> None:
    self.outputs.append(outputs)
    self.wait_s += wait_s

  def summarize(self) -> dict:
    """Host values over the window.

    loss / accuracy: means over the applied updates weighted by their count (masked tokens or
    examples), NaN if none was applied; grad_norm: the applied updates' mean; tokens: all
    updates' real tokens; count: the applied updates' total count; learning_rate, loss_scale,
    last_step_loss: of the last update; applied_steps; elapsed_s and input_wait_s since the
    window opened; and every "sum/<name>" an objective reports, summed over the applied
    updates.
    """
    rows = [{k: float(v.numpy()) for k, v in out.items()} for out in self.outputs]
    applied = [r for r in rows if r["applied"]]
    count = sum(r["count"] for r in applied)
    last = rows[-1] if rows else {"learning_rate": float("nan"), "loss_scale": float("nan"),
                                  "loss": float("nan")}
    nan = float("nan")
    extra = {k: sum(r[k] for r in applied) for k in (rows[0] if rows else {})
             if k.startswith("sum/")}
    return {**extra,
        "loss": sum(r["loss"] * r["count"] for r in applied) / count if count else nan,
        "accuracy": sum(r["accuracy"] * r["count"] for r in applied) / count if count else nan,
        "grad_norm": sum(r["grad_norm"] for r in applied) / len(applied) if applied else nan,
        "count": count, "tokens": sum(r["tokens"] for r in rows),
        "learning_rate": last["learning_rate"], "loss_scale": last["loss_scale"],
        "last_step_loss": last["loss"], "applied_steps": len(applied),
        "elapsed_s": time.perf_counter() - self.start, "input_wait_s": self.wait_s,
    }
