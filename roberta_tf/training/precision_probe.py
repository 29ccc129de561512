"""`--precision=auto`: float32 or mixed_bfloat16, whichever trains this model faster here.

No CPU flag tells which is faster. On a 2-core Xeon with AVX-512 BF16 and no AMX the small
model trained at 0.66-0.78x float32's speed in mixed_bfloat16 (the casts around each matmul cost
more than the bf16 dot products save), while another CPU ran it 1.2-2.6x faster; GPUs from
Ampere on are faster in bf16. So `auto` measures: it builds the run's model, optimizer and
train step in each precision on the run's strategy, times `steps` updates of one synthetic
micro-batch of the run's shape (after `warmup` untimed ones: tracing, first allocations), and
takes mixed_bfloat16 only when it is at least MARGIN faster (float32 is the safer numerics).

The choice is cached per machine and shape (the CPU model or GPU name, TensorFlow's version,
the model's dimensions, the micro-batch shape and the number of replicas) in
`$ROBERTA_TF_CACHE_DIR/precision.json` (default `~/.cache/roberta_tf/`), so a machine measures
once; the run records what it picked, and the seconds measured, in its config.json.
"""

from __future__ import annotations

import json
import os
import platform
import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from roberta_tf.common import atomic_write, files

CANDIDATES = ("float32", "mixed_bfloat16")
MARGIN = 0.05  # mixed_bfloat16 must save at least this share of a step's time
CACHE_FILE = "precision.json"


def cache_dir() -> str:
  """$ROBERTA_TF_CACHE_DIR, else ~/.cache/roberta_tf (XDG_CACHE_HOME honoured)."""
  if os.environ.get("ROBERTA_TF_CACHE_DIR"):
    return os.environ["ROBERTA_TF_CACHE_DIR"]
  home = os.path.expanduser("~")  # local-only: the user's own cache
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
  return os.path.join(base, "roberta_tf")


def device_name() -> str:
  """The accelerator's name (the first GPU's), else the CPU model and its logical cores."""
  gpus = tf.config.list_physical_devices("GPU")
  if gpus:
    details = tf.config.experimental.get_device_details(gpus[0])
    return f"{details.get('device_name', 'GPU')} x{len(gpus)}"
  model = platform.processor() or platform.machine()
  try:
    with files.open("/proc/cpuinfo") as f:
      for line in f:
        if line.startswith("model name"):
          model = line.split(":", 1)[1].strip()
          break
  except OSError:
    pass
  return f"{model} ({os.cpu_count()} logical cores)"


def cache_key(model_dims: dict, batch_shape: tuple[int, ...], replicas: int) -> str:
  """The key of a measurement: machine, TF version, model dimensions, micro-batch, replicas."""
  dims = ",".join(f"{k}={model_dims[k]}" for k in sorted(model_dims))
  return (f"{device_name()} | tf {tf.__version__} | {dims} | batch "
          f"{'x'.join(map(str, batch_shape))} | replicas {replicas}")


def read_cache() -> dict:
  path = os.path.join(cache_dir(), CACHE_FILE)
  try:
    return json.loads(files.read_bytes(path))
  except (OSError, ValueError):  # none yet, or unreadable: measure again
    return {}


def write_cache(key: str, result: dict) -> None:
  """Adds `result` under `key`; a cache that cannot be written is only a lost shortcut."""
  cache = read_cache()
  cache[key] = result
  try:
    files.makedirs(cache_dir())
    atomic_write.write_json(os.path.join(cache_dir(), CACHE_FILE), cache)
  except (OSError, atomic_write.WriteError):
    pass


def synthetic_batch(batch_size: int, seq_len: int, max_predictions: int, vocab_size: int,
                    seed: int = 0) -> dict[str, np.ndarray]:
  """A pretraining micro-batch of the pipeline's format with random ids (every position real,
  15% of them predicted): input_ids / padding_mask int32 [B, S], mask_positions / mask_ids
  int32 [B, P], mask_weights float32 [B, P]."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, size=(batch_size, seq_len), dtype=np.int32)
  predicted = max(1, min(max_predictions, round(0.15 * seq_len)))
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq_len - 1), max_predictions,
                                           replace=False) for _ in range(batch_size)]), axis=1)
  weights = np.zeros((batch_size, max_predictions), np.float32)
  weights[:, :predicted] = 1.0
  return {"input_ids": ids, "padding_mask": np.ones_like(ids),
          "mask_positions": positions.astype(np.int32),
          "mask_ids": np.take_along_axis(ids, positions, axis=1),
          "mask_weights": weights}


def seconds_per_step(train_step, strategy: tf.distribute.Strategy, batch: dict, warmup: int,
                     steps: int) -> float:
  """Median seconds of `steps` updates of `train_step` (a TrainStep) on `batch`, each synced."""
  dataset = tf.data.Dataset.from_tensors(batch).repeat()
  iterator = iter(strategy.experimental_distribute_dataset(dataset))
  next_batch = lambda: next(iterator)  # noqa: E731
  for _ in range(warmup):
    metrics, _ = train_step(next_batch)
    float(metrics["loss"])
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    metrics, _ = train_step(next_batch)
    float(metrics["loss"])  # waits for the step
    times.append(time.perf_counter() - start)
  return float(np.median(times))


def choose(seconds: dict[str, float], margin: float = MARGIN) -> str:
  """mixed_bfloat16 when it is at least `margin` faster than float32, else float32."""
  if seconds.get("mixed_bfloat16", float("inf")) <= (1 - margin) * seconds["float32"]:
    return "mixed_bfloat16"
  return "float32"


def pick(build_step: Callable[[str], object], strategy: tf.distribute.Strategy, batch: dict,
         key: str, warmup: int = 2, steps: int = 3, log=print) -> dict:
  """The precision `auto` resolves to, measured (or cached under `key`).

  Args:
    build_step: precision -> a TrainStep of the run's model and optimizer in that precision,
      built under `strategy` (the probe's models are thrown away).
    batch: one per-replica-sized micro-batch x replicas (synthetic_batch), numpy.
  Returns:
    {"precision", "seconds_per_step": {precision: s}, "device", "cached": bool}.
  """
  cached = read_cache().get(key)
  if cached and cached.get("precision") in CANDIDATES:
    log(f"precision auto: {cached['precision']} (measured earlier on this machine: "
        + _said(cached["seconds_per_step"]) + ")")
    return {**cached, "cached": True}
  log("precision auto: timing float32 and mixed_bfloat16 for a few steps ...")
  seconds = {}
  for precision in CANDIDATES:
    seconds[precision] = seconds_per_step(build_step(precision), strategy, batch, warmup, steps)
  result = {"precision": choose(seconds), "seconds_per_step": seconds, "device": device_name()}
  write_cache(key, result)
  log(f"precision auto: {result['precision']} ({_said(seconds)})")
  return {**result, "cached": False}


def _said(seconds: dict[str, float]) -> str:
  return ", ".join(f"{p} {s * 1000:.0f} ms a step" for p, s in seconds.items())
