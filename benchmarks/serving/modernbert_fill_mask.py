"""modernbert_vs_hf's serving half: fill-mask texts/s at a batch and batch-1 latency, ours
(a tf.function of ModernBertPretrainer.full_logits, the top 5 at the mask) vs transformers'
fill-mask pipeline (ModernBertForMaskedLM, sdpa, top_k=5), each in its own process.

Texts: prose sentences of the repository's Python-docs slice (tests/testdata), one word (3+
letters, not the first) replaced by [MASK], tokenized by the ModernBERT tokenizer.json fixture
(tests/testdata/modernbert_tiny) with [CLS] .. [SEP], at most MAX_TOKENS tokens. The pipeline gets
the texts (its tokenization, fast Rust, is in its time); ours gets those same token ids, padded
to the batch's longest (no tokenization in its time: the SavedModel export on raw strings is not
built yet). The model: --preset at --vocab_size, float32, random weights on each side (speed
only; the logits' parity is tests/', not this). Rounds alternate the sides; medians.

Workers: `python -m benchmarks.serving.modernbert_fill_mask ours|hf` (side_workers protocol;
requests {"batch": [text indices]} answered with {"seconds"}).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import statistics
import sys
import time

from benchmarks.common import commands, window_records
from benchmarks.common.our_modernbert import build_our_model
from benchmarks.common.side_workers import Worker, serve_requests

FIXTURE = os.path.join(commands.REPO, "tests", "testdata", "modernbert_tiny")
MAX_TOKENS = 128
_WORD = re.compile(r"(?<=\s)[A-Za-z]{3,}(?=[\s.,;:!?)])")
SIDES = ("ours", "hf")
LABELS = {"ours": "ours (tf.function full_logits + top 5)", "hf": "HF fill-mask pipeline"}


def masked_texts(count: int, seed: int = 0) -> list[str]:
  """`count` sentences of the docs slice, each with one word replaced by [MASK]."""
  sentences = []
  with gzip.open(commands.DOCS_SLICE, "rt", encoding="utf-8") as f:
    for line in f:
      text = " ".join(json.loads(line)["text"].split())
      sentences += [s for s in re.split(r"(?<=[.!?])\s+", text)
                    if 60 <= len(s) <= 500 and not re.search(r"[=`*_|<>]", s)]
  rng = random.Random(seed)
  rng.shuffle(sentences)
  out = []
  for sentence in sentences:
    words = list(_WORD.finditer(sentence))
    if words:
      w = rng.choice(words)
      out.append(sentence[:w.start()] + "[MASK]" + sentence[w.end():])
    if len(out) == count:
      break
  return out


def _tokenizer():
  import tokenizers  # pylint: disable=import-outside-toplevel
  return tokenizers.Tokenizer.from_file(os.path.join(FIXTURE, "tokenizer.json"))


class ServingWorker(Worker):
  """A serving side's process: `run_request` sends one request and returns the answer."""

  def run_request(self, request: dict) -> dict:
    self._send(request)
    return self.answer()


def encode(texts: list[str]) -> list[list[int]]:
  """The fixture tokenizer's ids of each text ([CLS] .. [SEP], cut to MAX_TOKENS)."""
  tok = _tokenizer()
  tok.enable_truncation(MAX_TOKENS)
  return [e.ids for e in tok.encode_batch(texts)]


def _padded(ids: list[list[int]], pad_id: int):
  import numpy as np  # pylint: disable=import-outside-toplevel
  width = max(len(x) for x in ids)
  out = np.full((len(ids), width), pad_id, np.int32)
  for i, x in enumerate(ids):
    out[i, :len(x)] = x
  return out, (out != pad_id).astype(np.int32)


def build_ours(spec: dict):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
  model = build_our_model(spec["model_config"], "float32")

  @tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32)] * 2)
  def fill_mask(ids, mask):
    logits = model.full_logits(ids, mask)  # [B, S, V]
    at_mask = tf.gather_nd(logits, tf.where(ids == spec["mask_id"]))  # [masks, V]
    return tf.math.top_k(tf.nn.softmax(at_mask), k=5)

  ids = spec["ids"]

  def handle(_, request):
    batch, mask = _padded([ids[i] for i in request["batch"]], spec["pad_id"])
    start = time.perf_counter()
    fill_mask(tf.constant(batch), tf.constant(mask)).indices.numpy()
    return {"seconds": time.perf_counter() - start}
  return None, {"versions": f"tensorflow {tf.__version__}"}, handle


def build_hf(spec: dict):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec["threads"])
  torch.manual_seed(0)
  config = transformers.ModernBertConfig(**{k: v for k, v in spec["hf_config"].items()
                                            if k not in ("architectures", "model_type")})
  model = transformers.ModernBertForMaskedLM._from_config(  # pylint: disable=protected-access
      config, attn_implementation="sdpa").eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(FIXTURE)
  pipe = transformers.pipeline("fill-mask", model=model, tokenizer=tokenizer, top_k=5,
                               device="cpu")
  texts = spec["texts"]

  def handle(_, request):
    batch = [texts[i] for i in request["batch"]]
    start = time.perf_counter()
    pipe(batch, batch_size=len(batch),
         tokenizer_kwargs={"truncation": True, "max_length": MAX_TOKENS})
    return {"seconds": time.perf_counter() - start}
  return None, {"versions": f"torch {torch.__version__}, transformers "
                            f"{transformers.__version__}"}, handle


