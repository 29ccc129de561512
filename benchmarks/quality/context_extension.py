r"""Benchmark: ModernBERT's context extension as a phase (issue 61 point 3), judged by the
by-position held-out loss `evaluate` reports (point 4).

    nice python -m benchmarks.quality.context_extension [--work_dir=runs/context_extension] \
        [--phase1_steps=600] [--extend_steps=120]

The protocol, at the `tiny` ModernBERT size (3 layers, H 128, 128-token local windows, layer 0
global), on the Python docs corpus (DOCS_CORPUS):
1. held out: --held_out_docs documents of at least --held_out_chars characters (>= 8K tokens
   each), chosen by a fixed rule; the vocabulary (an 8K byte-level BPE, ModernBERT's
   tokenizer.json pipeline) and every model train on the other documents only.
2. `phase1`: `train --flagfile=flags/modernbert_phase1.flags` at 1,024 tokens, rotary theta
   10,000 on every layer, scaled down to --phase1_steps of --phase1_batch sequences.
   Annealed to 0 (--schedule=linear), so the unextended model is at its best.
3. from phase1's checkpoint, at equal steps, tokens and schedule (--extend_steps, WSD: constant
   --extend_lr from the first update, then the last --decay_fraction decaying 1-sqrt to 0.001x):
   - `extended`: `train --flagfile=flags/modernbert_extend.flags --init_from=phase1`: 8,192
     tokens a sequence (1 a step), global theta 160,000. Stopped by SIGTERM after its first
     checkpoint and resumed by the same command (the run's log shows both).
   - `continued_1k` (the control): the same steps and tokens at 1,024 (8 sequences a step) and
     theta 10,000: what more training alone buys.
4. `evaluate` scores each model (and phase1) on the held-out documents, one document a row of
   up to 8,192 tokens (DOC-SENTENCES shards), 15% masked (ModernBERT's evaluation rate), fixed
   masks: MLM loss by position bucket (0-512, 512-1K, 1K-2K, 2K-4K, 4K-8K); and each model's
   loss on the same documents in rows of 1,024 tokens (the short-context baseline).

Each stage is skipped when its output exists in --work_dir (a rerun only prints and records).
Records: --records (benchmarks/records/context_extension.jsonl), one line per model (its
by-position losses and masked-token counts, the 1,024-row loss, the command) and one summary
line (the gains on the far buckets, the resume's log lines); printed: the table.
docs/long_inputs.md quotes the record.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import signal
import subprocess
import sys
import time

from absl import app, flags

from benchmarks.common import cached_data, commands
from roberta_tf.pretraining import position_buckets

flags.DEFINE_string("work_dir", "runs/context_extension", "Corpus splits, vocabulary, shards, "
                    "models and logs (each reused when built before).")
flags.DEFINE_string("corpus", commands.DOCS_CORPUS, "The Python docs JSONL corpus.")
flags.DEFINE_integer("held_out_docs", 12, "Documents held out for the by-position evaluation.")
flags.DEFINE_integer("held_out_chars", 40000, "Held-out documents have at least this many "
                     "characters (~10K tokens of the 8K vocabulary).")
flags.DEFINE_integer("vocab_size", 8000, "The BPE vocabulary's size.")
flags.DEFINE_integer("phase1_steps", 600, "Phase 1's steps (1,024 tokens a sequence).")
flags.DEFINE_integer("phase1_batch", 8, "Phase 1's sequences a step.")
flags.DEFINE_float("phase1_lr", 2e-3, "Phase 1's peak learning rate.")
flags.DEFINE_integer("extend_steps", 120, "Steps of the extension and of its control.")
flags.DEFINE_float("extend_lr", 7.5e-4, "The extension's constant rate (the recipe's 3e-4 is "
                   "0.375x its phase-1 peak 8e-4; so is 7.5e-4 of 2e-3).")
flags.DEFINE_float("decay_fraction", 0.2, "The share of --extend_steps that decays the rate.")
flags.DEFINE_string("precision", "mixed_bfloat16", "Training's --precision.")
flags.DEFINE_string("optimizer", "adamw", "The extension's --optimizer (the flagfile's is "
                    "stable_adamw; the record's runs predate it and trained with AdamW).")
flags.DEFINE_string("records", os.path.join(commands.REPO, "benchmarks", "records",
                                            "context_extension.jsonl"),
                    "Where the records go (appended); empty: none.")

SHORT, LONG = 1024, 8192


def split_corpus(corpus: str, out_dir: str, docs: int, min_chars: int) -> tuple[str, str]:
  """out_dir/train.jsonl and out_dir/held_out.jsonl: `docs` documents of >= `min_chars`
  characters (every k-th such document in source order) held out, the rest for training."""
  train, held = os.path.join(out_dir, "train.jsonl"), os.path.join(out_dir, "held_out.jsonl")
  if os.path.isfile(held):
    return train, held
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    rows = sorted((json.loads(line) for line in f), key=lambda r: r["source"])
  long_ones = [r["source"] for r in rows if len(r["text"]) >= min_chars]
  if len(long_ones) < docs:
    raise app.UsageError(f"--corpus={corpus} has {len(long_ones)} documents of >= {min_chars} "
                         f"characters, fewer than --held_out_docs={docs}")
  chosen = set(long_ones[::len(long_ones) // docs][:docs])
  os.makedirs(out_dir, exist_ok=True)
  cached_data.write_jsonl(train, (r["text"] for r in rows if r["source"] not in chosen))
  cached_data.write_jsonl(held, (r["text"] for r in rows if r["source"] in chosen))
  return train, held


def build_data(work: str, args) -> dict[str, str]:
  """The vocabulary (trained on the train split only) and three shard sets: train at 1,024 and
  at 8,192 (FULL-SENTENCES), the held-out documents at 8,192 (DOC-SENTENCES: a row is one
  document's text)."""
  train, held = split_corpus(args.corpus, os.path.join(work, "corpus"), args.held_out_docs,
                             args.held_out_chars)
  vocab = cached_data.vocab(os.path.join(work, "vocab"), train, args.vocab_size,
                            extra=["--format=tokenizer_json"])
  return {
      "vocab": vocab,
      "train_1k": cached_data.shards(os.path.join(work, "shards_1k"), train, vocab,
                                     max_seq_len=SHORT, validation_fraction=0),
      "train_8k": cached_data.shards(os.path.join(work, "shards_8k"), train, vocab,
                                     max_seq_len=LONG, validation_fraction=0),
      "held_out": cached_data.shards(os.path.join(work, "held_out_8k"), held, vocab,
                                     max_seq_len=LONG, num_shards=1, validation_fraction=0,
                                     extra=["--packing=doc_sentences"]),
      "held_out_1k": cached_data.shards(os.path.join(work, "held_out_1k"), held, vocab,
                                        max_seq_len=SHORT, num_shards=1, validation_fraction=0,
                                        extra=["--packing=doc_sentences"]),
  }



def _train(model_dir: str, flagfile: str, train_data: str, extra: list[str]) -> list[str]:
  """`roberta_tf.train`'s arguments: the flagfile (paper settings), then this scaled-down run's
  overrides (later flags win)."""
  return ["roberta_tf.train", f"--flagfile=flags/{flagfile}", f"--train_data={train_data}",
          f"--model_dir={model_dir}", *extra]


def phase1_command(work: str, data: dict, args) -> list[str]:
  """Phase 1 at 1,024 tokens, theta 10,000, scaled down: tiny, --phase1_batch x 1,024 tokens a
  step; linear decay to 0 (the flagfile's WSD holds the peak for a later decay; here the
  unextended model is annealed, at its best at 1,024)."""
  return _train(os.path.join(work, "phase1"), "modernbert_phase1.flags", data["train_1k"], [
      "--config=tiny", f"--batch_size={args.phase1_batch}", f"--train_steps={args.phase1_steps}",
      f"--warmup_steps={max(args.phase1_steps // 20, 1)}", f"--learning_rate={args.phase1_lr}",
      "--schedule=linear", "--optimizer=adamw", "--weight_decay=0.01",
      f"--precision={args.precision}",
      "--log_every=25", f"--checkpoint_every={max(args.phase1_steps // 3, 1)}",
      "--peak_flops=1e12"])


def extension_commands(work: str, data: dict, args) -> dict[str, list[str]]:
  """From phase1, at equal steps, tokens (8,192 a step) and WSD schedule (constant from the
  first step at --extend_lr, the last --decay_fraction decaying 1-sqrt): `extended` (8,192
  tokens, global theta 160,000: the flagfile's) and `continued_1k` (the control: 8 x 1,024
  tokens, theta 10,000)."""
  common = [f"--init_from={os.path.join(work, 'phase1')}", f"--train_steps={args.extend_steps}",
            f"--learning_rate={args.extend_lr}",
            f"--decay_steps={max(round(args.decay_fraction * args.extend_steps), 1)}",
            f"--optimizer={args.optimizer}", f"--precision={args.precision}", "--log_every=10",
            f"--checkpoint_every={max(args.extend_steps // 3, 1)}", "--peak_flops=1e12"]
  return {
      "extended": _train(os.path.join(work, "extended"), "modernbert_extend.flags",
                         data["train_8k"], [*common, "--batch_size=1"]),
      "continued_1k": _train(os.path.join(work, "continued_1k"), "modernbert_extend.flags",
                             data["train_1k"], [*common, f"--batch_size={LONG // SHORT}",
                                                f"--max_seq_len={SHORT}",
                                                "--model_option=global_rope_theta=10000"]),
  }


def _finished(model_dir: str, steps: int) -> bool:
  return os.path.isfile(os.path.join(model_dir, f"ckpt-{steps}.index"))


def run_resumed(args: list[str], model_dir: str, stop_at: int, log_path: str) -> list[str]:
  """Runs `python -m args`, sends SIGTERM once checkpoint `stop_at` exists (the run saves and
  exits), then runs the same command again to the end. Returns the lines of both logs that
  say where they stopped and resumed."""
  with open(log_path + ".part1", "w", encoding="utf-8") as log:
    proc = subprocess.Popen([sys.executable, "-m", *args], cwd=commands.REPO, stdout=log,
                            stderr=subprocess.STDOUT, text=True)
    while proc.poll() is None and not _finished(model_dir, stop_at):
      time.sleep(2)
    if proc.poll() is None:
      proc.send_signal(signal.SIGTERM)
    if proc.wait():
      sys.exit(f"failed: python -m {' '.join(args)} (see {log_path}.part1)")
  commands.run_module(args, log_path + ".part2", timed=True)
  return resume_lines(log_path)


def resume_lines(log_path: str) -> list[str]:
  """The lines of `run_resumed`'s two logs that say where the run started, stopped, resumed
  and ended ([] without logs)."""
  said = []
  for part in (".part1", ".part2"):
    if os.path.isfile(log_path + part):
      with open(log_path + part, encoding="utf-8") as f:
        said += [line.strip() for line in f if re.search(
            r"^(SIGTERM|initialized weights|resumed from|trained to step)", line)]
  return said


def evaluate(model_dir: str, held_out: str, out: str, length: int = LONG) -> dict:
  """`evaluate` on the held-out documents in rows of `length` tokens (the run's seed and
  evaluation masks: 15%, the same for every model); its --output_file's held-out metrics."""
  if not os.path.isfile(out):
    commands.run_module(["roberta_tf.evaluate", f"--model_dir={model_dir}",
                         f"--eval_data={held_out}", "--split=train", f"--max_seq_len={length}",
                         "--batch_size=2", "--nounigram", f"--output_file={out}"],
                        out + ".log", timed=True)
  with open(out, encoding="utf-8") as f:
    return json.load(f)["held_out"]


MODELS = ("phase1", "continued_1k", "extended")


def table(results: dict[str, dict]) -> str:
  """Markdown: each model's held-out loss by position bucket (and overall), then the extended
  model's gain over each other model per bucket."""
  buckets = [b for b in position_buckets.bucket_names(position_buckets.DEFAULT_EDGES)
             if b in results["extended"]["loss_by_position"]]
  lines = ["| model | " + " | ".join(buckets) + " | all | all, 1,024-token rows |",
           "|---|" + "---:|" * (len(buckets) + 2)]
  for name, m in results.items():
    lines.append(f"| {name} | " + " | ".join(f"{m['loss_by_position'][b]:.3f}" for b in buckets)
                 + f" | {m['loss']:.3f} | {m['loss_1k_rows']:.3f} |")
  ext = results["extended"]
  for name, m in results.items():
    if name != "extended":
      gains = [ext["loss_by_position"][b] - m["loss_by_position"][b] for b in buckets]
      lines.append(f"| extended - {name} | " + " | ".join(f"{g:+.3f}" for g in gains)
                   + f" | {ext['loss'] - m['loss']:+.3f} | {ext['loss'] - m['loss_1k_rows']:+.3f}"
                   " (8,192-token rows against its 1,024) |")
  counts = results["extended"]["masked_tokens_by_position"]
  lines.append("| masked tokens | " + " | ".join(f"{counts[b]:,.0f}" for b in buckets)
               + f" | {results['extended']['masked_tokens']:,.0f} | |")
  return "\n".join(lines)


def _cpu() -> str:
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    text = f.read()
  model = re.search(r"model name\s*:\s*(.*)", text)
  family = re.search(r"cpu family\s*:\s*(\d+)", text)
  return (f"{model.group(1) if model else 'unknown'} (family {family.group(1) if family else '?'}"
          f"), {os.cpu_count()} logical CPUs")


def write_records(path: str, results: dict, runs: dict, said: list[str], args) -> None:
  """One line per model, then a summary: the extended model's gain on the far buckets (those
  past 1,024 tokens) over phase1 and over the control."""
  stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
  order = position_buckets.bucket_names(position_buckets.DEFAULT_EDGES)
  for m in results.values():  # position order (an --output_file before it kept the order)
    for key in ("loss_by_position", "masked_tokens_by_position"):
      m[key] = {b: m[key][b] for b in order if b in m[key]}
  far = [b for b in results["extended"]["loss_by_position"] if b not in ("0-512", "512-1K")]
  with open(path, "a", encoding="utf-8") as f:
    for name, m in results.items():
      f.write(json.dumps({"kind": "model", "model": name, "date": stamp, "cpu": _cpu(),
                          "command": "python -m " + " ".join(runs[name]), **{
                              k: m[k] for k in ("loss", "masked_tokens", "loss_by_position",
                                                "masked_tokens_by_position", "loss_1k_rows")}})
              + "\n")
    gains = {other: {b: results[other]["loss_by_position"][b]
                     - results["extended"]["loss_by_position"][b] for b in far}
             for other in ("phase1", "continued_1k")}
    f.write(json.dumps({
        "kind": "summary", "date": stamp, "cpu": _cpu(), "far_buckets": far,
        "far_gain_vs_phase1": gains["phase1"], "far_gain_vs_continued_1k": gains["continued_1k"],
        "improves_on_far_buckets": all(g > 0 for g in gains["continued_1k"].values())
        and all(g > 0 for g in gains["phase1"].values()),
        # The extended model on 8,192-token rows against the best unextended one on 1,024.
        "gain_vs_best_1k_rows": min(results[o]["loss_1k_rows"] for o in ("phase1", "continued_1k"))
        - results["extended"]["loss"],
        "resume_log": said, "settings": {k: getattr(args, k) for k in (
            "phase1_steps", "phase1_batch", "phase1_lr", "extend_steps", "extend_lr",
            "decay_fraction", "optimizer", "precision", "held_out_docs", "held_out_chars",
            "vocab_size")},
    }) + "\n")


def main(argv):
  del argv
  args = commands.flag_args(flags.FLAGS)
  work = os.path.abspath(args.work_dir)
  data = build_data(work, args)
  runs = {"phase1": phase1_command(work, data, args), **extension_commands(work, data, args)}
  if not _finished(os.path.join(work, "phase1"), args.phase1_steps):
    commands.run_module(runs["phase1"], os.path.join(work, "phase1.log"), timed=True)
  extended = os.path.join(work, "extended")
  if not _finished(extended, args.extend_steps):
    run_resumed(runs["extended"], extended, max(args.extend_steps // 3, 1),
                os.path.join(work, "extended.log"))
  said = resume_lines(os.path.join(work, "extended.log"))
  print("\n".join("    " + line for line in said))
  if not _finished(os.path.join(work, "continued_1k"), args.extend_steps):
    commands.run_module(runs["continued_1k"], os.path.join(work, "continued_1k.log"),
                        timed=True)
  results = {name: evaluate(os.path.join(work, name), data["held_out"],
                            os.path.join(work, f"eval_{name}.json")) for name in MODELS}
  # The same documents cut into 1,024-token rows: what each model scores where no row is longer
  # than phase 1's, the short-context baseline the 8,192-token rows must beat.
  for name in MODELS:
    results[name]["loss_1k_rows"] = evaluate(
        os.path.join(work, name), data["held_out_1k"], os.path.join(work, f"eval_{name}_1k.json"),
        SHORT)["loss"]
  print(table(results))
  if args.records:
    write_records(args.records, results, runs, said, args)


if __name__ == "__main__":
  app.run(main)
