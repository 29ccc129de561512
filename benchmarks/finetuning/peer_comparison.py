"""What the fine-tuning comparisons against a peer library share (tagging_vs_hf.py against HF
transformers, embedding_vs_st.py against sentence-transformers): their flags, the peer's runs
cached one file a seed, our side's one `roberta_tf.finetune` sweep over the seeds, the key that
says what a side's figures depend on, and a side's record appended once per key."""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import statistics
import time
from collections.abc import Callable

from absl import flags

from benchmarks.common import commands, parity_records, starting_checkpoint
from benchmarks.finetuning import hf_finetune

# The flags its define_* functions declare belong to the calling script: its --help lists them.
flags.disclaim_key_flags()
FLAGS = flags.FLAGS
KEY_FIELDS = ("side", "run_key")


def define_flags(name: str, peer: str, *, batch_size: int, epochs: int, max_seq_len: int,
                 pretrain_steps: int, notes: dict[str, str]) -> None:
  """The starting checkpoint's flags (starting_checkpoint.define_flags), --work_dir
  (runs/NAME), the shared recipe's flags, --seeds, --sides (PEER, ours), --PEER_threads and
  --records (benchmarks/records/NAME.jsonl). `notes`: what --max_seq_len, --batch_size and
  --learning_rate's help add for this benchmark."""
  starting_checkpoint.define_flags(max_seq_len=max_seq_len, pretrain_steps=pretrain_steps,
                                   max_seq_len_help=notes["max_seq_len"])
  flags.DEFINE_string("work_dir", f"runs/{name}", "Set, checkpoint, runs, summary.json.")
  flags.DEFINE_integer("batch_size", batch_size, "Fine-tuning batch size (both sides"
                       f"{notes['batch_size']}).")
  flags.DEFINE_float("learning_rate", 1e-3, "Fine-tuning peak learning rate (both sides; "
                     f"{notes['learning_rate']}).")
  flags.DEFINE_integer("epochs", epochs, "Fine-tuning epochs (both sides; the best dev epoch "
                       "counts).")
  flags.DEFINE_integer("seeds", 3, "Seeds 0..N-1 per side.")
  flags.DEFINE_list("sides", [peer, "ours"], "Sides to run, in order (the table shows those "
                    "with results).")
  flags.DEFINE_integer(f"{peer}_threads", 0, "torch threads (0: torch's default).")
  flags.DEFINE_string("records", os.path.join(commands.REPO, "benchmarks", "records",
                                              f"{name}.jsonl"),
                      "Where a finished side's record is appended.")


def start() -> str:
  """--work_dir, absolute (the binaries run with the repository as cwd) and created; torch set
  to wait passively."""
  # torch's OpenMP threads spin while they wait; beside other jobs that burns their time slices
  # (benchmarks/quality/pretraining_vs_hf.py measured a step 1.7x as long as with passive waiting).
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  work = os.path.abspath(FLAGS.work_dir)
  os.makedirs(work, exist_ok=True)
  return work


def recipe() -> hf_finetune.Recipe:
  """The hyperparameters both sides train with, from the flags."""
  return hf_finetune.Recipe(max_seq_len=FLAGS.max_seq_len, batch_size=FLAGS.batch_size,
                            learning_rate=FLAGS.learning_rate, epochs=FLAGS.epochs)


def peer_runs(work: str, peer: str, run: Callable[[int], dict],
              done: Callable[[dict], str]) -> list[dict]:
  """Each seed's result of `run(seed)`, kept in work/PEER/seedN.json (run only when absent,
  timed into its "seconds"; `done` says a new result in a line)."""
  results = []
  for seed in range(FLAGS.seeds):
    path = os.path.join(work, peer, f"seed{seed}.json")
    if not os.path.isfile(path):
      print(f"{peer} seed {seed}", flush=True)
      start = time.perf_counter()
      result = run(seed)
      result["seconds"] = time.perf_counter() - start
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
      print(f"  {result['seconds']:.0f} s, {done(result)}", flush=True)
    with open(path, encoding="utf-8") as f:
      results.append(json.load(f))
  return results


def ours(work: str, model_dir: str, task_flags: list[str]) -> tuple[dict, float]:
  """(eval_results.json, seconds) of `roberta_tf.finetune` over all seeds in one process
  (work/ours; run only when absent): `task_flags` plus the shared recipe's."""
  out = os.path.join(work, "ours")
  if not os.path.isfile(os.path.join(out, "eval_results.json")):
    print("ours", flush=True)
    start = time.perf_counter()
    commands.run_module(
        ["roberta_tf.finetune", *task_flags, f"--init_from={model_dir}", f"--model_dir={out}",
         f"--max_seq_len={FLAGS.max_seq_len}", f"--batch_size={FLAGS.batch_size}",
         f"--learning_rate={FLAGS.learning_rate}", f"--epochs={FLAGS.epochs}",
         f"--seeds={FLAGS.seeds}"],
        os.path.join(work, "ours.log"), timed=True)
    with open(os.path.join(work, "ours_seconds.json"), "w", encoding="utf-8") as f:
      json.dump({"seconds": time.perf_counter() - start}, f)
  with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
    results = json.load(f)
  with open(os.path.join(work, "ours_seconds.json"), encoding="utf-8") as f:
    return results, json.load(f)["seconds"]


