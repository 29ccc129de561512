"""The starting checkpoint the fine-tuning comparisons share (tagging_vs_hf, embedding_vs_st,
bf16_accuracy, glue_vs_hf, docs_sections_gain): pretrained here with the project's
pipeline on the benchmark's training documents (cached in work/pretrained), and its
`convert_checkpoint --to_hf` folder for the peer (work/hf_model); the flags that choose it;
also the host and commit a record names."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterable

from absl import flags

from benchmarks.common import cached_data, commands

# The flags its define_* functions declare belong to the calling script: its --help lists them.
flags.disclaim_key_flags()
FLAGS = flags.FLAGS


def define_flags(*, max_seq_len: int, pretrain_steps: int, init_from: bool = True,
                 vocab_dir: bool = True, max_seq_len_help: str = "") -> None:
  """--vocab_dir, --init_from, --config, --max_seq_len, --pretrain_steps and
  --pretrain_learning_rate with a benchmark's defaults (`init_from`, `vocab_dir`: False where
  the benchmark has no such flag or defines it elsewhere)."""
  if vocab_dir:
    flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB, "vocab.json + merges.txt of the "
                        "pretraining (the fixture's 8000 ids).")
  if init_from:
    flags.DEFINE_string("init_from", "", "A pretrained model dir to start from (default: "
                        "pretrain one in work_dir on the benchmark's training documents).")
  flags.DEFINE_string("config", "tiny", "Model size preset of the pretraining.")
  flags.DEFINE_integer("max_seq_len", max_seq_len, "Pretraining and fine-tuning sequence length"
                       + (f"; {max_seq_len_help}" if max_seq_len_help else "."))
  flags.DEFINE_integer("pretrain_steps", pretrain_steps, "Pretraining steps (batch 32).")
  flags.DEFINE_float("pretrain_learning_rate", 2e-3, "Pretraining peak learning rate.")


def from_flags(work: str, texts: Iterable[str], log_every: int = 100) -> str:
  """The starting checkpoint: --init_from (relative to the repository), or `pretrain` with the
  flags of `define_flags` on `texts`."""
  init_from = FLAGS.init_from if "init_from" in FLAGS else ""
  if init_from:
    return os.path.join(commands.REPO, init_from)
  return pretrain(work, texts, vocab_dir=FLAGS.vocab_dir, config=FLAGS.config,
                  max_seq_len=FLAGS.max_seq_len, steps=FLAGS.pretrain_steps,
                  learning_rate=FLAGS.pretrain_learning_rate, log_every=log_every)


def pretrain(work: str, texts: Iterable[str], *, vocab_dir: str, config: str, max_seq_len: int,
             steps: int, learning_rate: float, log_every: int = 100) -> str:
  """work/pretrained: `config` pretrained for `steps` (batch 32) on `texts` (read only when the
  checkpoint is not there yet: pass a generator); returns the model dir."""
  model_dir = os.path.join(work, "pretrained")
  if os.path.isfile(os.path.join(model_dir, "checkpoint")):
    return model_dir
  print("pretraining", flush=True)
  corpus = cached_data.write_jsonl(os.path.join(work, "pretraining.jsonl"), texts)
  shards = cached_data.shards(os.path.join(work, "shards"), corpus, vocab_dir,
                              max_seq_len=max_seq_len, rebuild=True)
  commands.run_module(
      ["roberta_tf.train", f"--config={config}", f"--train_data={shards}",
       f"--eval_data={shards}", f"--model_dir={model_dir}", f"--max_seq_len={max_seq_len}",
       "--batch_size=32", f"--train_steps={steps}", f"--learning_rate={learning_rate}",
       f"--warmup_steps={max(1, steps // 20)}", f"--log_every={log_every}",
       f"--checkpoint_every={steps}", "--eval_steps=8", "--shuffle_buffer=5000"],
      os.path.join(work, "pretrain.log"), timed=True)
  return model_dir


def to_hf(work: str, model_dir: str, name: str = "hf_model") -> str:
  """work/`name`: model_dir's `convert_checkpoint --to_hf` folder (cached)."""
  hf_dir = os.path.join(work, name)
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
