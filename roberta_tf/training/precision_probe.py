"""`--precision=auto`: float32 or mixed_bfloat16, whichever trains this model faster here; and
the peak FLOP/s MFU divides by, measured on this machine.

No CPU flag tells which is faster: with AVX-512 BF16 and no AMX the casts around each matmul
can cost more than the bf16 dot products save, other CPUs train faster in bf16, and so do GPUs
from Ampere on (measurements: docs/benchmarks.md). So `auto` measures: the task builds the
run's model, optimizer and train step in each precision on the run's strategy, and one
synthetic micro-batch of the run's shape and format (the probe knows neither); the probe times
`steps` updates (after `warmup` untimed ones: tracing, first allocations), and takes
mixed_bfloat16 only when it is at least MARGIN faster (float32 is the safer numerics).

Peaks likewise differ by machine, so MFU's peak is measured too (`peak_flops`): the best of a
few 2048^3 `tf.matmul`s in the precision's compute dtype under tf.function, on this process's
default device with its intra-op threads. Other processes' load lowers a measurement, never
raises it: the cache keeps the best one seen (the benchmarks measure again each run).

Both are cached per machine in `$ROBERTA_TF_CACHE_DIR/precision.json` (default
`~/.cache/roberta_tf/`), so a machine measures once. The machine is `machine_key()`: the GPU's
name, else the CPU's vendor, family, model, stepping and the flags that decide matmul speed
(AVX-512, BF16, AMX, ...) with its logical cores, not the marketing name (Xeons with and
without AMX share "Intel(R) Xeon(R) Processor"); with TensorFlow's version, and for the choice
the model's dimensions, the micro-batch shape and the number of replicas, for the peak the
matrix size and the intra-op threads. A cache that is not a JSON object of such entries is
ignored with one line naming the file (and rewritten); the run records what it picked, and
the seconds measured, in its config.json.
"""

from __future__ import annotations

import json
import math
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
# The compute dtype of each precision: the dtype whose matmul peak MFU divides by.
COMPUTE_DTYPES = {"float32": tf.float32, "mixed_bfloat16": tf.bfloat16,
                  "mixed_float16": tf.float16}
# /proc/cpuinfo flags that change a matmul's speed on the same family/model.
MATMUL_FLAGS = ("avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16",
                "avx_vnni", "amx_tile", "amx_bf16", "amx_fp16", "amx_int8")
PEAK_MATRIX = 2048  # n of the n^3 matmul (2 n^3 FLOPs)
PEAK_REPS = 4


def cache_dir() -> str:
  """$ROBERTA_TF_CACHE_DIR, else ~/.cache/roberta_tf (XDG_CACHE_HOME honoured)."""
  if os.environ.get("ROBERTA_TF_CACHE_DIR"):
    return os.environ["ROBERTA_TF_CACHE_DIR"]
  home = os.path.expanduser("~")  # local-only: the user's own cache
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(home, ".cache")
  return os.path.join(base, "roberta_tf")


def _gpu_name() -> str | None:
  gpus = tf.config.list_physical_devices("GPU")
  if not gpus:
    return None
  details = tf.config.experimental.get_device_details(gpus[0])
  return f"{details.get('device_name', 'GPU')} x{len(gpus)}"


def cpu_fields() -> dict[str, str]:
  """/proc/cpuinfo's first processor's fields ({} where there is none: not Linux)."""
  fields = {}
  try:
    with files.open("/proc/cpuinfo") as f:
      for line in f:
        if not line.strip():
          break  # the first processor's block ends
        name, _, value = line.partition(":")
        fields[name.strip()] = value.strip()
  except OSError:
    pass
  return fields


def device_name() -> str:
  """For people: the first GPU's name, else the CPU's model name and its logical cores."""
  gpu = _gpu_name()
  if gpu:
    return gpu
  model = cpu_fields().get("model name") or platform.processor() or platform.machine()
  return f"{model} ({os.cpu_count()} logical cores)"


def machine_key(fields: dict[str, str] | None = None) -> str:
  """For caches: the GPU's name, else what decides the CPU's matmul speed: vendor, family,
  model, stepping, MATMUL_FLAGS present, logical cores (`fields`: /proc/cpuinfo's, read when
  None; the marketing name is left out on purpose)."""
  gpu = None if fields is not None else _gpu_name()
  if gpu:
    return gpu
  fields = cpu_fields() if fields is None else fields
  if "cpu family" not in fields:  # not x86 Linux: what platform knows
    return f"{platform.machine()} {platform.processor()} ({os.cpu_count()} logical cores)"
  present = set(fields.get("flags", "").split())
  flags = " ".join(f for f in MATMUL_FLAGS if f in present) or "none"
  return (f"{fields.get('vendor_id', '?')} family {fields['cpu family']} model "
          f"{fields.get('model', '?')} stepping {fields.get('stepping', '?')} flags [{flags}] "
          f"({os.cpu_count()} logical cores)")


def cache_key(model_dims: dict, batch_shape: tuple[int, ...], replicas: int) -> str:
  """The key of a precision choice: machine, TF version, model dims, micro-batch, replicas."""
  dims = ",".join(f"{k}={model_dims[k]}" for k in sorted(model_dims))
  return (f"{machine_key()} | tf {tf.__version__} | {dims} | batch "
          f"{'x'.join(map(str, batch_shape))} | replicas {replicas}")


def _cache_path() -> str:
  return os.path.join(cache_dir(), CACHE_FILE)


