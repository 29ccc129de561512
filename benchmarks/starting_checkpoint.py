"""The starting checkpoint the fine-tuning comparisons share (tagging_vs_hf, embedding_vs_st):
pretrained here with the project's pipeline on the benchmark's training documents (cached in
work/pretrained), and its `convert_checkpoint --to_hf` folder for the peer (work/hf_model);
also the host and commit a record names."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterable

from benchmarks import commands


def pretrain(work: str, texts: Iterable[str], *, vocab_dir: str, config: str, max_seq_len: int,
             steps: int, learning_rate: float) -> str:
  """work/pretrained: `config` pretrained for `steps` (batch 32) on `texts` (read only when the
  checkpoint is not there yet: pass a generator); returns the model dir."""
  model_dir = os.path.join(work, "pretrained")
  if os.path.isfile(os.path.join(model_dir, "checkpoint")):
    return model_dir
  corpus = os.path.join(work, "pretraining.jsonl")
  with open(corpus, "w", encoding="utf-8") as f:
    for text in texts:
      f.write(json.dumps({"text": text}) + "\n")
  shards = os.path.join(work, "shards")
  print("pretraining", flush=True)
  commands.run_module(
      ["data_prep.build_shards", f"--input={corpus}", f"--vocab_dir={vocab_dir}",
       f"--output_dir={shards}", f"--max_seq_len={max_seq_len}", "--num_shards=4",
       "--validation_fraction=0.02", "--overwrite", "--noprogress"],
      os.path.join(work, "build_shards.log"), timed=True)
  commands.run_module(
      ["roberta_tf.train", f"--config={config}", f"--train_data={shards}",
       f"--eval_data={shards}", f"--model_dir={model_dir}", f"--max_seq_len={max_seq_len}",
       "--batch_size=32", f"--train_steps={steps}", f"--learning_rate={learning_rate}",
       f"--warmup_steps={max(1, steps // 20)}", "--log_every=100",
       f"--checkpoint_every={steps}", "--eval_steps=8", "--shuffle_buffer=5000"],
      os.path.join(work, "pretrain.log"), timed=True)
  return model_dir


def to_hf(work: str, model_dir: str) -> str:
  """work/hf_model: model_dir's `convert_checkpoint --to_hf` folder (cached)."""
  hf_dir = os.path.join(work, "hf_model")
  if not os.path.isfile(os.path.join(hf_dir, "config.json")):
    commands.run_module(["roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={model_dir}",
                         f"--hf_dir={hf_dir}"], os.path.join(work, "to_hf.log"), timed=True)
  return hf_dir


def host() -> str:
  """'<CPU model name> x<cores>' (records say which machine a figure came from)."""
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
  return f"{names[0] if names else 'unknown CPU'} x{os.cpu_count()}"


def git_head() -> str:
  """The repository's short HEAD commit ("" outside a checkout)."""
  return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=commands.REPO,
                        capture_output=True, text=True, check=False).stdout.strip()
