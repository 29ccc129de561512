"""TensorBoard event files (model_dir/train, model_dir/eval) and console progress lines."""

from __future__ import annotations

import datetime
import os
import sys

import tensorflow as tf


class Summaries:
  """Scalar and text summaries; a no-op on non-chief workers (``enabled=False``)."""

  def __init__(self, model_dir: str, enabled: bool = True):
    self.enabled = enabled
    self._writers = {}
    if enabled:
      for split in ("train", "eval"):
        self._writers[split] = tf.summary.create_file_writer(os.path.join(model_dir, split))

  def scalars(self, split: str, step: int, values: dict) -> None:
    if not self.enabled:
      return
    with self._writers[split].as_default(step=step):
      for name, value in values.items():
        tf.summary.scalar(name, value)
    self._writers[split].flush()

  def text(self, split: str, step: int, name: str, value: str) -> None:
    if not self.enabled:
      return
    with self._writers[split].as_default(step=step):
      tf.summary.text(name, value)
    self._writers[split].flush()


def format_eta(seconds: float) -> str:
  return str(datetime.timedelta(seconds=int(max(seconds, 0))))


def progress_line(step: int, total: int, metrics: dict, eta_s: float) -> str:
  """One console line: step, loss, lr, tokens/s, ETA."""
  parts = [f"step {step}/{total}", f"loss {metrics['loss']:.4f}",
           f"lr {metrics['learning_rate']:.3e}", f"{metrics['tokens_per_sec']:,.0f} tok/s",
           f"grad_norm {metrics['grad_norm']:.3f}", f"ETA {format_eta(eta_s)}"]
  if "nsp_loss" in metrics:
    parts.insert(2, f"nsp_loss {metrics['nsp_loss']:.4f} acc {metrics['nsp_accuracy']:.3f}")
  if metrics.get("skipped_steps"):
    parts.append(f"skipped {int(metrics['skipped_steps'])}")
  return " | ".join(parts)


def log(line: str) -> None:
  print(line, file=sys.stdout, flush=True)
