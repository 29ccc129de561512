r"""Benchmark: is the training stream a well-mixed sample of a multi-source corpus?

    python -m benchmarks.data.stream_mixing \
        --sources=docs=../shared/corpora/python-docs.jsonl.gz,stdlib=stdlib \
        [--num_shards=2] [--shuffle_buffer=1000] [--window=256] [--max_seq_len=128]

Each source is a corpus spec (files, globs, ``stdlib``); its files are copied (or, for
``stdlib``, written) into one corpus directory, named so that the sources come one after the
other in file order, as ``wiki-*.jsonl``, ``books-*.jsonl`` do. Then:

1. every file is built into shards on its own (validation_fraction 0): packing never crosses
   files, so these are exactly the blocks the file contributes to the whole build, and they
   label every block with its source;
2. the whole corpus is built with ``--num_shards`` shards, the default engine, seed 0;
3. the training stream is read exactly as ``roberta_tf.train`` reads it
   (``roberta_tf.data.pipeline.build_dataset(training=True)``, ``--shuffle_buffer``), each
   row unmasked and looked up, for one epoch.

Printed: each source's global share, its share in every consecutive window of ``--window``
sequences (a compact sparkline and the extremes), and the largest deviation from the global
share against ``--tolerance`` (the acceptance bound, 0.15) and against binomial noise (4 sd).
Exit status 1 when a window is off by more than the tolerance.
"""

from __future__ import annotations

import collections
import os
import shutil
import tempfile

import numpy as np
from absl import app, flags

from benchmarks.common import cached_data, commands
from data_prep import corpus
from roberta_tf.data import dataset_info, example_spec
from roberta_tf.data.masking import unmask
from roberta_tf.data.pipeline import build_dataset

FLAGS = flags.FLAGS
flags.DEFINE_list("sources", None, "name=corpus spec pairs, in file order.")
flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB,
                    "vocab.json + merges.txt to encode with.")
flags.DEFINE_integer("num_shards", 2, "Train shards of the whole build.")
commands.define_batch_flags(batch_size=None, max_seq_len=128, seq_help="Block length.")
flags.DEFINE_integer("shuffle_buffer", 1000, "The reader's shuffle window (train's flag).")
flags.DEFINE_integer("window", 256, "Sequences per measured window.")
flags.DEFINE_integer("seed", 0, "The reader's seed (train's --seed).")
flags.DEFINE_float("tolerance", 0.15, "Largest allowed |window share - global share|.")
flags.DEFINE_string("work_dir", "", "Keep the shards here (default: a temporary directory).")


def _corpus_dir(sources: list[tuple[str, str]], root: str) -> dict[str, str]:
  """Copies every source's files into ``root``; returns file name → source name."""
  owner = {}
  for s, (name, spec) in enumerate(sources):
    files = corpus.resolve_inputs(spec)
    for k, path in enumerate(files):
      if path == corpus.STDLIB:
        dest = f"{s:02d}-{name}-{k:04d}.txt"
        with open(os.path.join(root, dest), "w", encoding="utf-8") as f:
          f.write("\n\n".join("\n".join(doc) for doc in corpus.stdlib_documents()) + "\n")
      else:
        suffix = next(x for x in (".jsonl.gz", ".txt.gz", ".jsonl", ".txt") if path.endswith(x))
        dest = f"{s:02d}-{name}-{k:04d}{suffix}"
        shutil.copy(path, os.path.join(root, dest))
      owner[dest] = name
  return owner


def _records(data_dir: str) -> list[tuple[int, ...]]:
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  info = dataset_info.read(data_dir)
  return [tuple(example_spec.parse(r).numpy().tolist())
          for path in dataset_info.split_files(data_dir, info, "train")
          for r in tf.data.TFRecordDataset(path)]


def _unmasked_rows(batch) -> list[tuple[int, ...]]:
  ids, real = unmask(batch), batch["padding_mask"].numpy() == 1
  return [tuple(ids[b][real[b]].tolist()) for b in range(ids.shape[0])]


def _sparkline(values) -> str:
  bars = " ▁▂▃▄▅▆▇█"
  return "".join(bars[min(8, int(round(v * 8)))] for v in values)


def main(argv):
  del argv
  if not FLAGS.sources:
    raise app.UsageError("--sources=name=spec,... is required")
  sources = [tuple(s.split("=", 1)) for s in FLAGS.sources]
  if any(len(s) != 2 for s in sources):
    raise app.UsageError("--sources takes name=spec pairs")
  work = FLAGS.work_dir or tempfile.mkdtemp(prefix="stream_mixing-")
  root = os.path.join(work, "corpus")
  os.makedirs(root, exist_ok=True)
  owner = _corpus_dir(sources, root)
  kw = {"max_seq_len": FLAGS.max_seq_len, "validation_fraction": 0, "rebuild": True}
  label = {}
  for name in sorted(owner):
    out = cached_data.shards(os.path.join(work, "alone", name), os.path.join(root, name),
                             FLAGS.vocab_dir, num_shards=1, **kw)
    for r in _records(out):
      label[r] = owner[name] if label.get(r, owner[name]) == owner[name] else "?"
  whole = cached_data.shards(os.path.join(work, "shards"), root, FLAGS.vocab_dir,
                             num_shards=FLAGS.num_shards, **kw)
  info = dataset_info.read(whole)
  split = info["splits"]["train"]
  per_shard = [s["num_sequences"] for s in split["shards"]]
  print(f"corpus: {len(owner)} files from {len(sources)} sources, "
        f"{info['source']['input_bytes'] / 1e6:.1f} MB; {split['num_sequences']} sequences of "
        f"<= {FLAGS.max_seq_len} in {len(per_shard)} shards ({min(per_shard)}-{max(per_shard)} "
        f"each; shuffle window {FLAGS.shuffle_buffer}); order: {info.get('shuffle')}")
  ds = build_dataset(whole, "train", training=True, per_replica_batch_size=FLAGS.window,
                     max_seq_len=FLAGS.max_seq_len, seed=FLAGS.seed,
                     shuffle_buffer=FLAGS.shuffle_buffer)
  windows = split["num_sequences"] // FLAGS.window
  names = [n for n, _ in sources]
  shares = collections.defaultdict(list)
  unknown = 0
  for _, batch in zip(range(windows), ds):
    rows = [label.get(r, "?") for r in _unmasked_rows(batch)]
    unknown += rows.count("?")
    for n in names:
      shares[n].append(rows.count(n) / len(rows))
  totals = collections.Counter(label.get(r, "?") for r in _records(whole))
  worst_all = 0.0
  for n in names:
    p = totals[n] / split["num_sequences"]
    s = np.array(shares[n])
    worst = float(np.max(np.abs(s - p)))
    worst_all = max(worst_all, worst)
    sd = np.sqrt(p * (1 - p) / FLAGS.window)
    print(f"{n:>10s}: global share {p:.3f}; {len(s)} windows of {FLAGS.window}: "
          f"min {s.min():.3f} max {s.max():.3f}, largest deviation {worst:.3f} "
          f"({worst / sd if sd else 0:.1f} sd)\n{'':12s}{_sparkline(s)}")
  if unknown or totals["?"]:
    print(f"unlabelled sequences (identical in two sources): {totals['?']} in the shards")
  ok = worst_all <= FLAGS.tolerance
  print(f"largest deviation of a window from its source's global share: {worst_all:.3f} "
        f"({'within' if ok else 'OVER'} the tolerance {FLAGS.tolerance})")
  if not FLAGS.work_dir:
    shutil.rmtree(work)
  return 0 if ok else 1


if __name__ == "__main__":
  app.run(main)
