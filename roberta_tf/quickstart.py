"""The README demo on the embedded corpus: vocab → shards → pretrain → export → fill-mask.

  python -m roberta_tf.quickstart [--work_dir=runs/quickstart] [--train_steps=N]

Runs the project's own binaries one after another (each command is printed, so it can be rerun
by hand): `data_prep.train_tokenizer` (8K byte-level BPE on `stdlib`, the running Python's
documentation), `data_prep.build_shards` (FULL-SENTENCES, 128 tokens, 10% of the documents held
out), `roberta_tf.train --flagfile=flags/quickstart.flags` (the `small` model; --precision=auto:
the faster of float32 and mixed_bfloat16 here, measured at start), `roberta_tf.export`,
`roberta_tf.fill_mask --held_out` (masked words of the held-out split, chosen by a fixed rule,
each ranked by the model and by the unigram baseline). Ends with the held-out perplexity and
the median rank beside the unigram baseline's (what a model that ignores context scores).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import subprocess
import sys
import time

from roberta_tf.common import atomic_write, cli, files, flagfiles, options
from roberta_tf.common.options import option
from roberta_tf.serving import frozen_weights


@dataclasses.dataclass(frozen=True)
class QuickstartSettings:
  """quickstart's flags."""
  work_dir: str = option(
      "runs/quickstart", "Where the vocab, shards, model and export go (replaced if it holds "
      "only an earlier quickstart's outputs).", path=True)
  train_steps: int | None = option(None, "Override flags/quickstart.flags' --train_steps.")
  precision: str = option(
      "auto", "auto (train times float32 and mixed_bfloat16 for a few steps and takes the "
      "faster), or float32 / mixed_bfloat16 / mixed_float16.")


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(QuickstartSettings, FLAGS)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # local-only: this package
# What a run writes into --work_dir (and what a re-run may delete).
OUTPUTS = ("vocab", "shards", "model", "saved_model", "quickstart_summary.json")
# fill_mask --held_out: masked words shown, and held-out sequences ranked for the medians.
SHOWN_EXAMPLES = 6
RANKED_EXAMPLES = 400


