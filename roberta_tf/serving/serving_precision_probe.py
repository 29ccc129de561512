"""`export --precision=auto`: float32 or bfloat16, whichever serves this model faster here.

Whether bfloat16 pays depends on the CPU (AMX or AVX-512 BF16 matmuls, or neither) and on the
model's size, so `auto` measures, as training's `--precision=auto` does: it runs the model's
encoder (the part whose cost depends on the precision) in each precision on two synthetic
requests, one text of 32 tokens (a latency-bound request) and 16 texts of 128 (a
throughput-bound batch), and takes bfloat16 only when the two together are at least MARGIN
faster. The answer is cached per machine (training/precision_probe.py's cache file and machine
key) and model shape, so a machine measures once per model size.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from roberta_tf.models.roberta.encoder import encoder_inputs
from roberta_tf.serving import serving_precision
from roberta_tf.training import precision_probe

MARGIN = 0.05
SHAPES = ((1, 32), (16, 128))  # (texts, tokens) of the timed requests
REPEATS = 5


def _seconds(encoder, vocab_size: int, max_seq_len: int, warmup: int = 1) -> float:
  """Median seconds of the encoder's forward, summed over SHAPES (lengths capped at
  max_seq_len)."""
  forward = tf.function(lambda inputs: encoder(inputs, training=False)["sequence_output"])
  total = 0.0
  rng = np.random.default_rng(0)
  for batch, seq in SHAPES:
    ids = tf.constant(rng.integers(5, vocab_size, size=(batch, min(seq, max_seq_len))),
                      tf.int32)
    inputs = encoder_inputs(encoder, ids, tf.ones_like(ids))
    for _ in range(warmup):
      forward(inputs).numpy()
    times = []
    for _ in range(REPEATS):
      start = time.perf_counter()
      forward(inputs).numpy()
      times.append(time.perf_counter() - start)
    total += float(np.median(times))
  return total


def resolve(precision: str, model, build: Callable[[str], object], config,
            log=print) -> str:
  """`precision`, or for "auto" the measured (or cached) faster of float32 and bfloat16.

  Args:
    model: the float32 model (a RobertaPretrainer or a FinetuneModel: anything with an
      `encoder` attribute), its weights restored.
    build: dtype policy name -> the same architecture (serving_precision.rebuilt).
    config: the model's RobertaConfig (ids are drawn from [5, vocab_size), lengths capped at
      max_seq_len).
  """
  if serving_precision.check(precision) != "auto":
    return precision
  dims = [w.shape for w in model.encoder.weights]
  params = int(sum(np.prod(shape) for shape in dims))
  key = (f"serving | {precision_probe.machine_key()} | tf {tf.__version__} | layers "
         f"{len(model.encoder.layers)} params {params} | shapes {SHAPES}")
  cached = precision_probe.cached_entry(
      key, lambda e: isinstance(e, dict) and e.get("precision") in serving_precision.COMPUTED,
      log)
  if cached:
    log(f"precision auto: {cached['precision']} (measured earlier on this machine)")
    return cached["precision"]
  log("precision auto: timing the encoder in float32 and bfloat16 ...")
  seconds = {p: _seconds(serving_precision.rebuilt(model, build, p).encoder, config.vocab_size,
                         config.max_seq_len)
             for p in serving_precision.COMPUTED}
  picked = "bfloat16" if seconds["bfloat16"] <= (1 - MARGIN) * seconds["float32"] else "float32"
  precision_probe.write_cache(key, {"precision": picked, "seconds": seconds})
  log(f"precision auto: {picked} (" + ", ".join(f"{p} {s * 1000:.0f} ms"
                                                 for p, s in seconds.items()) + ")")
  return picked
