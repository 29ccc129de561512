r"""Benchmark: fine-tuning throughput on short sentences at --max_seq_len=512, by batching.

    python -m benchmarks.finetuning.batching [--work_dir=runs/finetune_batching] [--config=small] \
        [--examples=2000] [--batch_size=32] [--epochs=2] [--before=REF] \
        [--runs=length_buckets,random,max_seq_len,hf,before]

The task: word order in SST-2's layout (benchmarks/tasks/glue_text_tasks.py; sentences of 8-40
words, ~25 tokens), --examples training sentences and 64 dev sentences. The model: a random-init
--config preset with a 512-position table and the fixture's 8K vocab (weights do not change the
speed), saved as a model dir and exported with --to_hf, so every side computes the same network.

Runs (one process each, one after the other):
  length_buckets, random, max_seq_len   roberta_tf.finetune --batching=... (bucketing.py)
  before   the same command on the code at git --before (default: none): before this change
           every batch was padded to its longest example, a new shape for the train step's
           tf.function -- a retrace -- almost every step
  hf       benchmarks/finetuning/hf_finetune.py: HF transformers on torch, random batches padded
           to their longest example (DataCollatorWithPadding)
Printed per run and epoch: seconds (ours: training plus the 64-sentence dev pass; HF: training),
training examples/s, and the ratio to `before`. A finished run's figures are kept in
work_dir/results/ and reused by a rerun (delete them to measure again).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time

import numpy as np
from absl import app, flags

from benchmarks.common import commands, starting_checkpoint
from benchmarks.finetuning import hf_finetune
from benchmarks.tasks import glue_text_tasks

REPO = commands.REPO

FLAGS = flags.FLAGS
glue_text_tasks.define_data_flags("runs/finetune_batching", "Task, model, runs, summary.json.")
flags.DEFINE_string("config", "small", "Model size preset.")
commands.define_batch_flags(batch_size=32, max_seq_len=512, batch_help="Batch size.",
                            seq_help="The model's and fine-tuning's max_seq_len.")
flags.DEFINE_integer("examples", 2000, "Training sentences.")
flags.DEFINE_integer("epochs", 2, "Epochs per run.")
flags.DEFINE_string("before", "", "A git ref of this repository to run as `before` (its "
                    "roberta_tf.finetune, --task=classification on the same TSV files).")
flags.DEFINE_list("runs", ["before", "length_buckets", "random", "max_seq_len", "hf"],
                  "Runs, in order.")

_EPOCH = re.compile(r"epoch (\d+)/\d+: .*\| ([0-9.]+)s \|")


def _model(work: str) -> tuple[str, str]:
  """A random-init model dir and its --to_hf folder."""
  model_dir = os.path.join(work, "model")
  if not os.path.isfile(os.path.join(work, "hf", "config.json")):
    import keras  # pylint: disable=import-outside-toplevel

    from roberta_tf import models  # pylint: disable=import-outside-toplevel
    from roberta_tf.tokenization import vocab_files  # pylint: disable=import-outside-toplevel
    keras.utils.set_random_seed(0)
    config = models.preset(FLAGS.config, vocab_size=8000, max_seq_len=FLAGS.max_seq_len)
    models.save(model_dir, models.build_pretrainer(config), overwrite=True)
    vocab_files.copy_vocab_files(FLAGS.vocab_dir, model_dir)
  return model_dir, starting_checkpoint.to_hf(work, model_dir, name="hf")


def _ours(src: str, name: str, argv: list[str], work: str) -> list[float]:
  """Runs a roberta_tf.finetune command in `src`; returns each epoch's seconds."""
  log = os.path.join(work, f"{name}.log")
  commands.run_module(["roberta_tf.finetune", *argv], log, cwd=src)
  with open(log, encoding="utf-8") as f:
    return [float(m.group(2)) for m in map(_EPOCH.search, f) if m]


