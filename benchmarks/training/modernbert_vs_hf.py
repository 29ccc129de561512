r"""ModernBERT pretraining speed: our train step vs transformers' ModernBertForMaskedLM (torch,
sdpa), same dims, batches, optimizer and precision; tokens/s in one run on this CPU.

    python -m benchmarks.training.modernbert_vs_hf [--preset=small] [--batch_size=2] \
        [--max_seq_len=1024] [--precisions=float32,mixed_bfloat16] \
        [--attention=alternating,global_only] [--rounds=5] [--window=1] [--warmup_steps=1] \
        [--threads=0] [--json_out=benchmarks/records/modernbert_vs_hf.jsonl] \
        [--serving] [--serving_batch=32] [--serving_rounds=5]

Batches: --num_batches batches of the real pipeline (`pipeline.build_dataset`, our dynamic
masking at --mask_rate, default 0.3 as ModernBERT's recipe) over throughput.py's synthetic shards
(random ids, every sequence a full --max_seq_len), dumped once; every side cycles through them.
The model is the ModernBERT preset with --vocab_size (default ModernBERT's 50368: the head's
cost is that of the real vocabulary; the ids only span the shards' 8,000) and the shards' special
ids. --attention: "alternating" is the preset's (a global layer every third, the others local
with a 128-token window); "global_only" makes every layer global on every side, which shows what
the local layers cost each implementation.
  ours:       the pretraining run's step (`PretrainingTask`'s optimizer, objective and step
              config, `build_train_step`) on the ModernBERT config (the registry builds the
              ModernBertPretrainer);
  HF stock:   `ModernBertForMaskedLM(..., attn_implementation="sdpa")` with labels (-100 but at
              the masked positions) and torch AdamW(betas=(0.9, 0.98), eps=1e-6, weight decay
              0.01 on matrices, lr 1e-4), a bare loop (modernbert_hf_worker.py);
  HF sparse:  the same with HF's `sparse_prediction=True` (the head at the labelled positions
              only, as ours).
Each side runs in its own process (side_workers.py); after --warmup_steps untimed steps each,
--window steps of one side then of the next, the order rotating from round to round, for
--rounds rounds. tokens/s = median of a side's windows; ratio = median of the rounds' paired
ratios (ours / that arm). Printed first: the CPU (/proc/cpuinfo: model, AVX-512/BF16/AMX flags)
and the load average. --json_out gets one JSON line per finished window (round x side) as it
finishes, then one summary line per (precision, attention); "run" (its start, UTC) groups a
run's lines.
--serving adds the serving half (serving/modernbert_fill_mask.py): forward texts/s at
--serving_batch and batch-1 latency, ours vs HF's fill-mask pipeline. Exit status 1 when ours
is slower than an HF arm anywhere.
"""

from __future__ import annotations

import os
import shutil
import statistics
import sys
import tempfile
import time

from absl import app, flags

from benchmarks.common import commands, window_records
from benchmarks.common.side_workers import Worker, WorkerError, serve

# Module level stays TF- and torch-free: each worker imports only its own library.
SIDES = ("ours", "hf", "hf_sparse")
PEERS = SIDES[1:]
LABELS = {"ours": "ours", "hf": "HF stock", "hf_sparse": "HF sparse_prediction"}
HEAD_OF = {"hf": "stock", "hf_sparse": "sparse"}  # modernbert_hf_worker.HEADS
ATTENTIONS = ("alternating", "global_only")
FLAGS = flags.FLAGS


def model_config(args, attention: str, special_ids: dict) -> dict:
  """The ModernBertConfig dict both sides build (the preset, --vocab_size, the shards' ids)."""
  from roberta_tf.models.modernbert import modernbert_config  # pylint: disable=import-outside-toplevel
  overrides = {"vocab_size": args.vocab_size, "max_seq_len": max(args.max_seq_len, 8192),
               "pad_id": special_ids["pad"], "bos_id": special_ids["bos"],
               "eos_id": special_ids["eos"]}
  if attention == "global_only":
    overrides["global_attn_every_n_layers"] = 1
  return modernbert_config.preset(args.preset, **overrides).to_dict()