def read_cache(log=None) -> dict:
  """{key: entry}; {} when there is none yet, or (said in one line to `log`) when the file is
  unreadable or not a JSON object: it is measured again (and rewritten where it can be)."""
  path = _cache_path()
  try:
    cache = json.loads(files.read_bytes(path))
  except OSError as e:  # none yet (nothing to say), or unreadable (a directory, ...)
    if log and files.exists(path):
      log(f"ignoring {path}: cannot read it ({e.strerror or e}; measuring again)")
    return {}
  except (ValueError, RecursionError):  # not UTF-8 JSON; nested past Python's recursion limit
    cache = None
  if not isinstance(cache, dict):
    if log:
      log(f"ignoring {path}: not a JSON object of measurements (measuring again)")
    return {}
  return cache


def write_cache(key: str, result: dict) -> None:
  """Adds `result` under `key`; a cache that cannot be written is only a lost shortcut."""
  cache = read_cache()
  cache[key] = result
  try:
    files.makedirs(cache_dir())
    atomic_write.write_json(_cache_path(), cache)
  except (OSError, atomic_write.WriteError):
    pass


def _positive_numbers(entry, names) -> bool:
  """`entry` is a dict whose `names` are finite numbers > 0 (JSON's Infinity and 1e999 read as
  inf: as a peak it would make every MFU 0)."""
  return isinstance(entry, dict) and all(
      isinstance(entry.get(n), (int, float)) and not isinstance(entry.get(n), bool)
      and math.isfinite(entry[n]) and entry[n] > 0 for n in names)


def cached_entry(key: str, valid: Callable[[object], bool], log) -> dict | None:
  """The cache's entry under `key` when `valid` says it has the right shape; else None (a
  malformed entry is said in one line naming the file, then measured again)."""
  entry = read_cache(log).get(key)
  if entry is None:
    return None
  if not valid(entry):
    log(f"ignoring {_cache_path()}'s entry {key!r}: not a measurement of the expected shape "
        "(measuring again)")
    return None
  return entry


def matmul_flops(dtype: tf.DType, n: int = PEAK_MATRIX, reps: int = PEAK_REPS) -> float:
  """FLOP/s of an [n, n] x [n, n] tf.matmul in `dtype` on the default device, the best of
  `reps` timed calls after one untimed (tracing). Synced on a scalar of the product."""
  a = tf.cast(tf.random.stateless_normal([n, n], seed=[0, 1]), dtype)
  b = tf.cast(tf.random.stateless_normal([n, n], seed=[2, 3]), dtype)
  product = tf.function(lambda x, y: tf.reduce_sum(tf.cast(tf.matmul(x, y), tf.float32)))
  product(a, b).numpy()
  best = float("inf")
  for _ in range(reps):
    start = time.perf_counter()
    product(a, b).numpy()
    best = min(best, time.perf_counter() - start)
  return 2 * n**3 / best


def peak_key(n: int = PEAK_MATRIX) -> str:
  threads = tf.config.threading.get_intra_op_parallelism_threads()
  return (f"peak | {machine_key()} | tf {tf.__version__} | matmul {n} | intra-op "
          f"{threads or 'default'}")


def peak_flops(precision: str, log=print, n: int = PEAK_MATRIX, reps: int = PEAK_REPS,
               remeasure: bool = False) -> tuple[float, bool]:
  """(FLOP/s, cached): this machine's peak in `precision`'s compute dtype (matmul_flops), from
  the cache, else (or with `remeasure`) measured now. The cache keeps the best figure measured
  on the machine (other processes' load only ever lowers one), and that is what is returned;
  said in one line to `log`."""
  key = peak_key(n)
  entry = cached_entry(key, lambda e: isinstance(e, dict) and _positive_numbers(e, list(e)),
                  log) or {}
  cached = precision in entry and not remeasure
  if cached:
    flops = float(entry[precision])
    said = f"measured earlier on this machine, {_cache_path()}"
  else:
    now = matmul_flops(COMPUTE_DTYPES[precision], n, reps)
    flops = max(now, float(entry.get(precision, 0.0)))
    write_cache(key, {**entry, precision: flops})
    said = ("measured now" if flops == now else
            f"measured now {now / 1e9:.0f}; the best measured on this machine is used")
  log(f"peak for MFU: {precision} {n}^3 matmul {flops / 1e9:.0f} GFLOP/s ({said})")
  return flops, cached


def seconds_per_step(train_step, strategy: tf.distribute.Strategy, batch: dict, warmup: int,
                     steps: int) -> float:
  """Median seconds of `steps` updates of `train_step` (a TrainStep) on `batch` (the task's:
  one micro-batch of its format x replicas), each synced."""
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
    batch: one per-replica-sized micro-batch x replicas of the task's format, numpy (the task
      makes it: pretraining's is pretraining/task.py's `synthetic_batch`).
  Returns:
    {"precision", "seconds_per_step": {precision: s}, "device", "cached": bool}.
  """
  cached = cached_entry(key, _is_pick, log)
  if cached:
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


def _is_pick(entry) -> bool:
  """A cached choice: {"precision": a candidate, "seconds_per_step": {precision: s > 0}}."""
  seconds = entry.get("seconds_per_step") if isinstance(entry, dict) else None
  return (isinstance(seconds, dict) and bool(seconds) and entry.get("precision") in CANDIDATES
          and _positive_numbers(seconds, list(seconds)))
