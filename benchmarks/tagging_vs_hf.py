r"""Benchmark: our token classification against HF's, from one checkpoint, on a real tagging set.

    nice -n 10 python -m benchmarks.tagging_vs_hf [--work_dir=runs/tagging_vs_hf] \
        [--init_from=MODEL_DIR] [--config=tiny] [--max_seq_len=64] [--pretrain_steps=3000] \
        [--batch_size=16] [--learning_rate=1e-3] [--epochs=5] [--seeds=3] [--sides=hf,ours]

1. The set (benchmarks/roles_tagging.py): sentences of the Python docs whose Sphinx roles
   (:func:, :class:, :meth:, :mod:, :exc:, :attr:, :const:, :data:) give the entities, split by
   document into train / dev / test CoNLL files. Sentences longer than --max_seq_len pieces
   (with <s> and </s>) are left out, so neither side truncates (HF's truncation would drop the
   words past it, from the scoring too).
2. The checkpoint: --init_from, or a pretraining with the project's pipeline on the documents
   of the train split only (data_prep.build_shards with the fixture's 8K vocab, roberta_tf.train
   --config for --pretrain_steps of batch 32), then `convert_checkpoint --to_hf`.
3. Ours: `roberta_tf.finetune --task=token_classification --seeds=N` (one process; every seed's
   best dev epoch scored on test). HF: benchmarks/hf_tagging.py once per seed (run_ner's
   recipe in a torch loop). Both: batch, learning rate, epochs, max_seq_len, AdamW beta2 0.98
   eps 1e-6 weight decay 0.1, 6% warmup then linear decay, dropout 0.1, no clipping.
Printed: per side the median and per-seed test entity F1 (seqeval, default mode) of each
run's best dev epoch, dev F1, training examples/s and seconds; the difference in points
(acceptance: ours >= HF - 1.0). One JSON line per finished side is appended to
benchmarks/records/tagging_vs_hf.jsonl. Every step is skipped when its output exists, so a
rerun continues where the last one stopped.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import statistics
import time

from absl import app, flags

from benchmarks import (
  commands,
  hf_finetune,
  hf_tagging,
  parity_records,
  roles_tagging,
  starting_checkpoint,
)

FLAGS = flags.FLAGS
roles_tagging.define_flags()
flags.DEFINE_string("work_dir", "runs/tagging_vs_hf", "Set, checkpoint, runs, summary.json.")
starting_checkpoint.define_flags(max_seq_len=64, pretrain_steps=3000, max_seq_len_help=(
    "also the longest sentence kept, in pieces."))
flags.DEFINE_integer("batch_size", 16, "Fine-tuning batch size (both sides).")
flags.DEFINE_float("learning_rate", 1e-3, "Fine-tuning peak learning rate (both sides; tiny "
                   "models want more than the paper's 1e-5..3e-5).")
flags.DEFINE_integer("epochs", 5, "Fine-tuning epochs (both sides; the best dev epoch counts).")
flags.DEFINE_integer("seeds", 3, "Seeds 0..N-1 per side.")
flags.DEFINE_list("sides", ["hf", "ours"], "Sides to run, in order (the table shows those "
                  "with results).")
flags.DEFINE_integer("hf_threads", 0, "torch threads (0: torch's default).")
flags.DEFINE_string("records", os.path.join(commands.REPO, "benchmarks", "records",
                                            "tagging_vs_hf.jsonl"),
                    "Where a finished side's record is appended.")

KEY_FIELDS = ("side", "run_key")


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


def _recipe() -> hf_finetune.Recipe:
  return hf_finetune.Recipe(max_seq_len=FLAGS.max_seq_len, batch_size=FLAGS.batch_size,
                            learning_rate=FLAGS.learning_rate, epochs=FLAGS.epochs)


def run_hf(work: str, hf_dir: str, data: str) -> dict:
  """HF's runs, one per seed (each kept in work/hf/seedN.json); the side's summary."""
  splits = {s: roles_tagging.read_conll(os.path.join(data, f"{s}.conll"))
            for s in roles_tagging.SPLITS}
  runs = []
  for seed in range(FLAGS.seeds):
    path = os.path.join(work, "hf", f"seed{seed}.json")
    if not os.path.isfile(path):
      print(f"hf seed {seed}", flush=True)
      start = time.perf_counter()
      result = hf_tagging.finetune(hf_dir, splits["train"], splits["dev"], splits["test"],
                                   _recipe(), seed, threads=FLAGS.hf_threads)
      result["seconds"] = time.perf_counter() - start
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
      print(f"  {result['seconds']:.0f} s, test f1 {result['best_test']['f1']:.4f}", flush=True)
    with open(path, encoding="utf-8") as f:
      result = json.load(f)
    train_seconds = sum(e["train_seconds"] for e in result["epochs"])
    runs.append({"seed": seed, "best_epoch": result["best_epoch"], "dev": result["best"],
                 "test": result["best_test"], "train_seconds": train_seconds,
                 "examples_per_sec": len(splits["train"]) * FLAGS.epochs / train_seconds,
                 "seconds": result["seconds"], "truncated": result["truncated"]})
  return {"runs": runs, "seconds": sum(r["seconds"] for r in runs)}


def run_ours(work: str, model_dir: str, data: str) -> dict:
  """roberta_tf.finetune over all seeds in one process (work/ours); the side's summary."""
  out = os.path.join(work, "ours")
  if not os.path.isfile(os.path.join(out, "eval_results.json")):
    print("ours", flush=True)
    start = time.perf_counter()
    commands.run_module(
        ["roberta_tf.finetune", "--task=token_classification", f"--init_from={model_dir}",
         *(f"--{s}_file={os.path.join(data, f'{n}.conll')}"
           for s, n in (("train", "train"), ("eval", "dev"), ("test", "test"))),
         f"--model_dir={out}", f"--max_seq_len={FLAGS.max_seq_len}",
         f"--batch_size={FLAGS.batch_size}", f"--learning_rate={FLAGS.learning_rate}",
         f"--epochs={FLAGS.epochs}", f"--seeds={FLAGS.seeds}"],
        os.path.join(work, "ours.log"), timed=True)
    with open(os.path.join(work, "ours_seconds.json"), "w", encoding="utf-8") as f:
      json.dump({"seconds": time.perf_counter() - start}, f)
  with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
    results = json.load(f)
  with open(os.path.join(work, "ours_seconds.json"), encoding="utf-8") as f:
    seconds = json.load(f)["seconds"]
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
  runs = side["runs"]
  return {"test_f1": statistics.median(r["test"]["f1"] for r in runs),
          "dev_f1": statistics.median(r["dev"]["f1"] for r in runs),
          "test_f1_per_seed": [r["test"]["f1"] for r in runs],
          "dev_f1_per_seed": [r["dev"]["f1"] for r in runs],
          "examples_per_sec": statistics.median(r["examples_per_sec"] for r in runs),
          "seconds": side["seconds"]}


