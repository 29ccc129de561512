r"""The sides of benchmarks/serving/vs_peers.py, one per process (TF's, torch's and onnxruntime's
thread pools must not share cores inside one process):

    python -m benchmarks.serving.peer_sides     # then JSON lines on stdin, answers on stdout

The first stdin line is the spec: {"side": one of SIDES, "path": the side's model, "threads": n};
the worker loads its model and answers {"ready": true, "versions": ..., "threads": ...}. Then
each request {"calls": [[text, ...], ...]} runs the calls one after the other, each call the
side's whole fill-mask on raw strings (tokenization, model, softmax/top-5 and the decoded top-5
tokens, as a server returns them), and answers {"seconds": [per call], "top1": [[the top-1 id
of each text's <mask>, or -1 when a text has none], ...]}. {"quit": true} ends it.

Sides (each at --threads intra-op threads):
  ours_fp32 / ours_bf16: `tf.saved_model.load(E).signatures["fill_mask"](text=tf.constant(...))`
      on roberta_tf.export's SavedModel of that precision (TF + tf-text only, as a server);
  hf_fp32 / hf_bf16: transformers' `pipeline("fill-mask", model=H, top_k=5, dtype=...)`,
      called on the list with batch_size = its length; bf16 is the model loaded in bfloat16
      (`dtype=torch.bfloat16`, what the pipeline docs and model cards show), not autocast;
  ort_fp32 / ort_int8: an onnxruntime InferenceSession (CPUExecutionProvider, default graph
      optimizations, inter-op 1) on the ONNX export / its dynamic int8 quantization, with
      HF's fast tokenizer (AutoTokenizer, padding to the longest) before and numpy
      softmax + top-5 + tokenizer.convert_ids_to_tokens after.
"""

from __future__ import annotations

import os
import sys
import time

from benchmarks.common import side_workers

SIDES = ("ours_fp32", "ours_bf16", "hf_fp32", "hf_bf16", "ort_fp32", "ort_int8")
TOP_K = 5


def build_ours(path: str, threads: int):
  from roberta_tf.serving import frozen_weights  # pylint: disable=import-outside-toplevel
  frozen_weights.serve_only()  # as the serving binaries and docs/serving_performance.md do
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  tf.config.threading.set_intra_op_parallelism_threads(threads)
  tf.config.threading.set_inter_op_parallelism_threads(threads)
  fill = tf.saved_model.load(path).signatures["fill_mask"]

  def predict(texts):
    out = fill(text=tf.constant(texts))
    out = {k: v.numpy() for k, v in out.items()}  # all of it to the host, as a server replies
    return [int(ids[0, 0]) if n else -1 for ids, n in zip(out["top_ids"], out["num_masks"],
                                                          strict=True)]

  info = {"versions": f"tensorflow {tf.__version__}, tensorflow-text {tensorflow_text.__version__}",
          "frozen_weights": os.environ.get(frozen_weights.ENV, ""),
          "threads": f"TF intra-op {tf.config.threading.get_intra_op_parallelism_threads()}, "
                     f"inter-op {tf.config.threading.get_inter_op_parallelism_threads()}"}
  return predict, info


def build_hf(path: str, threads: int, bf16: bool):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(threads)
  pipe = transformers.pipeline("fill-mask", model=path, top_k=TOP_K, device="cpu",
                               dtype=torch.bfloat16 if bf16 else torch.float32)

  def predict(texts):
    results = pipe(list(texts), batch_size=len(texts))
    if len(texts) == 1:
      results = [results]  # one text: the pipeline returns its list of predictions unwrapped
    return [int(r[0]["token"]) if r else -1 for r in results]

  info = {"versions": f"torch {torch.__version__}, transformers {transformers.__version__} "
                      f"(model dtype {pipe.model.dtype})",
          "threads": f"torch intra-op {torch.get_num_threads()}, inter-op "
                     f"{torch.get_num_interop_threads()}"}
  return predict, info


def build_ort(path: str, threads: int, hf_dir: str):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import onnxruntime as ort  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
  options = ort.SessionOptions()
  options.intra_op_num_threads, options.inter_op_num_threads = threads, 1
  session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

  def predict(texts):
    enc = tok(list(texts), padding=True, truncation=True, return_tensors="np")
    ids = enc["input_ids"].astype(np.int64)
    logits = session.run(["logits"], {"input_ids": ids,
                                      "attention_mask": enc["attention_mask"].astype(np.int64)})[0]
    rows, cols = np.nonzero(ids == tok.mask_token_id)
    scores = logits[rows, cols].astype(np.float32)  # [masks, V]
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    top = np.argpartition(-probs, TOP_K, axis=-1)[:, :TOP_K]
    top = np.take_along_axis(top, np.argsort(-np.take_along_axis(probs, top, -1), -1), -1)
    tok.convert_ids_to_tokens(top.reshape(-1).tolist())  # the reply's token strings
    first = {}
    for r, t in zip(rows.tolist(), top[:, 0].tolist(), strict=True):
      first.setdefault(r, t)
    return [first.get(i, -1) for i in range(len(texts))]

  info = {"versions": f"onnxruntime {ort.__version__}, transformers {transformers.__version__} "
                      "(tokenizer)",
          "threads": f"ORT intra-op {options.intra_op_num_threads}, inter-op "
                     f"{options.inter_op_num_threads}"}
  return predict, info


def build(spec: dict):
  """(predict(texts) -> top-1 ids, info) for spec["side"]."""
  side, path, threads = spec["side"], spec["path"], spec["threads"]
  if side.startswith("ours"):
    return build_ours(path, threads)
  if side.startswith("hf"):
    return build_hf(path, threads, bf16=side == "hf_bf16")
  return build_ort(path, threads, spec["hf_dir"])


def _calls(predict, request: dict) -> dict:
  """{"seconds": [s per call], "top1": [top-1 ids per call]} of request["calls"]."""
  seconds, top1 = [], []
  for texts in request["calls"]:
    start = time.perf_counter()
    top1.append(predict(texts))
    seconds.append(time.perf_counter() - start)
  return {"seconds": seconds, "top1": top1}


def main() -> int:
  """The worker loop (module docstring), side_workers.serve_requests' protocol."""
  return side_workers.serve_requests(build, _calls)


if __name__ == "__main__":
  sys.exit(main())
