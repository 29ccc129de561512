r"""Does each worker read only its share of the shards? Reads per worker at 1, 2 and 4 workers.

    python benchmarks/worker_reads.py [--data=SHARDS] [--workers=1,2,4] [--steps=300] \
        [--batch_size=64] [--grad_accum_steps=2] [--max_seq_len=128] [--input_lanes=8]

For each number of workers W, W processes on localhost (TF_CONFIG, MultiWorkerMirroredStrategy,
one CPU replica each) build the training input as `roberta_tf.train` does
(pretraining/inputs.build_datasets: the run's input lanes, `distribute_datasets_from_function`)
and take --steps steps of --grad_accum_steps micro-batches each. Every worker measures, around the
iteration only, the bytes its process read (rchar of /proc/self/io: every read(2)/pread(2),
from disk or page cache) and the records its TFRecord readers returned (tf.data.TFRecordDataset
wrapped with a counter), and hashes each row it got (ids and masks). Per step, the rows of all
workers together must be the rows of the 1-worker run. The same runs at --input_lanes=1 (the
stream before lanes) are the comparison. Without --data, shards are built first from the
python-docs corpus (../shared/corpora, or the test slice) with the fixture vocabulary: 16 shards.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

HF_TINY = os.path.join(REPO, "tests", "testdata", "hf_roberta_tiny")
CORPORA = [os.path.join(REPO, "..", "shared", "corpora", "python-docs.jsonl.gz"),
           os.path.join(REPO, "tests", "testdata", "python_docs_small.jsonl.gz")]


def parse_args(argv=None):
  # argparse, not absl flags: this script imports data_prep, whose absl flags would clash.
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", help="Shard directory; default: build one from the corpus.")
  p.add_argument("--workers", default="1,2,4", help="Worker counts to run (comma list).")
  p.add_argument("--steps", type=int, default=300, help="Steps each run takes.")
  p.add_argument("--batch_size", type=int, default=64, help="Global sequences per step.")
  p.add_argument("--grad_accum_steps", type=int, default=2, help="Micro-batches per step.")
  p.add_argument("--max_seq_len", type=int, default=128, help="Padded sequence length S.")
  p.add_argument("--input_lanes", type=int, default=8, help="--input_lanes of the lane runs.")
  p.add_argument("--timeout", type=int, default=600, help="Seconds per run.")
  p.add_argument("--worker_out", help=argparse.SUPPRESS)  # set in the worker processes
  return p.parse_args(argv)


def _rchar() -> int:
  with open("/proc/self/io", encoding="ascii") as f:
    return int(next(line for line in f if line.startswith("rchar:")).split()[1])


def worker(args) -> None:
  """One worker process (TF_CONFIG set): iterate the train input, write what it read."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining import inputs  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.training import strategy as strategy_lib  # pylint: disable=import-outside-toplevel

  strategy = strategy_lib.make_strategy("multi_worker", peer_timeout_s=120, log=lambda _: None)
  records = [0]
  reader = tf.data.TFRecordDataset

  def bump(r):
    records[0] += 1
    return r

  def counted(*a, **kw):  # every record a shard reader returns, counted
    return reader(*a, **kw).map(lambda r: tf.ensure_shape(
        tf.py_function(bump, [r], tf.string), []))
  tf.data.TFRecordDataset = counted

  cfg = TrainConfig(model_dir=os.path.join(os.path.dirname(args.worker_out), "model"),
                    train_data=args.data, config="tiny", max_seq_len=args.max_seq_len,
                    batch_size=args.batch_size, grad_accum_steps=args.grad_accum_steps,
                    input_lanes=args.input_lanes, strategy="multi_worker")
  info = dataset_info.read(args.data)
  train, _ = inputs.build_datasets(cfg, strategy, model_config_for(cfg, info), start=0)
  lanes = inputs.input_lanes(cfg, info)
  before, start = _rchar(), time.perf_counter()
  it = iter(train)
  steps = []
  for _ in range(args.steps):
    rows = []
    for _ in range(args.grad_accum_steps):
      for batch in strategy.experimental_local_results(next(it)):
        b = {k: v.numpy() for k, v in batch.items()}
        rows += [hashlib.sha1(b"".join(b[k][i].tobytes() for k in sorted(b))).hexdigest()[:16]
                 for i in range(len(b["input_ids"]))]
    steps.append(rows)
  read, seconds, n = _rchar() - before, time.perf_counter() - start, records[0]
  del it
  # Every worker holds its process until all are done (a peer's exit is an error to the others).
  strategy.reduce("SUM", strategy.run(lambda: tf.constant(1.0)), axis=None)
  with open(args.worker_out, "w", encoding="utf-8") as f:
    json.dump({"bytes": read, "records": n, "seconds": seconds, "lanes": lanes,
               "steps": steps}, f)