def _fingerprint(data: str, model_dir: str) -> str:
  """What a side's figures depend on besides the code: the set's files, the checkpoint, the
  recipe and the seeds."""
  digest = hashlib.sha256()
  for name in roles_tagging.SPLITS:
    with open(os.path.join(data, f"{name}.conll"), "rb") as f:
      digest.update(f.read())
  with open(os.path.join(model_dir, "checkpoint"), "rb") as f:  # names the checkpoint's step
    digest.update(f.read())
  digest.update(json.dumps([vars(_recipe()), FLAGS.seeds, FLAGS.config,
                            FLAGS.pretrain_steps]).encode())
  return digest.hexdigest()[:16]


def record(side: str, result: dict, run_key: str) -> None:
  """Appends the side's record unless one with the same key is there (a rerun from the
  cache adds nothing)."""
  if any(r.get("side") == side and r.get("run_key") == run_key
         for r in parity_records.read(FLAGS.records)):
    return
  parity_records.append(FLAGS.records, {
      "side": side, "run_key": run_key, "git": starting_checkpoint.git_head(),
      "host": starting_checkpoint.host(),
      "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
      "recipe": vars(_recipe()), "seeds": FLAGS.seeds, "config": FLAGS.config,
      "checkpoint": FLAGS.init_from or f"pretrained {FLAGS.pretrain_steps} steps",
      **summarize(result), "runs": result["runs"]}, KEY_FIELDS)


def print_table(sides: dict[str, dict]) -> None:
  print(f"\nentity F1 (seqeval), best dev epoch of {FLAGS.epochs}, seeds 0..{FLAGS.seeds - 1}:")
  print(f"  {'side':<16} {'test F1 median':>14}  {'per seed':<26} {'dev F1':>7} "
        f"{'train ex/s':>10} {'seconds':>8}")
  names = {"ours": "roberta_tf", "hf": "HF transformers"}
  for side, result in sides.items():
    s = summarize(result)
    print(f"  {names[side]:<16} {s['test_f1']:>14.4f}  "
          f"{', '.join(f'{v:.4f}' for v in s['test_f1_per_seed']):<26} {s['dev_f1']:>7.4f} "
          f"{s['examples_per_sec']:>10.1f} {s['seconds']:>8.0f}")
  if len(sides) == 2:
    difference = 100 * (summarize(sides["ours"])["test_f1"] - summarize(sides["hf"])["test_f1"])
    print(f"  difference {difference:+.2f} points (acceptance: >= -1.0)")


def main(argv):
  del argv
  # torch's OpenMP threads spin while they wait; beside other jobs that burns their time slices
  # (benchmarks/quality_vs_hf.py measured a step 1.7x as long as with passive waiting).
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  work = os.path.abspath(FLAGS.work_dir)  # the binaries run with the repository as cwd
  os.makedirs(work, exist_ok=True)
  model_dir = pretrain(work)
  hf_dir = starting_checkpoint.to_hf(work, model_dir)
  data = tagging_set(work, hf_dir)
  run_key = _fingerprint(data, model_dir)
  sides = {}
  for side in FLAGS.sides:
    run = {"hf": lambda: run_hf(work, hf_dir, data),
           "ours": lambda: run_ours(work, model_dir, data)}[side]
    sides[side] = run()
    record(side, sides[side], run_key)
  with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
    json.dump({side: summarize(result) for side, result in sides.items()}, f, indent=1)
  print_table(sides)


if __name__ == "__main__":
  app.run(main)
