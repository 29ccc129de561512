r"""Benchmark: our fine-tuning against Hugging Face's, from the same pretrained checkpoint.

    python -m benchmarks.finetuning.glue_vs_hf [--corpus=../shared/corpora/python-docs.jsonl.gz] \
        [--work_dir=runs/finetune_vs_hf] [--config=tiny] [--pretrain_steps=3000] \
        [--train_examples=3000] [--dev_examples=1800] [--batch_size=16] [--learning_rate=1e-3] \
        [--epochs=3] [--seeds=5]

1. The task (benchmarks/tasks/glue_text_tasks.py), from the sentences of every other document of the
   corpus: by default (--task=section) "is this sentence from the library reference or from
   another part of the docs?" in GLUE SST-2's file layout; --task=same_document (do two
   sentences come from one document? MRPC's layout) and --task=word_order (intact vs two words
   swapped, SST-2's) are harder: the tiny model pretrained here stays at chance on both after 3
   epochs, ours and HF's alike.
2. Pretraining with the project's pipeline on the other documents (data_prep.build_shards with
   the fixture's 8K vocab, then roberta_tf.train for --pretrain_steps of batch 32 x
   --max_seq_len), and `convert_checkpoint --to_hf` of that checkpoint: both sides start from
   the same weights.
3. Ours: `roberta_tf.finetune --glue_task=mrpc|sst2 --seeds=N` (one sweep: the median over
   seeds).
   HF: benchmarks/finetuning/hf_finetune.py, the same recipe (AdamW beta2 0.98, eps 1e-6, weight
   decay 0.1, 6% warmup then linear decay, dropout 0.1, batch, epochs, max_seq_len) once per seed.
   Each run's value is its best epoch's dev accuracy; printed: every seed's, the medians and their
   difference (target: within 1 point), and work_dir/summary.json.
Every step is skipped when its output exists, so a rerun continues.
"""

from __future__ import annotations

import json
import os
import statistics
import time

import numpy as np
from absl import app, flags

from benchmarks.common import commands, starting_checkpoint
from benchmarks.finetuning import hf_finetune
from benchmarks.tasks import glue_text_tasks

FLAGS = flags.FLAGS
glue_text_tasks.define_data_flags("runs/finetune_vs_hf", "Task, models, runs and "
                                  "<task>_summary.json.")
flags.DEFINE_enum("task", "section", ["section", "same_document", "word_order"], "The task.")
starting_checkpoint.define_flags(max_seq_len=64, pretrain_steps=3000, init_from=False,
                                 vocab_dir=False)
flags.DEFINE_integer("held_out_every", 2, "Every n-th corpus document gives the task, the rest "
                     "the pretraining.")
flags.DEFINE_integer("train_examples", 3000, "Task training examples.")
flags.DEFINE_integer("dev_examples", 1800, "Task dev examples.")
flags.DEFINE_integer("batch_size", 16, "Fine-tuning batch size (both sides).")
flags.DEFINE_float("learning_rate", 1e-3, "Fine-tuning peak learning rate (tiny models want "
                   "more than the paper's 1e-5..3e-5 for base/large).")
flags.DEFINE_integer("epochs", 3, "Fine-tuning epochs (both sides; the best epoch counts).")
flags.DEFINE_integer("seeds", 5, "Seeds 0..N-1 per side.")
flags.DEFINE_integer("hf_threads", 0, "torch threads (0: torch's default).")

GLUE_LAYOUT = {"section": "sst2", "same_document": "mrpc", "word_order": "sst2"}


def write_task(work: str) -> str:
  """work/<task>: the task's GLUE-layout files (written once)."""
  task_dir = os.path.join(work, FLAGS.task)
  if not os.path.isfile(os.path.join(task_dir, "dev.tsv")):
    write = {"section": glue_text_tasks.write_section,
             "same_document": glue_text_tasks.write_same_document,
             "word_order": glue_text_tasks.write_word_order}[FLAGS.task]
    counts = write(FLAGS.corpus, task_dir, FLAGS.train_examples, FLAGS.dev_examples, 100,
                   held_out_every=FLAGS.held_out_every)
    print(f"task: {counts}", flush=True)
  return task_dir