# ---- the workers (one per side, in their own process) -----------------------------------------
def build_ours_worker(spec: dict):
  """Our TrainStep (PretrainingTask on the ModernBERT config: its optimizer, step config,
  objective, and the registry's model) over the dumped batches."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from benchmarks.training.throughput_vs_hf import step_over_batches  # pylint: disable=import-outside-toplevel
  from roberta_tf.models import registry  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import PretrainingTask  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
  task = PretrainingTask(TrainConfig.from_dict(spec["train_config"]), tf.distribute.get_strategy(),
                         registry.config_from_dict(spec["model_config"]))
  step, info, train_step = step_over_batches(task, spec["batches"])
  return step, {**info, "model": type(train_step.model).__name__}


def build_worker(side: str):
  """The step builder of `side` for side_workers.serve."""
  if side == "ours":
    return build_ours_worker
  from benchmarks.training.modernbert_hf_worker import build_modernbert_hf_worker  # pylint: disable=import-outside-toplevel
  return lambda spec: build_modernbert_hf_worker({**spec, "head": HEAD_OF[side]})


# ---- the driver -------------------------------------------------------------------------------
def train_config_fields(args, data: str, precision: str) -> dict:
  """TrainConfig's options for our side (its model section is unused: the task gets the
  ModernBERT config itself)."""
  return {"model_dir": "", "train_data": data, "config": "tiny", "max_seq_len": args.max_seq_len,
          "batch_size": args.batch_size, "train_steps": 10**6, "warmup_steps": 1,
          "learning_rate": 1e-4, "precision": precision, "shuffle_buffer": 1000, "seed": 0,
          "dropout": 0.0, "mask_rate": args.mask_rate}


def dump_batches(args, data: str, path: str) -> None:
  """--num_batches batches of the real pipeline (our masking at --mask_rate) in `path`."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from roberta_tf.data import dataset_info, pipeline  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  cfg = TrainConfig.from_dict(train_config_fields(args, data, "float32"))
  ds = pipeline.build_dataset(data, "train", training=True,
                              per_replica_batch_size=args.batch_size,
                              max_seq_len=args.max_seq_len, masking=cfg.masking_config(),
                              model_config=model_config_for(cfg, dataset_info.read(data)),
                              seed=0, shuffle_buffer=1000)
  batches = [{k: v.numpy() for k, v in b.items()} for b in ds.take(args.num_batches)]
  np.savez(path, **{k: np.stack([b[k] for b in batches]) for k in batches[0]})


def start_workers(args, specs: dict, work: str, header: dict) -> dict:
  """{side: Worker}, built one after the other, each ready; versions printed once a side."""
  workers = {}
  try:
    for side in SIDES:
      workers[side] = Worker(LABELS[side], [sys.executable, "-m",
                                            "benchmarks.training.modernbert_vs_hf",
                                            f"--worker={side}"], specs[side],
                             os.path.join(work, f"{side}.stderr"), args.worker_timeout,
                             commands.REPO)
      ready = workers[side].start()
      if side not in header:
        header[side] = ready
        print(f"{LABELS[side]}: {ready['versions']}; threads: {ready['threads']}", flush=True)
  except BaseException:
    for worker in workers.values():
      worker.close()
    raise
  return workers


def time_windows(workers: dict, args, record) -> dict:
  """{side: [tokens/s of each window]}: warm-up, then a window of each side per round, the
  order rotating by round; `record(round, side, seconds, tokens/s, loss)` after each window."""
  for worker in workers.values():
    worker.run(args.warmup_steps)
  tokens = args.batch_size * args.max_seq_len * args.window
  rates = {side: [] for side in SIDES}
  for r in range(args.rounds):
    for side in SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]:
      seconds = workers[side].run(args.window)
      rates[side].append(tokens / seconds)
      record(r, side, seconds, rates[side][-1], workers[side].last_loss)
  return rates


def summarize(rates: dict) -> dict:
  """Per side median / best tokens/s; per HF arm the median of the paired ratios and range."""
  out = {}
  for side in SIDES:
    out[f"{side}_tokens_per_sec"] = statistics.median(rates[side])
    out[f"{side}_best_tokens_per_sec"] = max(rates[side])
  for peer in PEERS:
    paired = [a / b for a, b in zip(rates["ours"], rates[peer], strict=True)]
    out[f"ratio_vs_{peer}"] = statistics.median(paired)
    out[f"ratio_vs_{peer}_range"] = [min(paired), max(paired)]
  return out


