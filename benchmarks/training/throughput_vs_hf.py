r"""Training throughput: our train step vs. Hugging Face PyTorch's, same model, batches and
precision; tokens/s and MFU. Two HF arms: HF's stock head, and HF with a masked-only head.

    python -m benchmarks.training.throughput_vs_hf [--quick] [--presets=small,medium] \
        [--precisions=float32,mixed_bfloat16] [--batch_size=32] [--max_seq_len=128] \
        [--warmup_steps=5] [--rounds=8] [--window=3] [--dropout=0.0] [--data=SHARDS_DIR] \
        [--threads=0] [--json_out=benchmarks/records/train_vs_hf.jsonl]

Batches: built once by the real pipeline (`pipeline.build_dataset`, our dynamic masking) from
--data, a data_prep.build_shards output (text not in the repo), or by default from synthetic
shards (random ids, V=8000, every sequence a full --max_seq_len; throughput.py's), and
dumped as --num_batches arrays that every side cycles through:
  ours:       the pretraining run's own objects, `PretrainingTask` + `build_train_step`
              (RobertaPretrainer, AdamW, TrainStep) on the default strategy, with --precision;
              its input is a tf.data over the dumped arrays (not the shards: the pipeline's own
              CPU work would run beside the step, and HF's side gets ready tensors);
  HF stock:   transformers' `RobertaForMaskedLM` of the same dims (pretraining_sides.hf_config:
              hidden, layers, heads, intermediate, the shards' vocab and special ids, positions
              S+2, exact gelu, our layer_norm_eps, one token-type row, tied embeddings) and
              `torch.optim.AdamW(betas=(0.9, 0.98), eps=1e-6)` with weight decay 0.01 on
              matrices (ours' rule), in a bare loop: forward with labels (-100 except the masked
              positions: the same targets as ours), loss.backward(), clip_grad_norm_ when ours
              clips (--clip_norm, TrainConfig's default 0: no), optimizer.step(),
              zero_grad(set_to_none). mixed_bfloat16 is `torch.autocast("cpu", bfloat16)` around
              the forward. Its head projects every position onto the vocabulary: HF as its users
              run it;
  HF masked:  the same model, optimizer and loop, its loss computed at the masked positions
              only (hf_worker.py: `model.roberta`, the hidden states gathered at the
              masked positions, `model.lm_head` on those rows): the head work ours does.
Dropout is --dropout on every side (default 0). Each uses --threads intra-op threads (0:
os.cpu_count(); TF intra-op and torch.set_num_threads).

Each side runs in its own process (TF's and torch's thread pools in one process would fight
over the cores), driven by this one over pipes: after --warmup_steps untimed steps each (TF's
tracing, first allocations), the windows alternate, --window steps of one side (one host sync
at the end, as the training loop between logs) then of the next, for --rounds rounds, the
order rotating from round to round; the idle sides wait blocked on their pipes. The machine's
load swings, so each ratio is the median of the rounds' paired ratios (ours / that arm in the
same round); tokens/s per side are the median windows, and the best windows are printed too.
A worker that dies is reported with the tail of its stderr.
MFU = roberta_tf.models.flops.train_step_flops (the model FLOPs of our step: HF stock's
extra head work counts for nothing) / step time / peak, the peak measured on this machine in
the precision (training/precision_probe.peak_flops, as a training run's MFU: a 2048^3 matmul in
our worker, with its threads, measured again each run, the best seen on this machine kept;
--peak_flops_* override). Printed first: the CPU (/proc/cpuinfo model name, family/model/
stepping, AVX-512/BF16/AMX flags), TF/keras and torch/transformers versions, threads and the
peaks. --json_out appends one JSON line per
(preset, precision), with the git commit. Exit status 1 when ours is slower than an HF arm
(a ratio < 1) anywhere.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile

import numpy as np
from absl import app, flags

from benchmarks.common import commands
from benchmarks.common.side_workers import Worker, WorkerError, serve
from benchmarks.training import throughput_flags

# Module level imports stay TF- and torch-free: each worker imports only its own library.
SIDES = ("ours", "hf", "hf_masked")
PEERS = SIDES[1:]
LABELS = {"ours": "ours", "hf": "HF stock", "hf_masked": "HF masked-only head"}
HEAD_OF = {"hf": "stock", "hf_masked": "masked"}  # hf_worker.HEADS
RATIO_KEYS = {"hf": "ratio", "hf_masked": "ratio_masked_head"}  # "ratio": as earlier records


# ---- the workers (one per side, in their own process) -----------------------------------------
def build_ours_worker(spec: dict):
  """Our TrainStep (as throughput.build_ours) over the dumped batches; info carries the
  peak MFU divides by (spec's, else measured here: this process's device and threads)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import PretrainingTask, model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.training import precision_probe  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
  peak_lines = []
  peak = spec["peak_flops"]
  if peak:
    peak_lines.append(f"peak for MFU: {spec['precision']} {peak / 1e9:.0f} GFLOP/s (given)")
  else:  # before the model exists: the matmul alone on the cores; again each run (the best kept)
    peak, _ = precision_probe.peak_flops(spec["precision"], peak_lines.append, remeasure=True)
  cfg = TrainConfig.from_dict(spec["train_config"])
  strategy = tf.distribute.get_strategy()
  model_config = model_config_for(cfg, dataset_info.read(cfg.train_data))
  step, info, _ = step_over_batches(PretrainingTask(cfg, strategy, model_config),
                                    spec["batches"])
  return step, {**info, "peak_flops": peak, "peak_line": peak_lines[-1]}