def ours(work: str, task_dir: str, model_dir: str) -> list[float]:
  """Dev accuracy per seed of `roberta_tf.finetune` (one sweep over the seeds)."""
  ours_dir = os.path.join(work, f"{FLAGS.task}_ours")
  if not os.path.isfile(os.path.join(ours_dir, "eval_results.json")):
    print("ours", flush=True)
    commands.run_module(
        ["roberta_tf.finetune", f"--glue_task={GLUE_LAYOUT[FLAGS.task]}",
         f"--data_dir={task_dir}", f"--init_from={model_dir}", f"--model_dir={ours_dir}",
         f"--max_seq_len={FLAGS.max_seq_len}", f"--batch_size={FLAGS.batch_size}",
         f"--learning_rate={FLAGS.learning_rate}", f"--epochs={FLAGS.epochs}",
         f"--seeds={FLAGS.seeds}"], os.path.join(work, f"{FLAGS.task}_ours.log"), timed=True)
  with open(os.path.join(ours_dir, "eval_results.json"), encoding="utf-8") as f:
    return json.load(f)["configs"][0]["metrics"]["accuracy"]["values"]


def hf(work: str, hf_dir: str, recipe, train, dev) -> list[float]:
  """Best-epoch dev accuracy per seed of benchmarks/finetuning/hf_finetune.py (each seed cached)."""
  values = []
  for seed in range(FLAGS.seeds):
    path = os.path.join(work, f"{FLAGS.task}_hf", f"seed{seed}.json")
    if not os.path.isfile(path):
      print(f"hf seed {seed}", flush=True)
      start = time.perf_counter()
      result = hf_finetune.finetune(hf_dir, train, dev, 2, recipe, seed, metric="accuracy",
                                    threads=FLAGS.hf_threads)
      result["seconds"] = time.perf_counter() - start
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    with open(path, encoding="utf-8") as f:
      values.append(json.load(f)["best"]["accuracy"])
  return values


def main(argv):
  del argv
  # torch's OpenMP threads spin while they wait; beside other jobs that burns their time slices
  # (benchmarks/quality/pretraining_vs_hf.py measured a step 1.7x as long as with passive waiting).
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  work = FLAGS.work_dir
  os.makedirs(work, exist_ok=True)
  task_dir = write_task(work)
  texts = glue_text_tasks.documents(FLAGS.corpus, FLAGS.held_out_every, held_out=False)
  model_dir = starting_checkpoint.from_flags(work, texts, log_every=500)
  hf_dir = starting_checkpoint.to_hf(work, model_dir, name="hf")
  ours_values = ours(work, task_dir, model_dir)
  recipe = hf_finetune.Recipe(max_seq_len=FLAGS.max_seq_len, batch_size=FLAGS.batch_size,
                              learning_rate=FLAGS.learning_rate, epochs=FLAGS.epochs)
  train, dev = ((a, b, np.asarray(y)) for a, b, y in (
      glue_text_tasks.read_split(GLUE_LAYOUT[FLAGS.task], os.path.join(task_dir, f"{s}.tsv"))
      for s in ("train", "dev")))
  hf_values = hf(work, hf_dir, recipe, train, dev)
  ours_median, hf_median = statistics.median(ours_values), statistics.median(hf_values)
  summary = {"task": f"{FLAGS.task} ({GLUE_LAYOUT[FLAGS.task]} layout)", "train": len(train[0]),
             "dev": len(dev[0]),
             "pretrain_steps": FLAGS.pretrain_steps, "config": FLAGS.config,
             "recipe": vars(recipe), "seeds": FLAGS.seeds,
             "ours": {"values": ours_values, "median": ours_median},
             "hf": {"values": hf_values, "median": hf_median},
             "difference_points": 100 * (ours_median - hf_median)}
  with open(os.path.join(work, f"{FLAGS.task}_summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
  print(f"\n{FLAGS.task} dev accuracy, best epoch of {FLAGS.epochs}, seeds 0..{FLAGS.seeds - 1}:")
  for name, values, median in (("roberta_tf", ours_values, ours_median),
                               ("HF transformers", hf_values, hf_median)):
    print(f"  {name:<16} median {median:.4f}  [{', '.join(f'{v:.4f}' for v in values)}]")
  print(f"  difference {summary['difference_points']:+.2f} points (target: within 1)")


if __name__ == "__main__":
  app.run(main)