def compare(args, data: str, batches: str, work: str, precision: str, attention: str,
            header: dict, extra: dict) -> dict:
  """One precision x attention pattern: the three workers, their windows, the summary row."""
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert.modernbert_config import ModernBertConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert.modernbert_hf_config import config_to_hf  # pylint: disable=import-outside-toplevel
  config = model_config(args, attention, dataset_info.read(data)["special_ids"])
  common = {"threads": args.threads, "batches": batches, "precision": precision}
  hf_spec = {**common, "hf_config": config_to_hf(ModernBertConfig.from_dict(config)),
             "clip_norm": 0.0}
  specs = {"ours": {**common, "model_config": config,
                    "train_config": train_config_fields(args, data, precision)},
           "hf": hf_spec, "hf_sparse": hf_spec}
  # "mask_prob": the records' key for the mask rate since their first run (train's --mask_prob).
  key = {"preset": args.preset, "precision": precision, "attention": attention,
         "batch_size": args.batch_size, "max_seq_len": args.max_seq_len,
         "vocab_size": args.vocab_size, "mask_prob": args.mask_rate, "window": args.window,
         "threads": args.threads}

  def record(r, side, seconds, rate, loss):
    window_records.append(args.json_out, {
        "kind": "window", **key, "round": r, "side": side, "seconds": seconds,
        "tokens_per_sec": rate, "loss": loss, "load_average": window_records.load_average(),
        **extra})
  workers = start_workers(args, specs, work, header)
  try:
    rates = time_windows(workers, args, record)
  finally:
    for worker in workers.values():
      worker.close()
  row = {"kind": "summary", **key, "windows": rates, **summarize(rates),
         "load_average": window_records.load_average(), **extra,
         **{f"{s}_versions": header[s]["versions"] for s in SIDES}}
  window_records.append(args.json_out, row)
  return row


TABLE_HEADER = (f"{'precision':15} {'attention':12} {'ours tok/s':>10} {'HF stock':>9} "
                f"{'HF sparse':>9} {'ours/stock':>10} [range]   {'ours/sparse':>11} [range]")


def table_line(row: dict) -> str:
  stock, sparse = row["ratio_vs_hf_range"], row["ratio_vs_hf_sparse_range"]
  return (f"{row['precision']:15} {row['attention']:12} {row['ours_tokens_per_sec']:10,.0f} "
          f"{row['hf_tokens_per_sec']:9,.0f} {row['hf_sparse_tokens_per_sec']:9,.0f} "
          f"{row['ratio_vs_hf']:9.2f}x [{stock[0]:.2f}-{stock[1]:.2f}] "
          f"{row['ratio_vs_hf_sparse']:10.2f}x [{sparse[0]:.2f}-{sparse[1]:.2f}]")