def free_port() -> int:
  import socket  # pylint: disable=import-outside-toplevel
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def run(args, data, workers: int, lanes: int, tmp: str) -> list[dict]:
  """W worker processes at once; their results, by task index."""
  ports = [free_port() for _ in range(workers)]
  out = os.path.join(tmp, f"w{workers}_l{lanes}")
  os.makedirs(out)
  procs = []
  for index in range(workers):
    tf_config = {"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                 "task": {"type": "worker", "index": index}}
    env = {**os.environ, "TF_CONFIG": json.dumps(tf_config), "TF_CPP_MIN_LOG_LEVEL": "3",
           "PYTHONPATH": REPO, "CUDA_VISIBLE_DEVICES": ""}
    procs.append(subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), f"--data={data}",
         f"--worker_out={os.path.join(out, f'{index}.json')}", f"--steps={args.steps}",
         f"--batch_size={args.batch_size}", f"--grad_accum_steps={args.grad_accum_steps}",
         f"--max_seq_len={args.max_seq_len}", f"--input_lanes={lanes}"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  for index, proc in enumerate(procs):
    log = proc.communicate(timeout=args.timeout)[0]
    if proc.returncode:
      raise SystemExit(f"worker {index} of {workers} failed:\n{log[-3000:]}")
  results = []
  for index in range(workers):
    with open(os.path.join(out, f"{index}.json"), encoding="utf-8") as f:
      results.append(json.load(f))
  return results


def build_data(tmp: str, max_seq_len: int) -> tuple[str, str]:
  from data_prep.shard_builder import build_shards  # pylint: disable=import-outside-toplevel
  corpus = next(c for c in CORPORA if os.path.exists(c))
  data = os.path.join(tmp, "shards")
  build_shards(corpus, HF_TINY, data, max_seq_len=max_seq_len, num_shards=16,
               validation_fraction=0.01)
  return data, corpus


def main(argv=None):
  args = parse_args(argv)
  if args.worker_out:
    worker(args)
    return
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  counts = [int(w) for w in args.workers.split(",")]
  with tempfile.TemporaryDirectory() as tmp:
    data, corpus = (args.data, None) if args.data else build_data(tmp, args.max_seq_len)
    info = dataset_info.read(data)
    shard_files = [os.path.join(data, s["file"]) for s in info["splits"]["train"]["shards"]]
    total = sum(os.path.getsize(f) for f in shard_files)
    print(f"data: {data if args.data else 'built from ' + os.path.relpath(corpus, REPO)}: "
          f"{len(shard_files)} train shards, {info['splits']['train']['num_sequences']:,} "
          f"sequences, {total:,} bytes; --batch_size={args.batch_size} "
          f"--grad_accum_steps={args.grad_accum_steps} --max_seq_len={args.max_seq_len}, "
          f"{args.steps} steps ({args.steps * args.batch_size:,} sequences); "
          f"{os.cpu_count()} CPUs")
    print("| --input_lanes | lanes | workers | worker | shard bytes read | records read | "
          "bytes / 1 worker's | records / 1 worker's | step batches = 1 worker's |")
    print("|---|---|---|---|---|---|---|---|---|")
    for flag in (args.input_lanes, 1):
      base = None
      for w in counts:
        results = run(args, data, w, flag, tmp)
        union = [sorted(sum((r["steps"][t] for r in results), []))
                 for t in range(args.steps)]
        if base is None:
          base = {"bytes": results[0]["bytes"], "records": results[0]["records"],
                  "steps": union}
        same = "yes" if union == base["steps"] else "NO"
        for index, r in enumerate(results):
          print(f"| {flag} | {r['lanes']} | {w} | {index} | {r['bytes']:,} | "
                f"{r['records']:,} | {r['bytes'] / base['bytes']:.2f} | "
                f"{r['records'] / base['records']:.2f} | "
                f"{same if w != counts[0] else '(the reference)'} |", flush=True)


if __name__ == "__main__":
  main()
