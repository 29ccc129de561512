r"""Serving speed: our exported SavedModel's fill_mask vs. transformers' fill-mask pipeline and
ONNX Runtime, on the same weights, texts and thread count, tokenization included everywhere.

    python -m benchmarks.serving.vs_peers [--model_dir=EXISTING] [--rounds=3] [--threads=0] \
        [--sides=ours_fp32,ours_bf16,hf_fp32,hf_bf16,ort_fp32,ort_int8] [--record=FILE]

The model: --model_dir, or by default a `base` model (L12 H768 A12 F3072, max_seq_len 512) with
random weights (speed does not depend on them) and an --vocab_size byte-level BPE trained on
the Python docs corpus' training documents, cached in --work_dir (benchmarks/serving/peer_texts.py,
peer_jobs.py). The texts: held-out sentences of that corpus with one word replaced by
<mask>, "short" (10-14 tokens) and "long" (110-118 tokens).

The sides (benchmarks/serving/peer_sides.py says exactly what each call does):
  ours_fp32 / ours_bf16  `python -m roberta_tf.export --precision=P` of the model dir, loaded in
                         a fresh process with tf.saved_model.load, signature fill_mask on strings
                         (bf16: skipped, with a line, while the export has no --precision flag);
  hf_fp32 / hf_bf16      `convert_checkpoint --to_hf` of the same model dir in transformers'
                         pipeline("fill-mask", top_k=5), the model loaded in fp32 / bfloat16;
  ort_fp32 / ort_int8    that HF folder exported to ONNX (optimum's TorchScript exporter path)
                         and its dynamic int8 quantization, in onnxruntime with HF's fast
                         tokenizer and numpy softmax/top-5.
A peer whose packages are not installed is skipped with a line. Every side runs in its own
process at --threads intra-op threads; rounds alternate the sides (peer_rounds.py). Printed:
the CPU (model name, avx512_bf16 / amx_bf16), versions, threads, the table (texts/s at batch
--batch_size, p50/p90 ms at batch 1, short/long; each side's ratio to hf_bf16, > 1 faster) and
the top-1 agreement of each bf16/int8 side with its own fp32 (and of the fp32 peers with ours)
on the masked words: meaningful only for a trained --model_dir (random weights give
near-uniform predictions). One JSON line per run goes to --record.
"""

from __future__ import annotations

import datetime
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time

from absl import app, flags

from benchmarks.common import commands, starting_checkpoint
from benchmarks.serving import peer_rounds, peer_texts
from benchmarks.serving.peer_sides import SIDES

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", "", "An existing model dir to serve (default: a random-weight "
                    "`base` model built in --work_dir).")
flags.DEFINE_string("work_dir", os.path.join(commands.REPO, "runs", "serving_vs_peers"),
                    "Cache: vocabulary, base model, HF and ONNX conversions, worker logs.")
flags.DEFINE_string("corpus", commands.DOCS_CORPUS,
                    "The Python docs JSONL corpus (vocabulary and held-out texts).")
flags.DEFINE_integer("vocab_size", 8192, "BPE vocabulary of the default base model.")
flags.DEFINE_integer("threads", 0, "Intra-op threads of every side (0: os.cpu_count()).")
flags.DEFINE_integer("rounds", 10, "Timed rounds (after one warm-up round); the run's length.")
flags.DEFINE_integer("batch_size", 32, "Texts per call of the throughput figures.")
flags.DEFINE_integer("latency_calls", 6, "Batch-1 calls per text kind, side and round.")
flags.DEFINE_list("sides", list(SIDES), "Sides to run (of " + ", ".join(SIDES) + ").")
flags.DEFINE_string("baseline", "hf_bf16", "The side every ratio is taken to.")
flags.DEFINE_string("record", os.path.join(commands.REPO, "benchmarks", "records",
                                           "serving_vs_peers.jsonl"),
                    "Append the run's JSON line here ('' : don't).")
flags.DEFINE_bool("prepare_only", False, "Build the cached model, exports and conversions, "
                  "then stop (no timing: run this outside the CPU lock).")
flags.DEFINE_float("worker_timeout", 900.0, "Seconds to wait for a worker's answer.")

PEER_PACKAGES = {"hf": ("torch", "transformers"), "ort": ("onnxruntime", "onnx", "torch",
                                                          "transformers")}
