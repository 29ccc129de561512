r"""Does resuming cost more the further a run got? Time to the first batch at a data position.

    python benchmarks/resume_speed.py [--data=SHARDS] [--batch_size=32] [--max_seq_len=128] \
        [--positions=100,1000000] [--repeats=3]

A resumed run rebuilds the training input at its checkpoint's data position (sequences of the
global stream, roberta_tf/data/pipeline.py) and waits for the first batch; model building and
the checkpoint restore do not depend on the position, so this is the part that could. For each
position (in consumed micro-batches of --batch_size) the time from building the dataset to
holding its first batch is measured --repeats times, positions alternating; medians printed.
Beside it, the replay this replaced (`ds.skip` over every consumed batch) is timed over 10^3
batches and extrapolated linearly to each position. Without --data, shards are built first from
the python-docs corpus (../shared/corpora, or the test slice) with the fixture vocabulary.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

import argparse  # noqa: E402

from roberta_tf.data import dataset_info  # noqa: E402
from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset  # noqa: E402
from roberta_tf.data.vocab_info import VocabInfo  # noqa: E402

HF_TINY = os.path.join(REPO, "tests", "testdata", "hf_roberta_tiny")
CORPORA = [os.path.join(REPO, "..", "shared", "corpora", "python-docs.jsonl.gz"),
           os.path.join(REPO, "tests", "testdata", "python_docs_small.jsonl.gz")]
REPLAY_BATCHES = 1000


def parse_args(argv=None):
  # argparse, not absl flags: this script imports data_prep, whose absl flags would clash.
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--data", help="Shard directory; default: build one from the corpus.")
  p.add_argument("--vocab_dir", default=HF_TINY, help="vocab.json + merges.txt of the shards.")
  p.add_argument("--batch_size", type=int, default=32, help="Sequences per micro-batch.")
  p.add_argument("--max_seq_len", type=int, default=128, help="Padded sequence length S.")
  p.add_argument("--positions", default="100,1000000",
                 help="Consumed micro-batches to resume at (comma list).")
  p.add_argument("--repeats", type=int, default=3, help="Timings per position.")
  return p.parse_args(argv)


def time_to_first_batch(data_dir, vocab, config) -> float:
  start = time.perf_counter()
  next(iter(build_pretraining_dataset(data_dir, "train", vocab, config)))
  return time.perf_counter() - start


def replay_seconds_per_batch(data_dir, vocab, config) -> float:
  """The old resume: a stream from the start, skipping the consumed batches."""
  start = time.perf_counter()
  it = iter(build_pretraining_dataset(data_dir, "train", vocab, config).skip(REPLAY_BATCHES))
  next(it)
  return (time.perf_counter() - start) / REPLAY_BATCHES


def main(argv=None):
  args = parse_args(argv)
  positions = [int(p) for p in args.positions.split(",")]
  with tempfile.TemporaryDirectory() as tmp:
    data_dir = args.data
    if not data_dir:
      from data_prep.shard_builder import build_shards  # pylint: disable=import-outside-toplevel
      corpus = next(c for c in CORPORA if os.path.exists(c))
      data_dir = os.path.join(tmp, "shards")
      build_shards(corpus, args.vocab_dir, data_dir, max_seq_len=args.max_seq_len,
                   num_shards=16, validation_fraction=0.01)
    vocab = VocabInfo.for_dataset(data_dir, dataset_info.read(data_dir))
    config = InputConfig(per_replica_batch_size=args.batch_size, max_seq_len=args.max_seq_len)
    time_to_first_batch(data_dir, vocab, config)  # warm-up: imports, first graph building
    times = {p: [] for p in positions}
    for _ in range(args.repeats):
      for p in positions:
        at = InputConfig(per_replica_batch_size=args.batch_size, max_seq_len=args.max_seq_len,
                         start=p * args.batch_size)
        times[p].append(time_to_first_batch(data_dir, vocab, at))
    replay = replay_seconds_per_batch(data_dir, vocab, config)
  print(f"data {args.data or 'built from ' + corpus}; batch {args.batch_size}, "
        f"S {args.max_seq_len}; {os.cpu_count()} CPUs")
  for p in positions:
    print(f"resume at {p:>12,} consumed micro-batches: first batch after "
          f"{statistics.median(times[p]):.3f} s (median of {args.repeats}: "
          f"{', '.join(f'{t:.3f}' for t in times[p])}) | replay by ds.skip: "
          f"~{replay * p:,.1f} s (from {REPLAY_BATCHES} batches in "
          f"{replay * REPLAY_BATCHES:.2f} s)")
  lo, hi = (statistics.median(times[p]) for p in (positions[0], positions[-1]))
  print(f"ratio {positions[-1]:,} / {positions[0]:,}: {hi / lo:.2f}x")


if __name__ == "__main__":
  main()
