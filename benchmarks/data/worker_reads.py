r"""Does each worker read only its share of the shards? Reads per worker at 1, 2 and 4 workers.

    python -m benchmarks.data.worker_reads [--data=SHARDS] [--workers=1,2,4] [--steps=300] \
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

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time

from absl import app, flags

from benchmarks.common import cached_data, commands

FLAGS = flags.FLAGS
flags.DEFINE_string("data", None, "Shard directory; default: build one from the corpus.")
flags.DEFINE_list("workers", ["1", "2", "4"], "Worker counts to run.")
flags.DEFINE_integer("steps", 300, "Steps each run takes.")
commands.define_batch_flags(batch_size=64, max_seq_len=128, batch_help="Global sequences per "
                            "step.", seq_help="Padded sequence length S.")
flags.DEFINE_integer("grad_accum_steps", 2, "Micro-batches per step.")
flags.DEFINE_integer("input_lanes", 8, "--input_lanes of the lane runs.")
flags.DEFINE_integer("timeout", 600, "Seconds per run.")
flags.DEFINE_string("worker_out", None, "Internal: set in the worker processes.")


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

  cfg = TrainConfig.from_dict(dict(
      model_dir=os.path.join(os.path.dirname(args.worker_out), "model"), train_data=args.data,
      config="tiny", max_seq_len=args.max_seq_len, batch_size=args.batch_size,
      grad_accum_steps=args.grad_accum_steps, input_lanes=args.input_lanes,
      strategy="multi_worker"))
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
           "CUDA_VISIBLE_DEVICES": ""}
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "benchmarks.data.worker_reads", f"--data={data}",
         f"--worker_out={os.path.join(out, f'{index}.json')}", f"--steps={args.steps}",
         f"--batch_size={args.batch_size}", f"--grad_accum_steps={args.grad_accum_steps}",
         f"--max_seq_len={args.max_seq_len}", f"--input_lanes={lanes}"],
        cwd=commands.REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
  for index, proc in enumerate(procs):
    log = proc.communicate(timeout=args.timeout)[0]
    if proc.returncode:
      raise SystemExit(f"worker {index} of {workers} failed:\n{log[-3000:]}")
  results = []
  for index in range(workers):
    with open(os.path.join(out, f"{index}.json"), encoding="utf-8") as f:
      results.append(json.load(f))
  return results


def main(argv):
  del argv
  args = commands.flag_args(FLAGS)
  if args.worker_out:
    worker(args)
    return
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  counts = [int(w) for w in args.workers]
  corpus = commands.docs_corpus()
  with tempfile.TemporaryDirectory() as tmp:
    data = args.data or cached_data.shards(
        os.path.join(tmp, "shards"), corpus, commands.FIXTURE_VOCAB,
        max_seq_len=args.max_seq_len, num_shards=16, validation_fraction=0.01)
    info = dataset_info.read(data)
    shard_files = [os.path.join(data, s["file"]) for s in info["splits"]["train"]["shards"]]
    total = sum(os.path.getsize(f) for f in shard_files)
    print(f"data: {data if args.data else 'built from ' + os.path.relpath(corpus, commands.REPO)}: "
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
  app.run(main)