AGREEMENT = [("ours_bf16", "ours_fp32"), ("hf_bf16", "hf_fp32"), ("ort_int8", "ort_fp32"),
             ("hf_fp32", "ours_fp32"), ("ort_fp32", "ours_fp32")]


def cpu_line() -> dict:
  """{"model": /proc/cpuinfo's model name x logical CPUs, "bf16": the bf16 ISA flags present}."""
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    flag_words = next((line.split(":", 1)[1].split() for line in f
                       if line.startswith("flags")), [])
  isa = {f: f in flag_words for f in ("avx512_bf16", "amx_bf16")}
  return {"model": starting_checkpoint.host(), **isa}


def model_and_vocab(work: str) -> tuple[str, str, bool]:
  """(model dir, its vocabulary dir, random weights?): --model_dir or the cached base model."""
  if FLAGS.model_dir:
    return FLAGS.model_dir, FLAGS.model_dir, False
  paragraphs = peer_texts.paragraphs(FLAGS.corpus)
  vocab_dir = peer_texts.train_vocab(work, paragraphs["train"], FLAGS.vocab_size)
  model_dir = os.path.join(work, "base_model")
  if not os.path.isfile(os.path.join(model_dir, "checkpoint")):
    commands.run_module(["benchmarks.serving.peer_jobs", "base_model",
                         json.dumps({"vocab_dir": vocab_dir, "model_dir": model_dir})],
                        os.path.join(work, "base_model.log"), timed=True)
  return model_dir, vocab_dir, True


def export_ours(model_dir: str, export_dir: str, precision: str, log: str) -> str:
  """Exports at `precision` ('' when done); else the reason the side is skipped. float32 falls
  back to the flag-less export (float32 by definition) while --precision does not exist."""
  base = ["roberta_tf.export", f"--model_dir={model_dir}", f"--export_dir={export_dir}",
          "--overwrite"]
  for args in (base + [f"--precision={precision}"], base):
    start = time.time()
    proc = subprocess.run([sys.executable, "-m", *args], cwd=commands.REPO, capture_output=True,
                          text=True, check=False)
    with open(log, "a", encoding="utf-8") as f:
      f.write(" ".join(args) + "\n" + proc.stdout + proc.stderr)
    if not proc.returncode:
      how = args[-1] if args[-1].startswith("--precision") else "no --precision flag: float32"
      print(f"    export ({how}) {time.time() - start:.0f} s", flush=True)
      return ""
    no_flag = "Unknown command line flag" in proc.stderr and "precision" in proc.stderr
    if not no_flag:
      return f"roberta_tf.export failed:\n{proc.stderr[-1500:]}"
    if precision != "float32":
      return "roberta_tf.export has no --precision flag yet"
  return "unreachable"


def derived_dir(work: str, model_dir: str) -> str:
  """work/derived/<name>-<hash of the model dir's path and newest checkpoint>."""
  with open(os.path.join(model_dir, "checkpoint"), encoding="utf-8") as f:
    key = os.path.abspath(model_dir) + f.read()
  name = os.path.basename(os.path.normpath(model_dir))
  return os.path.join(work, "derived", f"{name}-{hashlib.sha1(key.encode()).hexdigest()[:10]}")


def peer_paths(derived: str, model_dir: str, wanted: set[str], skipped: dict) -> dict:
  """{side: model path} of the HF and ORT sides that can run; the others go to `skipped`."""
  paths = {}
  missing = {p: [m for m in mods if importlib.util.find_spec(m) is None]
             for p, mods in PEER_PACKAGES.items()}
  for side in sorted(wanted):
    peer = side.split("_")[0]
    if peer in missing and missing[peer]:
      skipped[side] = f"not installed: {', '.join(missing[peer])}"
      print(f"{side}: skipped ({skipped[side]})", flush=True)
  if not wanted & {"hf_fp32", "hf_bf16", "ort_fp32", "ort_int8"} - set(skipped):
    return paths
  hf_dir = starting_checkpoint.to_hf(derived, model_dir)
  paths.update(hf_fp32=hf_dir, hf_bf16=hf_dir, hf_dir=hf_dir)
  onnx = {"fp32": os.path.join(derived, "model.onnx"),
          "int8": os.path.join(derived, "model_int8.onnx")}
  if {"ort_fp32", "ort_int8"} & wanted - set(skipped):
    if not os.path.isfile(onnx["int8"]):
      commands.run_module(["benchmarks.serving.peer_jobs", "onnx",
                           json.dumps({"hf_dir": hf_dir, **onnx})],
                          os.path.join(derived, "onnx.log"), timed=True)
    paths.update(ort_fp32=onnx["fp32"], ort_int8=onnx["int8"])
  return paths


