r"""Benchmark: does pretraining pay off downstream? Acceptability, pretrained vs random init.

    python -m benchmarks.finetuning.acceptability_gain [--corruption=replace] \
        [--corpus=../shared/corpora/python-docs.jsonl.gz] [--work_dir=runs/docs_sections_bench] \
        [--config=tiny] [--pretrain_steps=6000] [--learning_rates=3e-4,1e-3,3e-3] [--epochs=10] \
        [--seeds=0,1,2]

The flags are benchmarks/finetuning/docs_sections_gain.py's, and so is the pretraining: the same
pretrained model (work_dir/pretrained: the Python docs minus the docs-sections dev paragraphs,
the fixture's 8K vocab, --pretrain_steps of batch 32 x --max_seq_len), built once for both
benchmarks. The task (benchmarks/tasks/acceptability_task.py): is a sentence as written, or were two
of its words replaced by words of other sentences (--corruption=replace) or swapped (swap); dev
sentences only from paragraphs the pretraining never saw; a constant guess scores 0.5.
Fine-tuning: the paper's recipe (LR sweep, --epochs epochs, best dev epoch),
the same for both inits, one run per seed. Printed: each seed's dev accuracy and the medians;
work_dir/acceptability_<corruption>/summary.json.
"""

from __future__ import annotations

import json
import os
import statistics

from absl import app, flags

from benchmarks.finetuning import docs_sections_gain as docs_bench
from benchmarks.tasks import acceptability_task

FLAGS = docs_bench.FLAGS
flags.adopt_module_key_flags(docs_bench)  # its flags are this benchmark's too (--help)
flags.DEFINE_enum("corruption", "replace", acceptability_task.CORRUPTIONS,
                  "How the corrupted half of the sentences is made (acceptability_task.py).")


def write_task(task_dir: str) -> tuple[str, str]:
  """train.jsonl / dev.jsonl of the task under task_dir."""
  os.makedirs(task_dir, exist_ok=True)
  paths = []
  for split, seed in (("train", 0), ("dev", 1)):
    rows = acceptability_task.examples(
        acceptability_task.read_paragraphs(os.path.join(docs_bench.TASK, f"{split}.jsonl")),
        seed, FLAGS.corruption)
    path = os.path.join(task_dir, f"{split}.jsonl")
    with open(path, "w", encoding="utf-8") as f:
      f.writelines(json.dumps(r) + "\n" for r in rows)
    paths.append(path)
    print(f"  {split}: {len(rows)} sentences", flush=True)
  return paths[0], paths[1]


def finetune(task_dir, train_file, dev_file, name, init_from, seed) -> dict:
  import dataclasses  # pylint: disable=import-outside-toplevel

  from roberta_tf.finetuning import sweep_runner  # pylint: disable=import-outside-toplevel
  from roberta_tf.finetuning.finetune_config import FinetuneConfig  # pylint: disable=import-outside-toplevel
  # One seed per call where the config sweeps seeds itself (the paper's median-of-5 protocol).
  extra = {"seeds": 1} if "seeds" in {f.name for f in dataclasses.fields(FinetuneConfig)} else {}
  cfg = FinetuneConfig.from_dict(dict(
      task="classification", model_dir=os.path.join(task_dir, f"ft_{name}_{seed}"),
      train_file=train_file, eval_file=dev_file, labels=acceptability_task.LABELS,
      init_from=init_from, config=FLAGS.config, vocab_dir=FLAGS.vocab_dir,
      max_seq_len=FLAGS.max_seq_len, batch_size=16, epochs=FLAGS.epochs,
      learning_rates=tuple(float(r) for r in FLAGS.learning_rates), seed=seed, overwrite=True,
      **extra))
  return sweep_runner.run_sweep(cfg)


def main(argv):
  del argv
  os.makedirs(FLAGS.work_dir, exist_ok=True)
  model_dir = docs_bench.pretrain(FLAGS.work_dir)
  task_dir = os.path.join(FLAGS.work_dir, f"acceptability_{FLAGS.corruption}")
  train_file, dev_file = write_task(task_dir)
  summary = {"pretrain_steps": FLAGS.pretrain_steps, "config": FLAGS.config,
             "corruption": FLAGS.corruption, "results": {}}
  for name, init in (("pretrained", model_dir), ("random", "")):
    runs = [finetune(task_dir, train_file, dev_file, name, init, int(s)) for s in FLAGS.seeds]
    summary["results"][name] = {"accuracy": [r["accuracy"] for r in runs],
                                "learning_rate": [r.get("learning_rate") for r in runs]}
    print(f"  {name}: {[round(r['accuracy'], 3) for r in runs]}", flush=True)
  with open(os.path.join(task_dir, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
  medians = {k: statistics.median(v["accuracy"]) for k, v in summary["results"].items()}
  print(f"\nacceptability dev accuracy (intact vs two words {FLAGS.corruption}d, chance 0.5), "
        f"{FLAGS.config} pretrained for {FLAGS.pretrain_steps} steps, seeds {FLAGS.seeds}:")
  for key, r in summary["results"].items():
    accs = ", ".join(f"{a:.3f}" for a in r["accuracy"])
    print(f"  {key:<11} median {medians[key]:.3f}  [{accs}]")
  print(f"  pretrained - random: {100 * (medians['pretrained'] - medians['random']):+.1f} points")


if __name__ == "__main__":
  app.run(main)
