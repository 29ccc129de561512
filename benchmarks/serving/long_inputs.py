r"""Benchmark: ModernBERT forward and training step against input length, ours vs transformers
(issue 61).

    python -m benchmarks.serving.long_inputs [--sides=ours_blocked,hf_sdpa,hf_eager] \
        [--lengths=512,1024,2048,4096,8192] [--precisions=float32,bfloat16] \
        [--train_sides=ours_blocked,hf_sdpa] [--train_lengths=1024,8192] [--rounds=1] \
        [--repeats=1] [--threads=2] [--global_chunk=0] [--plot=docs/long_inputs.png]
    python -m benchmarks.serving.long_inputs --report_only   # tables + plot from the records

Every point runs in a fresh, niced process (long_input_side.py: its peak RSS is the point's
memory). Forward: base size, batch 1, random ids, each --precisions (bfloat16: ours in the
export's bfloat16 policy, transformers under torch.autocast). Train (--train_lengths, float32,
--train_preset): one update of modernbert_vs_hf's worker per side after a warm-up update (ours:
the pretraining run's step; transformers: ModernBertForMaskedLM sdpa, sparse_prediction, AdamW)
over batches of the real pipeline (30% masked), batch 1. Points are taken in paired rotating
rounds: at each (precision, length) every side runs back to back, in an order rotating by round
and length, so the sides of a pair meet the same neighbours on a shared machine.

A point's figures: CPU seconds per forward / update (all threads; wall seconds recorded too),
the process's peak RSS during it (VmHWM reset after a warm-up), the load average before it. Each
finished point is appended to --record at once (kind, run, round, load_average, cpu). At the
end (and with --report_only, from the records alone): the tables (long_inputs_report.py), the
issue's targets at 8,192 tokens, and the plot of seconds per token and peak memory against
length (long_inputs_report.plot).
"""

import datetime
import json
import os
import subprocess
import sys
import tempfile
import types

from absl import app, flags

from benchmarks.common import commands, window_records
from benchmarks.common.starting_checkpoint import git_head
from benchmarks.serving import long_inputs_report
from benchmarks.serving.long_input_side import SIDES
from benchmarks.training.throughput import cpu_model

RECORDS = os.path.join(commands.REPO, "benchmarks", "records", "long_inputs.jsonl")
PLOT = os.path.join(commands.REPO, "docs", "long_inputs.png")

FLAGS = flags.FLAGS
flags.DEFINE_list("sides", ["ours_blocked", "hf_sdpa", "hf_eager"],
                  f"Forward sides, of {', '.join(SIDES)}.")
flags.DEFINE_list("lengths", ["512", "1024", "2048", "4096", "8192"], "Forward lengths.")
flags.DEFINE_list("precisions", ["float32", "bfloat16"], "Forward precisions.")
flags.DEFINE_list("train_sides", ["ours_blocked", "hf_sdpa"], "Training-step sides.")
flags.DEFINE_list("train_lengths", ["1024", "8192"], "Training-step lengths ('' none).")
flags.DEFINE_string("train_preset", "small", "ModernBERT preset of the training step.")
flags.DEFINE_integer("rounds", 1, "Rounds (each point once per round).")
flags.DEFINE_integer("repeats", 1, "Timed calls per point (the best counts).")
flags.DEFINE_integer("threads", 2, "Intra-op threads of every side.")
flags.DEFINE_integer("global_chunk", 0, "Our global layers' query chunk (0: the shipped one).")
flags.DEFINE_string("record", RECORDS, "JSON-lines file the points are appended to ('' none).")
flags.DEFINE_string("plot", PLOT, "PNG the plot is written to ('' none).")
flags.DEFINE_bool("report_only", False, "Only the tables and plot, from --record.")