def fingerprint(files: list[str], model_dir: str, *extra) -> str:
  """What a side's figures depend on besides the code: the set's `files`, the checkpoint, the
  recipe, the seeds, the size and `extra`."""
  digest = hashlib.sha256()
  for path in files:
    with open(path, "rb") as f:
      digest.update(f.read())
  with open(os.path.join(model_dir, "checkpoint"), "rb") as f:  # names the checkpoint's step
    digest.update(f.read())
  digest.update(json.dumps([vars(recipe()), FLAGS.seeds, FLAGS.config, FLAGS.pretrain_steps,
                            *extra]).encode())
  return digest.hexdigest()[:16]


def record(side: str, run_key: str, summary: dict, runs: list, **fields) -> None:
  """Appends the side's record unless one with the same key is there (a rerun from the
  cache adds nothing)."""
  if any(r.get("side") == side and r.get("run_key") == run_key
         for r in parity_records.read(FLAGS.records)):
    return
  parity_records.append(FLAGS.records, {
      "side": side, "run_key": run_key, "git": starting_checkpoint.git_head(),
      "host": starting_checkpoint.host(),
      "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
      "recipe": vars(recipe()), "seeds": FLAGS.seeds, "config": FLAGS.config, **fields,
      "checkpoint": FLAGS.init_from or f"pretrained {FLAGS.pretrain_steps} steps",
      **summary, "runs": runs}, KEY_FIELDS)


def run_sides(work: str, runners: dict[str, Callable[[], dict]], run_key: str,
              summarize: Callable[[dict], dict], **fields) -> dict[str, dict]:
  """{side: result} of --sides in order, each recorded as it finishes; the medians of all
  go to work/summary.json."""
  sides = {}
  for side in FLAGS.sides:
    sides[side] = runners[side]()
    record(side, run_key, summarize(sides[side]), sides[side]["runs"], **fields)
  with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
    json.dump({side: summarize(result) for side, result in sides.items()}, f, indent=1)
  return sides


def summary(side: dict, metric: str, rate: str, also_test: tuple[str, ...] = ()) -> dict:
  """The side's medians over seeds: test (also of `also_test`'s metrics) and dev `metric`,
  both per seed too, and the training `rate`; its seconds."""
  runs = side["runs"]
  median = lambda split, key: statistics.median(r[split][key] for r in runs)
  return {f"test_{metric}": median("test", metric),
          **{f"test_{key}": median("test", key) for key in also_test},
          f"dev_{metric}": median("dev", metric),
          f"test_{metric}_per_seed": [r["test"][metric] for r in runs],
          f"dev_{metric}_per_seed": [r["dev"][metric] for r in runs],
          rate: statistics.median(r[rate] for r in runs), "seconds": side["seconds"]}


def print_table(what: str, sides: dict[str, dict], summarize: Callable[[dict], dict],
                names: dict[str, str], metric: str, headers: tuple[str, str, str, str]) -> None:
  """Each side's test median, per-seed test, dev median, training rate and seconds, then ours
  minus the peer's test median in points. `metric`: the key infix in `summarize`'s dict
  (test_METRIC, test_METRIC_per_seed, dev_METRIC); `headers`: the test median, dev and rate
  columns' headers and the rate's key."""
  test, dev, rate, rate_key = headers
  side_width, rate_width = max(len(n) for n in names.values()) + 1, max(len(rate), 8)
  print(f"\n{what}, best dev epoch of {FLAGS.epochs}, seeds 0..{FLAGS.seeds - 1}:")
  print(f"  {'side':<{side_width}} {test:>{len(test)}}  {'per seed':<26} {dev:>7} "
        f"{rate:>{rate_width}} {'seconds':>8}")
  for side, result in sides.items():
    s = summarize(result)
    print(f"  {names[side]:<{side_width}} {s[f'test_{metric}']:>{len(test)}.4f}  "
          f"{', '.join(f'{v:.4f}' for v in s[f'test_{metric}_per_seed']):<26} "
          f"{s[f'dev_{metric}']:>7.4f} {s[rate_key]:>{rate_width}.1f} {s['seconds']:>8.0f}")
  if len(sides) == 2:
    peer = next(side for side in sides if side != "ours")
    ours, theirs = (summarize(sides[side])[f"test_{metric}"] for side in ("ours", peer))
    print(f"  difference {100 * (ours - theirs):+.2f} points (acceptance: >= -1.0)")