def run_training(args, work: str, extra: dict) -> list[dict] | None:
  """Every precision x attention pattern's row, printed as it finishes; None if a worker died."""
  from benchmarks.training.throughput import write_synthetic_shards  # pylint: disable=import-outside-toplevel
  data = os.path.join(work, "shards")
  os.makedirs(data)
  write_synthetic_shards(data, num_sequences=max(64, 2 * args.num_batches * args.batch_size),
                         seq_len=args.max_seq_len)
  batches = os.path.join(work, "batches.npz")
  dump_batches(args, data, batches)
  header, rows = {}, []
  for precision in args.precisions.split(","):
    for attention in args.attention.split(","):
      try:
        row = compare(args, data, batches, work, precision, attention, header, extra)
      except WorkerError as e:
        print(f"{precision} {attention}: {e}", file=sys.stderr, flush=True)
        return None
      rows.append(row)
      print(TABLE_HEADER + "\n" + table_line(row) if len(rows) == 1 else table_line(row),
            flush=True)
  return rows


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the workers' TF (they inherit it)
  args = commands.flag_args(FLAGS)
  args.threads = args.threads or os.cpu_count()
  if args.worker:
    return serve(build_worker(args.worker))
  for name, value in (("precisions", args.precisions), ("attention", args.attention)):
    allowed = ("float32", "mixed_bfloat16") if name == "precisions" else ATTENTIONS
    if not value or set(value.split(",")) - set(allowed):
      sys.exit(f"error: --{name}={value}: a comma list of {', '.join(allowed)}")
  from benchmarks.common.starting_checkpoint import git_head  # pylint: disable=import-outside-toplevel
  from benchmarks.training.throughput import cpu_model  # pylint: disable=import-outside-toplevel
  extra = {"run": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cpu": cpu_model(),
           "commit": git_head()}
  isa = extra["cpu"].rsplit(",", 1)[-1].split()
  print(f"CPU: {extra['cpu']} (avx512_bf16: {'avx512_bf16' in isa}, AMX: {'amx_bf16' in isa}); "
        f"commit {extra['commit']}; load average at start "
        f"{window_records.load_average()}", flush=True)
  print(f"ModernBERT {args.preset}, B={args.batch_size} S={args.max_seq_len} V={args.vocab_size} "
        f"mask rate {args.mask_rate}, {args.num_batches} batches cycled; {args.threads} threads a "
        f"side; tokens/s = median of {args.rounds} rotating {args.window}-step windows after "
        f"{args.warmup_steps} warm-up steps; ratios = medians of paired window ratios", flush=True)
  work = tempfile.mkdtemp(prefix="modernbert_vs_hf_")
  slower = []
  try:
    if args.rounds > 0:
      rows = run_training(args, work, extra)
      if rows is None:
        return 2
      print("\ntraining tokens/s\n" + TABLE_HEADER + "\n" +
            "\n".join(table_line(r) for r in rows), flush=True)
      slower += [(r["precision"], r["attention"], LABELS[p]) for r in rows for p in PEERS
                 if r[f"ratio_vs_{p}"] < 1.0]
    if args.serving:
      from benchmarks.serving import modernbert_fill_mask  # pylint: disable=import-outside-toplevel
      slower += modernbert_fill_mask.run(args, work, extra)
    print(f"load average at end {window_records.load_average()}")
  finally:
    shutil.rmtree(work, ignore_errors=True)
  if slower:
    print(f"SLOWER than HF at: {slower}")
  return 1 if slower else 0


def define_flags() -> None:
  flags.DEFINE_string("preset", "small", "ModernBERT preset (modernbert_config.PRESET_NAMES).")
  flags.DEFINE_integer("vocab_size", 50368, "The model's vocabulary (ModernBERT's by default).")
  flags.DEFINE_integer("batch_size", 2, "Sequences per step (B).")
  flags.DEFINE_integer("max_seq_len", 1024, "S: every sequence is this long.")
  flags.DEFINE_float("mask_rate", 0.3, "Share of tokens predicted (ModernBERT's 30%).")
  flags.DEFINE_string("precisions", "float32,mixed_bfloat16", "Comma list.")
  flags.DEFINE_string("attention", "alternating,global_only", "Comma list of layer patterns: "
                      "alternating (the preset's local/global), global_only (every layer global).")
  flags.DEFINE_integer("warmup_steps", 1, "Untimed steps per side (tracing, first allocations).")
  flags.DEFINE_integer("rounds", 5, "Timed windows per side (0: the serving half only).")
  flags.DEFINE_integer("window", 1, "Steps per timing window.")
  flags.DEFINE_integer("num_batches", 4, "Distinct batches dumped.")
  flags.DEFINE_integer("threads", 0, "Intra-op threads of each side (0: os.cpu_count()).")
  flags.DEFINE_string("json_out", "benchmarks/records/modernbert_vs_hf.jsonl",
                      "Append one JSON line per window and per summary ('' : none).")
  flags.DEFINE_float("worker_timeout", 1800.0, "Seconds to wait for a worker's answer.")
  flags.DEFINE_bool("serving", False, "Also the serving half (serving/modernbert_fill_mask.py).")
  flags.DEFINE_integer("serving_batch", 32, "Texts per batch of the serving half's texts/s.")
  flags.DEFINE_integer("serving_rounds", 5, "Rounds of the serving half (a batch and 8 single "
                       "texts per side each).")
  flags.DEFINE_enum("worker", None, SIDES, "Internal: serve one side's steps on stdin/stdout.")


if __name__ == "__main__":
  define_flags()
  app.run(main)