def _run(args, log_lines=None):
  cmd = [sys.executable, "-m", *args]
  print("\n$ python -m " + shlex.join(args), flush=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
  said = ""
  for line in proc.stdout:
    if _is_noise(line) or not line.strip():
      continue
    print("  " + line, end="", flush=True)
    said = line.strip() if line.startswith("error:") else said
    if log_lines is not None:
      log_lines.append(line)
  if proc.wait() != 0:
    raise RuntimeError(f"{args[0]} failed (exit {proc.returncode})"
                       + (f": {said.removeprefix('error:').strip()}" if said else ""))


def _flagfile(name: str) -> str:
  """flags/<name>.flags in a checkout (relative to REPO, the subprocesses' cwd), else the copy
  an installed package ships (roberta_tf/flags/)."""
  relative = os.path.join("flags", f"{name}.flags")
  in_repo = os.path.isfile(os.path.join(REPO, relative))  # local-only: the repository's files
  return relative if in_repo else flagfiles.path(name)


def _is_noise(line: str) -> bool:
  """TF/absl start-up chatter that says nothing about the job."""
  return bool(re.match(r"^(WARNING: All log messages|[IWE]\d{4} |I0000|E0000|W0000)", line))


def _fresh_work_dir(work_dir: str) -> str:
  """`work_dir` emptied and made (absolute when local: the stages run from the repository
  root). Refuses ram:// and a directory holding anything but an earlier quickstart's outputs."""
  if files.scheme(work_dir) == "ram":
    raise ValueError(f"--work_dir={work_dir}: ram:// lives inside one process and the "
                     "quickstart runs each stage as its own process; give a local directory or "
                     "a shared URL (gs://...)")
  local = not files.is_url(work_dir)
  work = os.path.abspath(work_dir) if local else work_dir  # local-only: a local --work_dir
  if files.isdir(work):
    # Replaced only when it holds nothing but an earlier quickstart's outputs: a mistyped
    # --work_dir (".", a home directory) must not be deleted.
    foreign = sorted(n for n in files.listdir(work) if n.split(".tmp-")[0] not in OUTPUTS)
    if foreign:
      raise ValueError(f"--work_dir={work_dir} holds files that are not quickstart "
                       f"outputs ({', '.join(foreign[:3])}...); choose another one")
    files.rmtree(work)
  elif files.exists(work):
    raise ValueError(f"--work_dir={work_dir} exists and is not a directory")
  files.makedirs(work)
  return work


def _run_stages(work: str, precision: str, train_steps: int | None) -> tuple[list, list]:
  """vocab -> shards -> train -> export -> fill-mask in `work`; (train's lines, fill_mask's)."""
  vocab, shards = files.join(work, "vocab"), files.join(work, "shards")
  model, export = files.join(work, "model"), files.join(work, "saved_model")
  _run(["data_prep.train_tokenizer", "--input=stdlib", "--vocab_size=8000",
        f"--output_dir={vocab}"])
  _run(["data_prep.build_shards", "--input=stdlib", f"--vocab_dir={vocab}",
        f"--output_dir={shards}", "--max_seq_len=128", "--num_shards=4",
        "--validation_fraction=0.1"])
  train_args = ["roberta_tf.train", f"--flagfile={_flagfile('quickstart')}",
                f"--train_data={shards}", f"--eval_data={shards}", f"--model_dir={model}",
                f"--precision={precision}"]
  if train_steps:
    train_args += [f"--train_steps={train_steps}", f"--warmup_steps={max(train_steps // 10, 1)}"]
  train_log, fill_log = [], []
  _run(train_args, train_log)
  _run(["roberta_tf.export", f"--model_dir={model}", f"--export_dir={export}"])
  _run(["roberta_tf.fill_mask", f"--saved_model={export}", f"--held_out={shards}",
        f"--vocab_dir={vocab}", f"--examples={SHOWN_EXAMPLES}",
        f"--rank_sample={RANKED_EXAMPLES}"], fill_log)
  print(f"\nTensorBoard logs: {model}/train and {model}/eval  "
        f"(tensorboard --logdir {model})")
  print(f"SavedModel: {export}  (python -m roberta_tf.fill_mask --saved_model={export} "
        "\"Your text with a <mask>.\")")
  return train_log, fill_log


def summarize(train_log: list[str], fill_log: list[str], summary: dict) -> str:
  """The closing line from the stages' output; adds the figures to `summary`."""
  final = f"quickstart finished in {summary['minutes']} min"
  evals = [(int(m.group(1)), float(m.group(2)), float(m.group(3))) for m in
           (re.search(r"eval step (\d+): loss [\d.]+ \| perplexity ([\d.]+) \|.*"
                      r"unigram perplexity ([\d.]+)", line) for line in train_log) if m]
  if evals:
    (s0, p0, _), (s1, p1, unigram) = evals[0], evals[-1]
    summary.update(initial_perplexity=p0, final_perplexity=p1, final_step=s1,
                   unigram_perplexity=unigram, ratio_to_unigram=round(p1 / unigram, 3))
    print(f"held-out perplexity: {p0:.1f} at step {s0} -> {p1:.1f} at step {s1}")
    final += (f": held-out perplexity {p1:.1f} = {p1 / unigram:.2f}x the unigram baseline "
              f"{unigram:.1f} (a model that ignores context)")
  ranks = [m for m in (re.search(r"median rank of the masked word over (\d+) held-out "
                                 r"examples: model ([\d.]+), unigram baseline ([\d.]+)", line)
                       for line in fill_log) if m]
  if ranks:
    n, model_rank, unigram_rank = ranks[-1].groups()
    summary.update(median_rank=float(model_rank), unigram_median_rank=float(unigram_rank),
                   ranked_examples=int(n))
    final += (f"; the masked held-out word's median rank {float(model_rank):g} against the "
              f"unigram baseline's {float(unigram_rank):g}")
  return final


def main(argv):
  del argv
  frozen_weights.refuse_in_training()  # its train stage would: refuse before any stage
  s = options.from_flags(QuickstartSettings, FLAGS)
  start = time.time()
  work = _fresh_work_dir(s.work_dir)
  train_log, fill_log = _run_stages(work, s.precision, s.train_steps)
  picked = [m.group(1) for m in (re.search(r"precision auto: (\w+)", line) for line in train_log)
            if m]
  precision = picked[-1] if picked else s.precision
  summary = {"precision": precision, "minutes": round((time.time() - start) / 60, 1)}
  final = summarize(train_log, fill_log, summary)
  atomic_write.write_json(files.join(work, "quickstart_summary.json"), summary, sort_keys=False)
  print(final)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
