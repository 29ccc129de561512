r"""One point of benchmarks/serving/long_inputs.py, in a process of its own (its peak RSS is the
point's memory):

    python -m benchmarks.serving.long_input_side '{"side": ..., "kind": ..., ...}'

The spec (JSON): side (SIDES), kind ("forward" | "train"), length, precision ("float32" |
"bfloat16"), repeats, threads, global_chunk (0: windowed_attention's GLOBAL_CHUNK), and for
"train" batches (an .npz of modernbert_vs_hf.dump_batches) and worker_spec (what that side's
modernbert_vs_hf worker builds from).

forward: a ModernBERT encoder at `base` size (22 layers, H 768, 12 heads, window 128; random
weights: speed does not depend on them), one warm-up forward at 128 tokens (tracing, first
allocations), then `repeats` forwards of batch 1 x `length` random ids (all real). bfloat16 is,
for ours, Keras' "bfloat16" policy (weights stored in bfloat16, softmax / norms / residual
float32: what `export --precision=bfloat16` serves); for transformers, torch.autocast(bfloat16).
train: one update of modernbert_vs_hf's worker of the side (ours: the pretraining run's train
step; HF: ModernBertForMaskedLM sdpa + AdamW, sparse_prediction as ModernBERT's recipe) as a
warm-up, then `repeats` timed updates over the dumped batches.

Prints one JSON line: the spec's keys, "seconds" [wall, per forward / update], "cpu_seconds"
[user + system time of all threads: the work, which a shared machine inflates less],
"peak_rss_mb" (VmHWM during the timed calls, reset after the warm-up), "warm_rss_mb" (RSS after
the warm-up), "first_peak_mb" (VmHWM over the build and warm-up), "versions", "threads".

Sides:
  ours_blocked: roberta_tf's encoder as shipped (windowed_attention.attend: blocked local,
      query-chunked global attention), a tf.function with L dynamic;
  ours_full: the same with `attend_reference` (the full L x L matrix in every layer, the
      implementation before issue 61);
  ours_autodiff (train): ours_blocked with the global layers' gradient left to autodiff (it
      keeps every chunk's probabilities: the whole L x L matrix per global layer);
  hf_sdpa / hf_eager: transformers' ModernBertModel (the same config through
      modernbert_hf_config.config_to_hf) with that attn_implementation, under torch.no_grad.
"""

from __future__ import annotations

import contextlib
import json
import resource
import sys
import time

SIDES = ("ours_blocked", "ours_full", "ours_autodiff", "hf_sdpa", "hf_eager")
WARMUP_LENGTH = 128


def _config():
  from roberta_tf.models.modernbert import modernbert_config  # pylint: disable=import-outside-toplevel
  return modernbert_config.preset("base", max_seq_len=8192)


def _patch_attention(spec: dict) -> None:
  """The side's attention: the shipped one, the full matrix, or autodiff global gradients."""
  from roberta_tf.models.modernbert import (  # pylint: disable=import-outside-toplevel
    modernbert_layers,
    windowed_attention,
  )
  if spec.get("global_chunk"):
    windowed_attention.GLOBAL_CHUNK = spec["global_chunk"]
  if spec["side"] == "ours_full":  # the layers call the name they imported
    modernbert_layers.attend = windowed_attention.attend_reference
  if spec["side"] == "ours_autodiff":
    def global_autodiff(q, k, v, padding_mask, dropout, training):
      _, q_chunks, from_chunks = windowed_attention._chunk_queries(q)  # pylint: disable=protected-access
      bias = windowed_attention._key_bias(padding_mask)  # pylint: disable=protected-access
      return from_chunks(tf.map_fn(
          lambda c: windowed_attention._chunk_probs_product(c, k, v, bias),  # pylint: disable=protected-access
          q_chunks, parallel_iterations=1, fn_output_signature=v.dtype))
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    windowed_attention._global_chunked = global_autodiff  # pylint: disable=protected-access


def _ours(spec: dict):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
  from roberta_tf.models.modernbert import modernbert_encoder  # pylint: disable=import-outside-toplevel
  _patch_attention(spec)
  encoder = modernbert_encoder.build_modernbert_encoder(_config(), dtype=spec["precision"])
  tensor_spec = tf.TensorSpec([1, None], tf.int32)
  forward = tf.function(lambda ids, mask: encoder({"input_ids": ids, "padding_mask": mask})[
      "sequence_output"], input_signature=[tensor_spec, tensor_spec])

  def run(ids):
    forward(tf.constant(ids), tf.ones_like(tf.constant(ids))).numpy()
  return run, f"tensorflow {tf.__version__}", f"TF intra-op {spec['threads']}"


