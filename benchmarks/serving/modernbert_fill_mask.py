"""modernbert_vs_hf's serving half: fill-mask texts/s at a batch and batch-1 latency, ours
(the SavedModel `roberta_tf.export` writes, its `fill_mask` signature: strings in, top 5 out)
vs transformers' fill-mask pipeline (ModernBertForMaskedLM, sdpa, top_k=5: strings in, top 5
out), each in its own process. Like for like: both sides get the raw texts, tokenize them
(ours in the SavedModel's TF ops, HF's Rust tokenizer), cut them to MAX_TOKENS tokens, run the
model and return the top 5 at each [MASK].

Texts: prose sentences of the repository's Python-docs slice (tests/testdata), one word (3+
letters, not the first) replaced by [MASK]. Vocabulary: the ModernBERT tokenizer.json fixture
(tests/testdata/modernbert_tiny: [CLS] .. [SEP]) with its BPE vocabulary padded to --vocab_size
by entries no merge produces (`padded_vocabulary`: ModernBERT pads its own to 50,368 the same
way, with unused tokens), so the model has the real vocabulary's size (the decoder's cost) and
both sides tokenize the texts exactly as the fixture does; ours checks that its ids equal HF's
on every text before timing. The model: --preset at --vocab_size, float32, random weights on
each side (speed only; the logits' parity is tests/', not this). Ours serves as the serving
binaries do (serving/frozen_weights.py's `serve_only`). Rounds alternate the sides; medians.

Workers: `python -m benchmarks.serving.modernbert_fill_mask ours|hf` (side_workers protocol;
requests {"batch": [text indices]} answered with {"seconds"}).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
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
LABELS = {"ours": "ours (SavedModel fill_mask signature)", "hf": "HF fill-mask pipeline"}


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


def _tokenizer(vocab_dir: str = FIXTURE):
  import tokenizers  # pylint: disable=import-outside-toplevel
  return tokenizers.Tokenizer.from_file(os.path.join(vocab_dir, "tokenizer.json"))


def padded_vocabulary(out_dir: str, vocab_size: int) -> str:
  """Writes the fixture's tokenizer.json (and its role files) into `out_dir` with its BPE
  vocabulary padded to `vocab_size` ids by entries no merge produces ("<|unused_i|>" at the ids
  above the fixture's last): any text gets the fixture's ids. Returns `out_dir`."""
  os.makedirs(out_dir, exist_ok=True)
  with open(os.path.join(FIXTURE, "tokenizer.json"), encoding="utf-8") as f:
    spec = json.load(f)
  vocab = spec["model"]["vocab"]
  first = 1 + max([*vocab.values(), *(t["id"] for t in spec["added_tokens"])])
  if vocab_size < first:
    raise ValueError(f"--vocab_size={vocab_size}: the fixture vocabulary has {first} ids")
  # The added tokens' ids go into the model's vocabulary too: `tokenizers` numbers an added
  # token the BPE vocabulary lacks as len(vocabulary) + its index, which the padding would move.
  vocab.update({t["content"]: t["id"] for t in spec["added_tokens"]})
  vocab.update({f"<|unused_{i}|>": i for i in range(first, vocab_size)})
  with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
    json.dump(spec, f, ensure_ascii=False)
  for name in ("special_tokens_map.json", "tokenizer_config.json"):
    shutil.copy(os.path.join(FIXTURE, name), out_dir)
  return out_dir


class ServingWorker(Worker):
  """A serving side's process: `run_request` sends one request and returns the answer."""

  def run_request(self, request: dict) -> dict:
    self._send(request)
    return self.answer()


def encode(texts: list[str], vocab_dir: str = FIXTURE) -> list[list[int]]:
  """HF `tokenizers`' ids of each text ([CLS] .. [SEP], cut to MAX_TOKENS)."""
  tok = _tokenizer(vocab_dir)
  tok.enable_truncation(MAX_TOKENS)
  return [e.ids for e in tok.encode_batch(texts)]


def export_ours(spec: dict, work: str) -> str:
  """Our pretrainer of spec's config (random weights) as a model dir with the padded
  vocabulary, exported by `roberta_tf.export`'s function at MAX_TOKENS; returns the export."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models import model_dir
  from roberta_tf.serving import mlm_export
  from roberta_tf.tokenization import vocab_files
  model, vocab_dir = build_our_model(spec["model_config"], "float32"), spec["vocab_dir"]
  model_path, export_path = os.path.join(work, "ours_model"), os.path.join(work, "ours_export")
  model_dir.save(model_path, model, files={
      name: os.path.join(vocab_dir, name) for name in vocab_files.vocabulary_files(vocab_dir)})
  return mlm_export.export_saved_model(model_path, export_path, max_seq_len=MAX_TOKENS,
                                       top_k=5, precision=spec["precision"])


def build_ours(spec: dict):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

  from roberta_tf.serving import frozen_weights  # pylint: disable=import-outside-toplevel
  frozen_weights.serve_only()  # as the serving binaries do (no weight changes in this process)
  tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
  export = export_ours(spec, spec["work"])
  signatures = tf.saved_model.load(export).signatures
  fill_mask, texts = signatures["fill_mask"], spec["texts"]
  for i in range(0, len(texts), 32):  # the SavedModel's tokenizer gives HF's ids
    out = signatures["tokenize"](text=tf.constant(texts[i:i + 32]))
    for row, (ids, mask) in enumerate(zip(out["input_ids"].numpy(),
                                          out["padding_mask"].numpy(), strict=True)):
      if ids[mask > 0].tolist() != spec["ids"][i + row]:
        raise ValueError(f"our tokenize differs from HF's on text {i + row}: {texts[i + row]!r}")

  def handle(_, request):
    batch = tf.constant([texts[i] for i in request["batch"]])
    start = time.perf_counter()
    out = fill_mask(text=batch)
    np.asarray(out["top_ids"]), np.asarray(out["top_tokens"])
    return {"seconds": time.perf_counter() - start}
  return None, {"versions": f"tensorflow {tf.__version__}, {spec['precision']} export, "
                            f"{frozen_weights.ENV}={os.environ[frozen_weights.ENV]}"}, handle


def build_hf(spec: dict):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec["threads"])
  torch.manual_seed(0)
  config = transformers.ModernBertConfig(**{k: v for k, v in spec["hf_config"].items()
                                            if k not in ("architectures", "model_type")})
  model = transformers.ModernBertForMaskedLM._from_config(  # pylint: disable=protected-access
      config, attn_implementation="sdpa").eval()
  tokenizer = transformers.AutoTokenizer.from_pretrained(spec["vocab_dir"])
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
  vocab_dir = padded_vocabulary(os.path.join(work, "vocab"), args.vocab_size)
  texts = masked_texts(args.serving_batch * 4)
  ids = encode(texts, vocab_dir)
  mask_id = _tokenizer(vocab_dir).token_to_id("[MASK]")
  texts, ids = zip(*[(t, x) for t, x in zip(texts, ids, strict=True) if x.count(mask_id) == 1])
  common = {"threads": args.threads, "texts": list(texts), "ids": [list(x) for x in ids],
            "vocab_dir": vocab_dir, "work": work, "precision": "float32"}
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
          "input": "raw strings", "max_tokens": MAX_TOKENS,
          "batch_seconds": batch_s, "texts_per_sec": b / batch_s,
          "batch1_latency_ms": 1000 * statistics.median(single),
          "load_average": window_records.load_average(), **extra})
  rate = [h / o for o, h in zip(seconds[("ours", "batch")], seconds[("hf", "batch")],
                                 strict=True)]  # ours / HF texts/s, round by round
  latency = [h / o for o, h in zip(seconds[("ours", "single")], seconds[("hf", "single")],
                                   strict=True)]
  window_records.append(args.json_out, {
      "kind": "serving_summary", "preset": args.preset, "vocab_size": args.vocab_size,
      "batch_size": b, "threads": args.threads, "input": "raw strings",
      "max_tokens": MAX_TOKENS, "ratio_texts_per_sec": statistics.median(rate),
      "ratio_texts_per_sec_range": [min(rate), max(rate)],
      "ratio_latency": statistics.median(latency), "ratio_latency_range": [min(latency),
                                                                           max(latency)],
      "load_average": window_records.load_average(), **extra})
  return {side: {"texts_per_sec": b / statistics.median(seconds[(side, "batch")]),
                 "latency_ms": 1000 * statistics.median(seconds[(side, "single")])}
          for side in SIDES}


if __name__ == "__main__":
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.exit(worker_main(sys.argv[1]))