def step_over_batches(task, batches_path: str):
  """(a call of one train step of `task` (the one core's build_train_step) over the dumped
  batches at `batches_path`, cycled, returning its loss; {"versions", "threads"} of this
  worker; the TrainStep)."""
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from benchmarks.training.hf_worker import load_batches  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.task import build_train_step  # pylint: disable=import-outside-toplevel
  train_step = build_train_step(task, task.strategy)
  batches = load_batches(batches_path)
  iterator = iter(tf.data.Dataset.from_tensor_slices(batches).repeat().prefetch(2))
  info = {"versions": f"tensorflow {tf.__version__}, keras {keras.__version__}",
          "threads": f"TF intra-op {tf.config.threading.get_intra_op_parallelism_threads()}, "
                     f"inter-op {tf.config.threading.get_inter_op_parallelism_threads()} "
                     "(0: TF's default)"}
  return (lambda: train_step(lambda: next(iterator))[0]["loss"]), info, train_step


def build_worker(side: str):
  """The step builder of `side` for side_workers.serve."""
  if side == "ours":
    return build_ours_worker
  from benchmarks.training.hf_worker import build_hf_worker  # pylint: disable=import-outside-toplevel
  return lambda spec: build_hf_worker({**spec, "head": HEAD_OF[side]})


# ---- the driver -------------------------------------------------------------------------------
def dump_batches(args, data: str, path: str) -> None:
  """--num_batches batches of the real pipeline (our masking) as stacked arrays in `path`."""
  from roberta_tf.data import dataset_info, pipeline  # pylint: disable=import-outside-toplevel
  from roberta_tf.models import registry  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  cfg = TrainConfig.from_dict(
      train_config_fields(args, data, args.presets.split(",")[0], "float32"))
  model_config = model_config_for(cfg, dataset_info.read(data))
  cfg = cfg.for_family(registry.family_of(model_config))  # --mask_rate 0: the family's rate
  ds = pipeline.build_dataset(data, "train", training=True,
                              per_replica_batch_size=args.batch_size,
                              max_seq_len=args.max_seq_len, masking=cfg.masking_config(),
                              model_config=model_config, seed=0, shuffle_buffer=1000)
  batches = [{k: v.numpy() for k, v in b.items()} for b in ds.take(args.num_batches)]
  if "token_type_ids" in batches[0]:
    sys.exit(f"--data={data}: pair-packing (NSP) shards; this benchmark compares plain MLM")
  np.savez(path, **{k: np.stack([b[k] for b in batches]) for k in batches[0]})


def train_config_fields(args, data: str, preset: str, precision: str) -> dict:
  """TrainConfig's options for our side, by name (what throughput.build_ours sets)."""
  fields = {"model_dir": "", "train_data": data, "config": preset,
            "max_seq_len": args.max_seq_len, "batch_size": args.batch_size,
            "train_steps": 10**6, "warmup_steps": 1, "learning_rate": 1e-4,
            "precision": precision, "shuffle_buffer": 1000, "seed": 0, "dropout": args.dropout}
  if args.clip_norm is not None:
    fields["clip_norm"] = args.clip_norm
  return fields


def time_windows(workers: dict, args) -> dict:
  """{side: [tokens/s of each window]}: warm-up, then a window of each side per round, the
  order rotating by round (each side goes first, middle and last equally often)."""
  for worker in workers.values():
    worker.run(args.warmup_steps)
  tokens = args.batch_size * args.max_seq_len * args.window
  rates = {side: [] for side in SIDES}
  for r in range(args.rounds):
    for side in SIDES[r % len(SIDES):] + SIDES[:r % len(SIDES)]:
      rates[side].append(tokens / workers[side].run(args.window))
  return rates