def worker_main(side: str) -> int:
  handlers = {}

  def build(spec):
    state, info, handle = (build_ours if side == "ours" else build_hf)(spec)
    handlers["handle"] = handle
    return state, info
  return serve_requests(build, lambda state, request: handlers["handle"](state, request))


def run(args, work: str, extra: dict) -> list:
  """Times both sides; prints the table, appends records to --json_out; returns where ours is
  slower ([(what, label)])."""
  from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig, preset  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert.modernbert_hf_config import config_to_hf  # pylint: disable=import-outside-toplevel
  with open(os.path.join(FIXTURE, "config.json"), encoding="utf-8") as f:
    fixture = json.load(f)
  config = preset(args.preset, vocab_size=args.vocab_size, pad_id=fixture["pad_token_id"],
                  bos_id=fixture["cls_token_id"], eos_id=fixture["sep_token_id"])
  texts = masked_texts(args.serving_batch * 4)
  ids = encode(texts)
  mask_id = _tokenizer().token_to_id("[MASK]")
  texts, ids = zip(*[(t, x) for t, x in zip(texts, ids, strict=True) if x.count(mask_id) == 1])
  common = {"threads": args.threads, "texts": list(texts), "ids": [list(x) for x in ids],
            "pad_id": config.pad_id, "mask_id": mask_id}
  specs = {"ours": {**common, "model_config": config.to_dict()},
           "hf": {**common, "hf_config": config_to_hf(ModernBertConfig.from_dict(
               config.to_dict()))}}
  print(f"\nserving: {len(texts)} texts of the docs slice, {min(map(len, ids))}-"
        f"{max(map(len, ids))} tokens (mean {statistics.mean(map(len, ids)):.0f}), one [MASK] "
        f"each; ModernBERT {args.preset} V={args.vocab_size} float32", flush=True)
  workers = {}
  try:
    for side in SIDES:
      workers[side] = ServingWorker(
          LABELS[side], [sys.executable, "-m", "benchmarks.serving.modernbert_fill_mask", side],
          specs[side], os.path.join(work, f"serve_{side}.stderr"), args.worker_timeout,
          commands.REPO)
      print(f"{LABELS[side]}: {workers[side].start()['versions']}", flush=True)
    results = _time(workers, args, len(texts), extra)
  finally:
    for worker in workers.values():
      worker.close()
  print(f"{'':40} {'texts/s @' + str(args.serving_batch):>14} {'batch-1 ms':>11}")
  for side in SIDES:
    print(f"{LABELS[side]:40} {results[side]['texts_per_sec']:14,.1f} "
          f"{results[side]['latency_ms']:11.1f}")
  rate = results["ours"]["texts_per_sec"] / results["hf"]["texts_per_sec"]
  latency = results["hf"]["latency_ms"] / results["ours"]["latency_ms"]
  print(f"ours / HF: {rate:.2f}x texts/s, {latency:.2f}x faster at batch 1", flush=True)
  slower = [("serving texts/s", LABELS["hf"])] if rate < 1 else []
  return slower + ([("serving batch-1 latency", LABELS["hf"])] if latency < 1 else [])


def _time(workers: dict, args, num_texts: int, extra: dict) -> dict:
  b = args.serving_batch
  batches = [list(range(i, i + b)) for i in range(0, num_texts - b + 1, b)]
  seconds = {(side, kind): [] for side in SIDES for kind in ("batch", "single")}
  for side in SIDES:  # warm-up: tracing (ours per new shape), first allocations
    for batch in batches[:2] + [[0], [1]]:
      workers[side].run_request({"batch": batch})
  for r in range(args.serving_rounds):
    for side in SIDES if r % 2 == 0 else SIDES[::-1]:
      batch_s = workers[side].run_request({"batch": batches[r % len(batches)]})["seconds"]
      single = [workers[side].run_request({"batch": [(r * 8 + i) % num_texts]})["seconds"]
                for i in range(8)]
      seconds[(side, "batch")].append(batch_s)
      seconds[(side, "single")].append(statistics.median(single))
      window_records.append(args.json_out, {
          "kind": "serving_window", "preset": args.preset, "vocab_size": args.vocab_size,
          "round": r, "side": side, "batch_size": b, "threads": args.threads,
          "batch_seconds": batch_s, "texts_per_sec": b / batch_s,
          "batch1_latency_ms": 1000 * statistics.median(single),
          "load_average": window_records.load_average(), **extra})
  return {side: {"texts_per_sec": b / statistics.median(seconds[(side, "batch")]),
                 "latency_ms": 1000 * statistics.median(seconds[(side, "single")])}
          for side in SIDES}


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.exit(worker_main(sys.argv[1]))
