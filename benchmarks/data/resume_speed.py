r"""Does resuming cost more the further a run got? Time to the first batch at a data position.

    python -m benchmarks.data.resume_speed [--data=SHARDS] [--batch_size=32] [--max_seq_len=128] \
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
import tempfile
import time

from absl import app, flags

from benchmarks.common import cached_data, commands
from roberta_tf.data import dataset_info
from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset
from roberta_tf.data.vocab_info import VocabInfo

REPLAY_BATCHES = 1000

FLAGS = flags.FLAGS
flags.DEFINE_string("data", None, "Shard directory; default: build one from the corpus.")
flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB, "vocab.json + merges.txt of the shards.")
commands.define_batch_flags(batch_size=32, max_seq_len=128, batch_help="Sequences per micro-batch.",
                            seq_help="Padded sequence length S.")
flags.DEFINE_list("positions", ["100", "1000000"], "Consumed micro-batches to resume at.")
flags.DEFINE_integer("repeats", 3, "Timings per position.")


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


def first_batch_times(data_dir: str, positions: list[int]) -> dict[int, list[float]]:
  """{position: seconds to the first batch, --repeats times}, the positions alternating."""
  vocab = VocabInfo.for_dataset(data_dir, dataset_info.read(data_dir))
  config = InputConfig(per_replica_batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len)
  time_to_first_batch(data_dir, vocab, config)  # warm-up: imports, first graph building
  times = {p: [] for p in positions}
  for _ in range(FLAGS.repeats):
    for p in positions:
      at = InputConfig(per_replica_batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len,
                       start=p * FLAGS.batch_size)
      times[p].append(time_to_first_batch(data_dir, vocab, at))
  return times


def main(argv):
  del argv
  positions = [int(p) for p in FLAGS.positions]
  corpus = commands.docs_corpus()
  with tempfile.TemporaryDirectory() as tmp:
    data_dir = FLAGS.data or cached_data.shards(
        os.path.join(tmp, "shards"), corpus, FLAGS.vocab_dir, max_seq_len=FLAGS.max_seq_len,
        num_shards=16, validation_fraction=0.01)
    times = first_batch_times(data_dir, positions)
    vocab = VocabInfo.for_dataset(data_dir, dataset_info.read(data_dir))
    config = InputConfig(per_replica_batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len)
    replay = replay_seconds_per_batch(data_dir, vocab, config)
  print(f"data {FLAGS.data or 'built from ' + corpus}; batch {FLAGS.batch_size}, "
        f"S {FLAGS.max_seq_len}; {os.cpu_count()} CPUs")
  for p in positions:
    print(f"resume at {p:>12,} consumed micro-batches: first batch after "
          f"{statistics.median(times[p]):.3f} s (median of {FLAGS.repeats}: "
          f"{', '.join(f'{t:.3f}' for t in times[p])}) | replay by ds.skip: "
          f"~{replay * p:,.1f} s (from {REPLAY_BATCHES} batches in "
          f"{replay * REPLAY_BATCHES:.2f} s)")
  lo, hi = (statistics.median(times[p]) for p in (positions[0], positions[-1]))
  print(f"ratio {positions[-1]:,} / {positions[0]:,}: {hi / lo:.2f}x")


if __name__ == "__main__":
  app.run(main)