def _point(spec: dict) -> dict:
  argv = ([] if os.nice(0) else ["nice"]) + [  # niced once (not again under a niced driver)
      sys.executable, "-m", "benchmarks.serving.long_input_side", json.dumps(spec)]
  done = subprocess.run(argv, cwd=commands.REPO, capture_output=True, text=True, check=False)
  lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
  if done.returncode or not lines:
    kept = {k: v for k, v in spec.items() if k not in ("worker_spec", "batches")}
    return {**kept, "error": done.stderr.strip().splitlines()[-1:]}
  return json.loads(lines[-1])


def _train_specs(length: int, work: str) -> dict:
  """{side: worker_spec} for a training step at `length` over freshly dumped batches."""
  from benchmarks.training import modernbert_vs_hf  # pylint: disable=import-outside-toplevel
  from benchmarks.training.throughput import write_synthetic_shards  # pylint: disable=import-outside-toplevel
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert.modernbert_hf_config import config_to_hf  # pylint: disable=import-outside-toplevel
  args = types.SimpleNamespace(max_seq_len=length, batch_size=1, mask_prob=0.3, num_batches=2,
                               vocab_size=50368, preset=FLAGS.train_preset)
  data, batches = os.path.join(work, f"shards{length}"), os.path.join(work, f"b{length}.npz")
  os.makedirs(data)
  write_synthetic_shards(data, num_sequences=8, seq_len=length)
  modernbert_vs_hf.dump_batches(args, data, batches)
  config = modernbert_vs_hf.model_config(args, "alternating",
                                         dataset_info.read(data)["special_ids"])
  common = {"threads": FLAGS.threads, "batches": batches, "precision": "float32"}
  ours = {**common, "model_config": config,
          "train_config": modernbert_vs_hf.train_config_fields(args, data, "float32")}
  hf = {**common, "hf_config": config_to_hf(ModernBertConfig.from_dict(config)),
        "clip_norm": 0.0}
  return {side: ours if side.startswith("ours") else hf for side in SIDES}


def _plan(work: str) -> list[dict]:
  """Every point's spec, in run order: per round, per (precision, length), the sides rotated."""
  def rotated(sides, shift):
    shift = shift % max(len(sides), 1)
    return sides[shift:] + sides[:shift]
  train = {int(n): _train_specs(int(n), work) for n in FLAGS.train_lengths if n}
  plan = []
  for r in range(FLAGS.rounds):
    for i, (precision, length) in enumerate(
        (p, int(n)) for p in FLAGS.precisions for n in FLAGS.lengths):
      plan += [{"side": s, "kind": "forward", "length": length, "precision": precision,
                "round": r} for s in rotated(FLAGS.sides, r + i)]
    for i, (length, specs) in enumerate(train.items()):
      plan += [{"side": s, "kind": "train", "length": length, "precision": "float32",
                "round": r, "preset": FLAGS.train_preset, "worker_spec": specs[s]}
               for s in rotated(FLAGS.train_sides, r + i)]
  return plan


def main(argv):
  del argv
  unknown = set(FLAGS.sides + FLAGS.train_sides) - set(SIDES)
  if unknown:
    sys.exit(f"error: --sides / --train_sides: {sorted(unknown)} not among {SIDES}")
  if not FLAGS.report_only:
    run = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    print(f"CPU: {cpu_model()}; load average at start {window_records.load_average()}",
          flush=True)
    with tempfile.TemporaryDirectory(prefix="long_inputs_") as work:
      for spec in _plan(work):
        load = window_records.load_average()
        point = _point({**spec, "repeats": FLAGS.repeats, "threads": FLAGS.threads,
                        "global_chunk": FLAGS.global_chunk})
        point.update(run=run, cpu=cpu_model(), git=git_head(), load_average=load,
                     finished=datetime.datetime.now(datetime.UTC).isoformat(
                         timespec="seconds"))
        print(json.dumps(point), flush=True)
        window_records.append(FLAGS.record, point)
    print(f"load average at end {window_records.load_average()}")
  records = long_inputs_report.read(FLAGS.record)
  print(long_inputs_report.tables(records))
  if FLAGS.plot:
    long_inputs_report.plot(records, FLAGS.plot)
    print(f"plot: {FLAGS.plot}")


if __name__ == "__main__":
  app.run(main)