def start_workers(args, specs: dict, work: str, header: dict) -> dict:
  """{side: Worker}, built one after the other (no two sides' set-up at once), each ready;
  the first time a side answers, its versions, threads (and ours' peak) are printed."""
  workers = {}
  try:
    for side in SIDES:
      workers[side] = Worker(LABELS[side], [sys.executable, "-m",
                                            "benchmarks.training.throughput_vs_hf",
                                            f"--worker={side}"], specs[side],
                             os.path.join(work, f"{side}.stderr"), args.worker_timeout,
                             commands.REPO)
      ready = workers[side].start()
      header.setdefault("peak_lines", {})
      if side == "ours" and specs["ours"]["precision"] not in header["peak_lines"]:
        header["peak_lines"][specs["ours"]["precision"]] = ready["peak_line"]
        print(ready["peak_line"], flush=True)
      if side not in header:
        header[side] = ready
        print(f"{LABELS[side]}: {ready['versions']}; threads: {ready['threads']}", flush=True)
  except BaseException:
    close_all(workers)
    raise
  return workers


def close_all(workers: dict) -> None:
  for worker in workers.values():
    worker.close()


def compare(args, data: str, batches: str, work: str, preset: str, precision: str,
            header: dict) -> dict:
  """One preset x precision: the three workers, their windows, the row."""
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.models import flops, registry  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  fields = train_config_fields(args, data, preset, precision)
  cfg = TrainConfig.from_dict(fields)
  model_config = model_config_for(cfg, dataset_info.read(data))
  cfg = cfg.for_family(registry.family_of(model_config))  # --mask_rate 0: the family's rate
  common = {"threads": args.threads, "batches": batches, "precision": precision}
  given_peak = args.peak_flops_bf16 if precision == "mixed_bfloat16" else args.peak_flops_fp32
  hf_spec = {**common, "model_config": model_config.to_dict(), "clip_norm": cfg.optimizer.clip_norm}
  specs = {"ours": {**common, "train_config": fields, "peak_flops": given_peak},
           "hf": hf_spec, "hf_masked": hf_spec}
  workers = start_workers(args, specs, work, header)
  try:
    rates = time_windows(workers, args)
  finally:
    close_all(workers)
  step_flops = flops.train_step_flops(
      model_config.flop_terms(), seq_len=args.max_seq_len,
      predictions_per_seq=cfg.masking_config().resolved_max_predictions(args.max_seq_len),
      sequences=args.batch_size)
  ready = workers["ours"].ready
  row = {"preset": preset, "precision": precision, "batch_size": args.batch_size,
         "max_seq_len": args.max_seq_len, "vocab_size": model_config.vocab_size,
         "dropout": args.dropout, "data": args.data or "synthetic",
         "peak_flops": ready["peak_flops"], "peak_said": ready["peak_line"],
         "windows": rates, **{f"{s}_last_loss": workers[s].last_loss for s in SIDES}}
  return {**row, **summarize(rates, step_flops / (args.batch_size * args.max_seq_len)
                             / ready["peak_flops"])}


def summarize(rates: dict, mfu_per_token_s: float) -> dict:
  """Per side median / best tokens/s and MFU; per HF arm the median of the paired ratios (ours
  / the arm, window by window) and their range."""
  out = {}
  for side in SIDES:
    median = statistics.median(rates[side])
    out.update({f"{side}_tokens_per_sec": median, f"{side}_best_tokens_per_sec": max(rates[side]),
                f"{side}_mfu": median * mfu_per_token_s})
  for peer in PEERS:
    paired = [a / b for a, b in zip(rates["ours"], rates[peer], strict=True)]
    out[RATIO_KEYS[peer]] = statistics.median(paired)
    out[f"{RATIO_KEYS[peer]}_range"] = [min(paired), max(paired)]
  out["paired_ratio_range"] = out.pop("ratio_range")  # the key earlier records use
  return out


TABLE_HEADER = (f"{'preset':8} {'precision':15} {'ours tok/s':>10} {'MFU':>5} "
                f"{'HF stock':>9} {'MFU':>5} {'HF masked':>9} {'MFU':>5} "
                f"{'ours/stock':>10} [range]   {'ours/masked':>11} [range]")