def start_workers(paths: dict, sides: list[str], threads: int, work: str) -> tuple[dict, dict]:
  """The side workers, started one after the other; ({side: Worker}, {side: ready info})."""
  workers, info = {}, {}
  try:
    for side in sides:
      spec = {"side": side, "path": paths[side], "threads": threads,
              "hf_dir": paths.get("hf_dir", "")}
      workers[side] = peer_rounds.Worker(spec, work, FLAGS.worker_timeout)
      info[side] = workers[side].answer()
      print(f"  {side}: {info[side]['versions']}; {info[side]['threads']}", flush=True)
  except peer_rounds.WorkerError:
    for worker in workers.values():
      worker.close()
    raise
  return workers, info


def table(rows: dict, baseline: str) -> list[str]:
  """The printed table: one line per side."""
  lines = [f"{'side':10} {'texts/s@' + str(FLAGS.batch_size):>16} {'p50/p90 ms @1 short':>20} "
           f"{'p50/p90 ms @1 long':>20}   vs {baseline} (x, >1 faster): t/s short, long; "
           "p50 short, long",
           f"{'':10} {'short':>8}{'long':>8}"]
  for side, r in rows.items():
    t, p50, p90, v = r["texts_per_s"], r["p50_ms"], r["p90_ms"], r["vs_baseline"]
    ratios = ("  ".join(f"{v[k]:.2f}" for k in ("texts_per_s_short", "texts_per_s_long",
                                                "p50_short", "p50_long")) if v else "-")
    lines.append(f"{side:10} {t['short']:8.1f}{t['long']:8.2f} "
                 f"{p50['short']:>11.0f}/{p90['short']:<8.0f} {p50['long']:>11.0f}/"
                 f"{p90['long']:<8.0f}   {ratios}")
  return lines


def export_code_hash() -> str:
  """A hash of the export's code (roberta_tf/export.py, roberta_tf/serving/*.py and the model
  it rebuilds, roberta_tf/models/*.py): a cached export is reused only while that code is
  unchanged."""
  digest = hashlib.sha1()
  package = os.path.join(commands.REPO, "roberta_tf")
  for path in [os.path.join(package, "export.py")] + sorted(
      os.path.join(package, folder, n) for folder in ("serving", "models")
      for n in os.listdir(os.path.join(package, folder)) if n.endswith(".py")):
    with open(path, "rb") as f:
      digest.update(f.read())
  return digest.hexdigest()[:10]


def ours_paths(model_dir: str, derived: str, wanted: set[str], skipped: dict) -> dict:
  """{side: SavedModel dir} of ours' sides that export (cached per export code)."""
  paths = {}
  for side, precision in (("ours_fp32", "float32"), ("ours_bf16", "bfloat16")):
    if side not in wanted:
      continue
    export_dir = os.path.join(derived, f"export_{precision}_{export_code_hash()}")
    for stale in glob.glob(os.path.join(derived, f"export_{precision}_*")):
      if stale != export_dir:
        shutil.rmtree(stale)  # an export of older export code
    why = "" if os.path.isfile(os.path.join(export_dir, "saved_model.pb")) else export_ours(
        model_dir, export_dir, precision, os.path.join(derived, "export.log"))
    if why:
      skipped[side] = why
      print(f"{side}: skipped ({why.splitlines()[0]})", flush=True)
    else:
      paths[side] = export_dir
  return paths


def prepare(work: str, skipped: dict) -> dict:
  """Model, texts and every side's model path (cached in `work`); prints what it builds."""
  model_dir, vocab_dir, random_init = model_and_vocab(work)
  wanted = set(FLAGS.sides)
  derived = derived_dir(work, model_dir)
  os.makedirs(derived, exist_ok=True)
  paths = ours_paths(model_dir, derived, wanted, skipped)
  paths.update(peer_paths(derived, model_dir, wanted, skipped))
  count = FLAGS.batch_size * (FLAGS.rounds + 1)
  held_out = peer_texts.paragraphs(FLAGS.corpus)["held_out"]
  texts = peer_texts.held_out_texts(held_out, vocab_dir, count, least=FLAGS.batch_size)
  from roberta_tf.models import model_dir as model_dir_lib  # pylint: disable=import-outside-toplevel
  config = model_dir_lib.ModelDir(model_dir).model_config().to_dict()
  return {"model_dir": model_dir, "random_init": random_init, "paths": paths, "texts": texts,
          "dims": {k: config[k] for k in ("num_layers", "hidden_size", "num_heads",
                                           "intermediate_size", "vocab_size")},
          "mean_tokens": {k: peer_texts.mean_tokens(v, vocab_dir) for k, v in texts.items()}}