def _before_src(work: str, ref: str) -> str:
  src = os.path.join(work, f"src_{ref}")
  if not os.path.isdir(src):
    os.makedirs(src)
    archive = subprocess.run(["git", "archive", ref], cwd=REPO, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", src], input=archive.stdout, check=True)
  return src


def _one_run(name: str, work: str, task: str, hf_dir: str, common: list[str]) -> dict | None:
  """{"seconds": [per epoch], ...} of one of --runs (None: `before` without --before)."""
  out = os.path.join(work, "runs", name)
  if name == "hf":
    (a, _, y), (da, _, dy) = (glue_text_tasks.read_split("sst2", os.path.join(task, f"{s}.tsv"))
                              for s in ("train", "dev"))
    recipe = hf_finetune.Recipe(max_seq_len=FLAGS.max_seq_len, batch_size=FLAGS.batch_size,
                                learning_rate=1e-4, epochs=FLAGS.epochs)
    run = hf_finetune.finetune(hf_dir, (a, None, np.asarray(y)), (da, None, np.asarray(dy)),
                               2, recipe, seed=0)
    padding = 1 - run["epochs"][0]["tokens"] / run["epochs"][0]["padded_tokens"]
    return {"seconds": [e["train_seconds"] for e in run["epochs"]], "pad_fraction": padding}
  if name == "before":
    if not FLAGS.before:
      return None
    return {"seconds": _ours(_before_src(work, FLAGS.before), name, [
        "--task=classification", f"--train_file={task}/train.tsv",
        f"--eval_file={task}/dev.tsv", "--text_fields=sentence", "--label_field=label",
        f"--model_dir={out}", *common], work)}
  return {"seconds": _ours(REPO, name, [
      "--glue_task=sst2", f"--data_dir={task}", f"--model_dir={out}", "--seeds=1",
      f"--batching={name}", *common], work)}


def main(argv):
  del argv
  # torch's OpenMP threads spin while they wait; beside other jobs that burns their time slices
  # (benchmarks/quality/pretraining_vs_hf.py measured a step 1.7x as long as with passive waiting).
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  work = os.path.abspath(FLAGS.work_dir)
  os.makedirs(work, exist_ok=True)
  task = os.path.join(work, "task")
  if not os.path.isfile(os.path.join(task, "dev.tsv")):
    glue_text_tasks.write_word_order(FLAGS.corpus, task, FLAGS.examples, 64, 16,
                                     held_out_every=1)
  model_dir, hf_dir = _model(work)
  common = [f"--init_from={model_dir}", f"--max_seq_len={FLAGS.max_seq_len}",
            f"--batch_size={FLAGS.batch_size}", f"--epochs={FLAGS.epochs}",
            "--learning_rate=1e-4", "--overwrite"]
  results = {}
  for name in FLAGS.runs:
    print(name, flush=True)
    done = os.path.join(work, "results", f"{name}.json")
    if os.path.isfile(done):  # finished by an earlier invocation
      with open(done, encoding="utf-8") as f:
        results[name] = json.load(f)
      continue
    result = _one_run(name, work, task, hf_dir, common)
    if result is None:
      continue
    result["examples_per_sec"] = [FLAGS.examples / s for s in result["seconds"]]
    results[name] = result
    print(f"  {json.dumps(result)}", flush=True)
    os.makedirs(os.path.dirname(done), exist_ok=True)
    with open(done, "w", encoding="utf-8") as f:
      json.dump(result, f)
  summary = {"config": FLAGS.config, "max_seq_len": FLAGS.max_seq_len,
             "examples": FLAGS.examples, "batch_size": FLAGS.batch_size, "runs": results,
             "when": time.strftime("%Y-%m-%d %H:%M")}
  with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=2)
  base = results.get("before")
  print(f"\n{FLAGS.config}, max_seq_len {FLAGS.max_seq_len}, {FLAGS.examples} sentences, batch "
        f"{FLAGS.batch_size}: training examples/s per epoch")
  for name, r in results.items():
    ratio = (" | " + ", ".join(f"{s / b:.2f}x" for s, b in zip(
        r["examples_per_sec"], base["examples_per_sec"], strict=True)) + " of before"
             if base and name != "before" else "")
    print(f"  {name:<15} " + ", ".join(f"{v:8.1f}" for v in r["examples_per_sec"]) + ratio)


if __name__ == "__main__":
  app.run(main)