def table_line(row: dict) -> str:
  stock, masked = row["paired_ratio_range"], row["ratio_masked_head_range"]
  return (f"{row['preset']:8} {row['precision']:15} {row['ours_tokens_per_sec']:10,.0f} "
          f"{row['ours_mfu']:5.3f} {row['hf_tokens_per_sec']:9,.0f} {row['hf_mfu']:5.3f} "
          f"{row['hf_masked_tokens_per_sec']:9,.0f} {row['hf_masked_mfu']:5.3f} "
          f"{row['ratio']:9.2f}x [{stock[0]:.2f}-{stock[1]:.2f}] "
          f"{row['ratio_masked_head']:10.2f}x [{masked[0]:.2f}-{masked[1]:.2f}]")


def run_all(args, data: str, batches: str, work: str, extra: dict) -> list[dict] | None:
  """Every preset x precision: its row printed (and appended to --json_out) as it finishes;
  None when a worker died (said on stderr)."""
  header, rows = {}, []
  for preset in args.presets.split(","):
    for precision in args.precisions.split(","):
      try:
        row = compare(args, data, batches, work, preset, precision, header)
      except WorkerError as e:
        print(f"{preset} {precision}: {e}", file=sys.stderr, flush=True)
        return None
      row.update({**extra, **{f"{s}_versions": header[s]["versions"] for s in SIDES},
                  **{f"{s}_threads": header[s]["threads"] for s in SIDES}})
      rows.append(row)
      print(TABLE_HEADER + "\n" + table_line(row) if len(rows) == 1 else table_line(row),
            flush=True)
      if args.json_out:
        with open(args.json_out, "a", encoding="utf-8") as f:
          f.write(json.dumps(row) + "\n")
  return rows


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the workers' TF (they inherit it)
  args = throughput_flags.args(presets="small", precisions="float32", rounds=4, window=2,
                               warmup_steps=2)
  args.threads = args.threads or os.cpu_count()
  if args.worker:
    return serve(build_worker(args.worker))
  from benchmarks.common.starting_checkpoint import git_head  # pylint: disable=import-outside-toplevel
  from benchmarks.training.throughput import cpu_model, write_synthetic_shards  # pylint: disable=import-outside-toplevel
  work = tempfile.mkdtemp(prefix="train_vs_hf_")
  try:
    data = args.data
    if not data:
      data = os.path.join(work, "shards")
      os.makedirs(data)
      write_synthetic_shards(data, num_sequences=max(1024, 2 * args.num_batches *
                                                     args.batch_size), seq_len=args.max_seq_len)
    batches = os.path.join(work, "batches.npz")
    dump_batches(args, data, batches)
    extra = {"cpu": cpu_model(), "commit": git_head()}
    print(f"CPU: {extra['cpu']}; commit {extra['commit']}", flush=True)
    print(f"B={args.batch_size} S={args.max_seq_len} data {args.data or 'synthetic'} "
          f"({args.num_batches} batches, cycled) dropout {args.dropout}; {args.threads} threads "
          f"a side; tokens/s = median of {args.rounds} rotating {args.window}-step windows "
          f"after {args.warmup_steps} warm-up steps; ratios = medians of paired window ratios "
          "(ours / the HF arm in the same round)", flush=True)
    rows = run_all(args, data, batches, work, extra)
    if rows is None:
      return 2
    print("\n" + TABLE_HEADER + "\n" + "\n".join(table_line(r) for r in rows))
    return throughput_flags.verdict([(r["preset"], r["precision"], LABELS[p]) for r in rows
                                     for p in PEERS if r[RATIO_KEYS[p]] < 1.0], "HF")
  finally:
    shutil.rmtree(work, ignore_errors=True)


def define_flags() -> None:
  """This script's flags (defined when it runs: step_profile imports it)."""
  throughput_flags.define_flags(
      warmup_steps=5, window=3, dropout=0.0, dropout_help="Dropout of every side.",
      quick_help="small preset, float32, fewer rounds (a smoke run of the comparison).")
  flags.DEFINE_float("clip_norm", None, "Gradient-norm clipping of every side (default: "
                     "TrainConfig's).")
  flags.DEFINE_string("data", "", "A data_prep.build_shards output dir (default: synthetic "
                      "shards).")
  flags.DEFINE_integer("num_batches", 16, "Distinct batches dumped.")
  flags.DEFINE_integer("threads", 0, "Intra-op threads of each side (0: os.cpu_count()).")
  flags.DEFINE_string("json_out", "", "Append one JSON line per preset x precision.")
  flags.DEFINE_float("worker_timeout", 3600.0, "Seconds to wait for a worker's answer before "
                     "giving up.")
  flags.DEFINE_enum("worker", None, SIDES, "Internal: serve one side's steps on stdin/stdout.")


if __name__ == "__main__":
  define_flags()
  app.run(main)