def git_state() -> str:
  """HEAD's short commit, "+dirty" when the export or serving code has uncommitted edits (the
  exports measured were made from the working tree)."""
  dirty = subprocess.run(["git", "status", "--porcelain", "--", "roberta_tf/export.py",
                          "roberta_tf/serving"], cwd=commands.REPO, capture_output=True,
                         text=True, check=False).stdout.strip()
  return starting_checkpoint.git_head() + ("+dirty" if dirty else "")


def report(setup: dict, raw: dict, info: dict, skipped: dict, cpu: dict, threads: int) -> dict:
  """Prints the table and agreement lines; returns the record."""
  rows = peer_rounds.summarize(raw, FLAGS.baseline)
  agree = peer_rounds.agreement(raw, AGREEMENT)
  print("\n" + "\n".join(table(rows, FLAGS.baseline)))
  for side, why in skipped.items():
    print(f"{side}: skipped ({why.splitlines()[0]})")
  note = " (random weights: not meaningful)" if setup["random_init"] else ""
  print(f"top-1 agreement on the masked words{note}:")
  for pair, a in agree.items():
    print(f"  {pair}: {a['all']:.1%} of {a['total']} (short {a['short']:.1%}, long "
          f"{a['long']:.1%})")
  return {"finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
          "git": git_state(), "cpu": cpu, "threads": threads,
          "model_dir": setup["model_dir"], "random_init": setup["random_init"],
          "dims": setup["dims"], "mean_tokens": setup["mean_tokens"], "rounds": FLAGS.rounds,
          "batch_size": FLAGS.batch_size, "latency_calls": FLAGS.latency_calls,
          "baseline": FLAGS.baseline, "sides": rows, "agreement": agree, "skipped": skipped,
          "versions": {s: i["versions"] for s, i in info.items()},
          "raw": {s: {"texts_per_s": out["rate"], "latency_ms": {
              k: [[round(1e3 * x, 1) for x in calls] for calls in out["latency"][k]]
              for k in out["latency"]}} for s, out in raw.items()},
          "side_threads": {s: i["threads"] for s, i in info.items()}}


def main(argv):
  del argv
  unknown = set(FLAGS.sides) - set(SIDES)
  if unknown:
    sys.exit(f"--sides: unknown {sorted(unknown)} (known: {', '.join(SIDES)})")
  threads = FLAGS.threads or os.cpu_count()
  cpu = cpu_line()
  print(f"CPU: {cpu['model']}; avx512_bf16: {cpu['avx512_bf16']}, amx_bf16: {cpu['amx_bf16']}; "
        f"{threads} threads a side", flush=True)
  work = FLAGS.work_dir
  os.makedirs(work, exist_ok=True)
  skipped, workers = {}, {}
  try:
    setup = prepare(work, skipped)
    if FLAGS.prepare_only:
      return
    note = " (random weights)" if setup["random_init"] else ""
    print(f"model: {setup['model_dir']} {setup['dims']}{note}; "
          f"texts: {len(setup['texts']['short'])} short + {len(setup['texts']['long'])} long, "
          f"mean tokens {setup['mean_tokens']['short']:.1f} / "
          f"{setup['mean_tokens']['long']:.1f}",
          flush=True)
    sides = [s for s in FLAGS.sides if s in setup["paths"]]
    workers, info = start_workers(setup["paths"], sides, threads, work)
    raw = peer_rounds.run_rounds(workers, setup["texts"], FLAGS.rounds, FLAGS.batch_size,
                                 FLAGS.latency_calls)
  except peer_rounds.WorkerError as e:
    sys.exit(str(e))
  finally:
    for worker in workers.values():
      worker.close()
  record = report(setup, raw, info, skipped, cpu, threads)
  if FLAGS.record:
    with open(FLAGS.record, "a", encoding="utf-8") as f:
      f.write(json.dumps(record) + "\n")
    print(f"recorded in {FLAGS.record}")


if __name__ == "__main__":
  app.run(main)
