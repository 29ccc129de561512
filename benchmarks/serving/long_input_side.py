r"""One point of benchmarks/serving/long_inputs.py, in a process of its own (its peak RSS is the
point's memory):

    python -m benchmarks.serving.long_input_side SIDE LENGTH REPEATS THREADS

Builds a ModernBERT encoder at `base` size (22 layers, H 768, 12 heads, window 128; random
weights: speed does not depend on them), runs one warm-up forward at 128 tokens (tracing, first
allocations), then REPEATS forwards of batch 1 x LENGTH random ids (all real) in float32, and
prints one JSON line: {"side", "length", "seconds": [wall, per forward], "cpu_seconds": [user +
system time of all threads, per forward: the work, which a shared machine does not inflate],
"peak_rss_mb" (the process's RSS high-water mark during the timed forwards, VmHWM reset after
the warm-up), "warm_rss_mb" (RSS after the warm-up), "versions", "threads"}.

Sides:
  ours_blocked: roberta_tf's encoder as shipped (windowed_attention.attend: blocked local,
      query-chunked global attention), a tf.function with L dynamic;
  ours_full: the same with `attend_reference` (the full L x L matrix in every layer, the
      implementation before issue 61);
  hf_sdpa / hf_eager: transformers' ModernBertModel (the same config through
      modernbert_hf_config.config_to_hf) with that attn_implementation, under torch.no_grad.
"""

from __future__ import annotations

import json
import resource
import sys
import time

SIDES = ("ours_blocked", "ours_full", "hf_sdpa", "hf_eager")
WARMUP_LENGTH = 128


def _config():
  from roberta_tf.models.modernbert import modernbert_config  # pylint: disable=import-outside-toplevel
  return modernbert_config.preset("base", max_seq_len=8192)


def _ours(side: str, threads: int):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  from roberta_tf.models.modernbert import (  # pylint: disable=import-outside-toplevel
    modernbert_encoder,
    modernbert_layers,
    windowed_attention,
  )
  if side == "ours_full":  # the layers call the name they imported
    modernbert_layers.attend = windowed_attention.attend_reference
  encoder = modernbert_encoder.build_modernbert_encoder(_config(), dtype="float32")
  spec = tf.TensorSpec([1, None], tf.int32)
  forward = tf.function(lambda ids, mask: encoder({"input_ids": ids, "padding_mask": mask})[
      "sequence_output"], input_signature=[spec, spec])

  def run(ids):
    forward(tf.constant(ids), tf.ones_like(tf.constant(ids))).numpy()
  return run, f"tensorflow {tf.__version__}", f"TF intra-op {threads}"


def _hf(side: str, threads: int):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(threads)
  from roberta_tf.models.modernbert import modernbert_hf_config  # pylint: disable=import-outside-toplevel
  hf = modernbert_hf_config.config_to_hf(_config(), "ModernBertModel")
  config = transformers.ModernBertConfig(**{k: v for k, v in hf.items() if k != "architectures"})
  torch.manual_seed(0)
  model = transformers.ModernBertModel._from_config(  # pylint: disable=protected-access
      config, attn_implementation=side.split("_")[1]).eval()

  def run(ids):
    with torch.no_grad():
      ids = torch.tensor(ids, dtype=torch.long)
      model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.numpy()
  return (run, f"torch {torch.__version__}, transformers {transformers.__version__}",
          f"torch intra-op {threads}")


def _cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime  # every thread of the process


def _status_mb(field: str) -> float:
  with open("/proc/self/status", encoding="utf-8") as f:
    return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024  # kB


def _reset_peak() -> None:
  """Sets the RSS high-water mark (VmHWM) to the current RSS (Linux clear_refs 5), so the
  peak read later is the forwards', not the model build's (HF's random init peaks higher
  than a 512-token forward)."""
  with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
    f.write("5")


def main(argv: list[str]) -> None:
  side, length, repeats, threads = argv[0], int(argv[1]), int(argv[2]), int(argv[3])
  if side not in SIDES:
    sys.exit(f"error: side {side!r} is not one of {SIDES}")
  run, versions, thread_note = (_ours if side.startswith("ours") else _hf)(side, threads)
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(0)
  run(rng.integers(5, 50000, size=(1, WARMUP_LENGTH)).astype(np.int32))
  warm = _status_mb("VmRSS")
  _reset_peak()
  ids = rng.integers(5, 50000, size=(1, length)).astype(np.int32)
  seconds, cpu_seconds = [], []
  for _ in range(repeats):
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    run(ids)
    seconds.append(time.perf_counter() - start)
    cpu_seconds.append(_cpu_seconds() - cpu_start)
  print(json.dumps({"side": side, "length": length, "seconds": seconds,
                    "cpu_seconds": cpu_seconds,
                    "peak_rss_mb": round(_status_mb("VmHWM")), "warm_rss_mb": round(warm),
                    "versions": versions, "threads": thread_note}), flush=True)


if __name__ == "__main__":
  main(sys.argv[1:])