def _hf(spec: dict):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec["threads"])
  from roberta_tf.models.modernbert import modernbert_hf_config  # pylint: disable=import-outside-toplevel
  hf = modernbert_hf_config.config_to_hf(_config(), "ModernBertModel")
  config = transformers.ModernBertConfig(**{k: v for k, v in hf.items() if k != "architectures"})
  torch.manual_seed(0)
  model = transformers.ModernBertModel._from_config(  # pylint: disable=protected-access
      config, attn_implementation=spec["side"].split("_")[1]).eval()
  bf16 = spec["precision"] != "float32"

  def run(ids):
    with torch.no_grad(), (torch.autocast("cpu", dtype=torch.bfloat16) if bf16
                           else contextlib.nullcontext()):
      ids = torch.tensor(ids, dtype=torch.long)
      model(input_ids=ids, attention_mask=torch.ones_like(ids)).last_hidden_state.float().numpy()
  return (run, f"torch {torch.__version__}, transformers {transformers.__version__}",
          f"torch intra-op {spec['threads']}")


def _train(spec: dict):
  """(one update, versions, threads) of modernbert_vs_hf's worker for the side."""
  from benchmarks.training import modernbert_vs_hf  # pylint: disable=import-outside-toplevel
  if spec["side"].startswith("ours"):
    _patch_attention(spec)
    step, info = modernbert_vs_hf.build_worker("ours")(spec["worker_spec"])
  else:
    step, info = modernbert_vs_hf.build_worker("hf_sparse")(spec["worker_spec"])
  return (lambda: float(step())), info["versions"], info["threads"]


def _cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_SELF)
  return usage.ru_utime + usage.ru_stime  # every thread of the process


def _status_mb(field: str) -> float:
  with open("/proc/self/status", encoding="utf-8") as f:
    return next(int(line.split()[1]) for line in f if line.startswith(field)) / 1024  # kB


def _reset_peak() -> None:
  """Sets the RSS high-water mark (VmHWM) to the current RSS (Linux clear_refs 5), so the
  peak read later is the timed calls', not the model build's (HF's random init peaks higher
  than a 512-token forward)."""
  with open("/proc/self/clear_refs", "w", encoding="utf-8") as f:
    f.write("5")


def measure(spec: dict) -> dict:
  """The point of `spec` (module docstring), measured in this process."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  if spec["side"] not in SIDES:
    raise ValueError(f"side {spec['side']!r} is not one of {SIDES}")
  if spec["kind"] == "train":
    step, versions, thread_note = _train(spec)
    warm_up, call = step, step
  else:
    run, versions, thread_note = (_ours if spec["side"].startswith("ours") else _hf)(spec)
    rng = np.random.default_rng(0)
    ids = rng.integers(5, 50000, size=(1, spec["length"])).astype(np.int32)
    warm_up = lambda: run(rng.integers(5, 50000, size=(1, WARMUP_LENGTH)).astype(np.int32))
    call = lambda: run(ids)
  warm_up()
  first_peak, warm = _status_mb("VmHWM"), _status_mb("VmRSS")
  _reset_peak()
  seconds, cpu_seconds = [], []
  for _ in range(spec["repeats"]):
    start, cpu_start = time.perf_counter(), _cpu_seconds()
    call()
    seconds.append(time.perf_counter() - start)
    cpu_seconds.append(_cpu_seconds() - cpu_start)
  spec = {k: v for k, v in spec.items() if k not in ("worker_spec", "batches")}
  return {**spec, "seconds": seconds, "cpu_seconds": cpu_seconds,
          "peak_rss_mb": round(_status_mb("VmHWM")), "warm_rss_mb": round(warm),
          "first_peak_mb": round(first_peak), "versions": versions, "threads": thread_note}


def main(argv: list[str]) -> None:
  try:
    spec = json.loads(argv[0])
  except (IndexError, json.JSONDecodeError) as e:
    sys.exit(f"error: expected one JSON spec argument ({e})")
  print(json.dumps(measure(spec)), flush=True)


if __name__ == "__main__":
  main(sys.argv[1:])
