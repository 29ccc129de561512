r"""Benchmark: our token classification against HF's, from one checkpoint, on a real tagging set.

    nice -n 10 python -m benchmarks.finetuning.tagging_vs_hf [--work_dir=runs/tagging_vs_hf] \
        [--init_from=MODEL_DIR] [--config=tiny] [--max_seq_len=64] [--pretrain_steps=3000] \
        [--batch_size=16] [--learning_rate=1e-3] [--epochs=5] [--seeds=3] [--sides=hf,ours]

1. The set (benchmarks/tasks/roles_tagging.py): sentences of the Python docs whose Sphinx roles
   (:func:, :class:, :meth:, :mod:, :exc:, :attr:, :const:, :data:) give the entities, split by
   document into train / dev / test CoNLL files. Sentences longer than --max_seq_len pieces
   (with <s> and </s>) are left out, so neither side truncates (HF's truncation would drop the
   words past it, from the scoring too).
2. The checkpoint: --init_from, or a pretraining with the project's pipeline on the documents
   of the train split only (data_prep.build_shards with the fixture's 8K vocab, roberta_tf.train
   --config for --pretrain_steps of batch 32), then `convert_checkpoint --to_hf`.
3. Ours: `roberta_tf.finetune --task=token_classification --seeds=N` (one process; every seed's
   best dev epoch scored on test). HF: benchmarks/finetuning/hf_tagging.py once per seed (run_ner's
   recipe in a torch loop). Both: batch, learning rate, epochs, max_seq_len, AdamW beta2 0.98
   eps 1e-6 weight decay 0.1, 6% warmup then linear decay, dropout 0.1, no clipping.
Printed: per side the median and per-seed test entity F1 (seqeval, default mode) of each
run's best dev epoch, dev F1, training examples/s and seconds; the difference in points
(acceptance: ours >= HF - 1.0). One JSON line per finished side is appended to
benchmarks/records/tagging_vs_hf.jsonl. Every step is skipped when its output exists, so a
rerun continues where the last one stopped.
"""

from __future__ import annotations

import json
import os

from absl import app, flags

from benchmarks.common import starting_checkpoint
from benchmarks.finetuning import hf_tagging, peer_comparison
from benchmarks.tasks import roles_tagging

FLAGS = flags.FLAGS
roles_tagging.define_flags()
peer_comparison.define_flags("tagging_vs_hf", "hf", batch_size=16, epochs=5, max_seq_len=64,
                             pretrain_steps=3000, notes={
    "max_seq_len": "also the longest sentence kept, in pieces.", "batch_size": "",
    "learning_rate": "tiny models want more than the paper's 1e-5..3e-5"})


def pretrain(work: str) -> str:
  """The starting checkpoint: --init_from, or one pretrained here on the train documents (dev
  and test text is never seen before fine-tuning)."""
  texts = (text for source, text in roles_tagging.documents(FLAGS.corpus)
           if roles_tagging.split_of(source, FLAGS.dev_percent, FLAGS.test_percent) == "train")
  return starting_checkpoint.from_flags(work, texts)


def tagging_set(work: str, hf_dir: str) -> str:
  """work/data/{train,dev,test}.conll (+ counts.json), sentences that fit max_seq_len pieces of
  the checkpoint's own tokenizer."""
  data = os.path.join(work, "data")
  if not os.path.isfile(os.path.join(data, "counts.json")):
    counts = roles_tagging.write(data, roles_tagging.build_from_flags(hf_dir, FLAGS.max_seq_len))
    with open(os.path.join(data, "counts.json"), "w", encoding="utf-8") as f:
      json.dump(counts, f, indent=1)
  with open(os.path.join(data, "counts.json"), encoding="utf-8") as f:
    roles_tagging.print_counts(json.load(f))
  return data


def run_hf(work: str, hf_dir: str, data: str) -> dict:
  """HF's runs, one per seed (each kept in work/hf/seedN.json); the side's summary."""
  splits = {s: roles_tagging.read_conll(os.path.join(data, f"{s}.conll"))
            for s in roles_tagging.SPLITS}
  results = peer_comparison.peer_runs(
      work, "hf", lambda seed: hf_tagging.finetune(
          hf_dir, splits["train"], splits["dev"], splits["test"], peer_comparison.recipe(), seed,
          threads=FLAGS.hf_threads), lambda result: f"test f1 {result['best_test']['f1']:.4f}")
  runs = []
  for seed, result in enumerate(results):
    train_seconds = sum(e["train_seconds"] for e in result["epochs"])
    runs.append({"seed": seed, "best_epoch": result["best_epoch"], "dev": result["best"],
                 "test": result["best_test"], "train_seconds": train_seconds,
                 "examples_per_sec": len(splits["train"]) * FLAGS.epochs / train_seconds,
                 "seconds": result["seconds"], "truncated": result["truncated"]})
  return {"runs": runs, "seconds": sum(r["seconds"] for r in runs)}


def run_ours(work: str, model_dir: str, data: str) -> dict:
  """roberta_tf.finetune over all seeds in one process (work/ours); the side's summary."""
  results, seconds = peer_comparison.ours(work, model_dir, [
      "--task=token_classification",
      *(f"--{s}_file={os.path.join(data, f'{n}.conll')}"
        for s, n in (("train", "train"), ("eval", "dev"), ("test", "test")))])
  train = len(roles_tagging.read_conll(os.path.join(data, "train.conll")))
  runs = []
  for run in sorted(results["runs"], key=lambda r: r["seed"]):
    train_seconds = sum(e["seconds"] for e in run["history"])
    runs.append({"seed": run["seed"], "best_epoch": run["epoch"], "dev": run["metrics"],
                 "test": run["test"], "train_seconds": train_seconds,
                 "examples_per_sec": train * len(run["history"]) / train_seconds})
  return {"runs": runs, "seconds": seconds}


def summarize(side: dict) -> dict:
  """The side's medians over seeds: test and dev F1, training examples/s."""
  return peer_comparison.summary(side, "f1", "examples_per_sec")


def main(argv):
  del argv
  work = peer_comparison.start()
  model_dir = pretrain(work)
  hf_dir = starting_checkpoint.to_hf(work, model_dir)
  data = tagging_set(work, hf_dir)
  run_key = peer_comparison.fingerprint(
      [os.path.join(data, f"{name}.conll") for name in roles_tagging.SPLITS], model_dir)
  sides = peer_comparison.run_sides(work, {"hf": lambda: run_hf(work, hf_dir, data),
                                           "ours": lambda: run_ours(work, model_dir, data)},
                                    run_key, summarize)
  peer_comparison.print_table(
      "entity F1 (seqeval)", sides, summarize, {"ours": "roberta_tf", "hf": "HF transformers"},
      "f1", ("test F1 median", "dev F1", "train ex/s", "examples_per_sec"))


if __name__ == "__main__":
  app.run(main)
