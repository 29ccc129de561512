r"""Training throughput: our train step vs. Hugging Face PyTorch's, same model, batches and
precision; tokens/s and MFU.

    python benchmarks/train_vs_hf.py [--quick] [--presets=small,medium] \
        [--precisions=float32,mixed_bfloat16] [--batch_size=32] [--max_seq_len=128] \
        [--warmup_steps=5] [--rounds=8] [--window=3] [--dropout=0.0] [--data=SHARDS_DIR] \
        [--threads=0] [--json_out=FILE]

Batches: built once by the real pipeline (`pipeline.build_dataset`, our dynamic masking) from
--data, a data_prep.build_shards output (text not in the repo), or by default from synthetic
shards (random ids, V=8000, every sequence a full --max_seq_len; train_throughput.py's), and
dumped as --num_batches arrays that both sides cycle through:
  ours: the pretraining run's own objects, `PretrainingTask` + `build_train_step`
        (RobertaPretrainer, AdamW, TrainStep) on the default strategy, with --precision; its
        input is a tf.data over the dumped arrays (not the shards: the pipeline's own CPU work
        would run beside the step, and HF's side gets ready tensors);
  HF:   transformers' `RobertaForMaskedLM` of the same dims (quality_sides.hf_config: hidden,
        layers, heads, intermediate, the shards' vocab and special ids, positions S+2, exact
        gelu, our layer_norm_eps, one token-type row, tied embeddings) and
        `torch.optim.AdamW(betas=(0.9, 0.98), eps=1e-6)` with weight decay 0.01 on matrices
        (ours' rule), in a bare loop: forward with labels (-100 except the masked positions:
        the same targets as ours), loss.backward(), clip_grad_norm_ when ours clips
        (--clip_norm, TrainConfig's default 0: no), optimizer.step(), zero_grad(set_to_none).
        mixed_bfloat16 is `torch.autocast("cpu", dtype=torch.bfloat16)` around the forward.
        HF's stock head projects every position onto the vocabulary (ours only the masked
        ones): that is HF as its users run it, and part of what is compared.
Dropout is --dropout on both sides (default 0, as the issue's measurement). Both use --threads
intra-op threads (0: os.cpu_count(); TF intra-op and torch.set_num_threads).

Each side runs in its own process (TF's and torch's thread pools in one process would fight
over the cores), driven by this one over pipes: after --warmup_steps untimed steps each (TF's
tracing, first allocations), the windows alternate, --window steps of one side (one host sync
at the end, as the training loop between logs) then of the other, for --rounds rounds, the
first side alternating from round to round; the idle side waits blocked on its pipe. The
machine's load swings, so the ratio is the median of the rounds' paired ratios (ours / HF in
adjacent windows); tokens/s per side are the median windows, and the best windows are printed
too. A worker that dies is reported with the tail of its stderr.
MFU = roberta_tf.pretraining.flops.train_step_flops (the model FLOPs of our step: HF's extra
head work counts for nothing) / step time / peak, the peak of TrainConfig's defaults
(--peak_flops_* override). Printed first: the CPU model (/proc/cpuinfo), TF/keras and
torch/transformers versions and thread counts. --json_out appends one JSON line per (preset,
precision). Exit status 1 when ours is slower than HF (ratio < 1) anywhere.
"""

from __future__ import annotations

import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse  # noqa: E402
import json  # noqa: E402
import select  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

# Module level imports stay TF- and torch-free: each worker imports only its own library.
SIDES = ("ours", "hf")
LABELS = {"ours": "ours", "hf": "HF torch"}


def parse_args(argv=None):
  # argparse, not absl: this script is not a binary of the package and defines no flags.
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--quick", action="store_true",
                 help="small preset, float32, fewer rounds (a smoke run of the comparison).")
  p.add_argument("--presets", default="small,medium", help="Comma list of model presets.")
  p.add_argument("--precisions", default="float32,mixed_bfloat16", help="Comma list.")
  p.add_argument("--batch_size", type=int, default=32, help="Sequences per step (B).")
  p.add_argument("--max_seq_len", type=int, default=128, help="S.")
  p.add_argument("--warmup_steps", type=int, default=5, help="Untimed steps per side.")
  p.add_argument("--rounds", type=int, default=8, help="Timed windows per side.")
  p.add_argument("--window", type=int, default=3, help="Steps per timing window.")
  p.add_argument("--dropout", type=float, default=0.0, help="Dropout of both sides.")
  p.add_argument("--clip_norm", type=float, default=None,
                 help="Gradient-norm clipping of both sides (default: TrainConfig's).")
  p.add_argument("--data", default="",
                 help="A data_prep.build_shards output dir (default: synthetic shards).")
  p.add_argument("--num_batches", type=int, default=16, help="Distinct batches dumped.")
  p.add_argument("--threads", type=int, default=0,
                 help="Intra-op threads of each side (0: os.cpu_count()).")
  p.add_argument("--peak_flops_fp32", type=float, default=None,
                 help="Peak fp32 FLOP/s for MFU (default: TrainConfig's).")
  p.add_argument("--peak_flops_bf16", type=float, default=None,
                 help="Peak bf16 FLOP/s for MFU (default: TrainConfig's).")
  p.add_argument("--json_out", default="", help="Append one JSON line per preset x precision.")
  p.add_argument("--worker_timeout", type=float, default=3600.0,
                 help="Seconds to wait for a worker's answer before giving up.")
  p.add_argument("--worker", choices=SIDES, help=argparse.SUPPRESS)  # internal
  args = p.parse_args(argv)
  if args.quick:
    args.presets, args.precisions, args.rounds, args.window = "small", "float32", 4, 2
    args.warmup_steps = 2
  args.threads = args.threads or os.cpu_count()
  return args


# ---- the workers (one per side, in their own process) -----------------------------------------
def _load_batches(path: str) -> dict:
  with np.load(path) as z:
    return {k: z[k] for k in z.files}


def build_ours_worker(spec: dict):
  """Our TrainStep (as train_throughput.build_ours) over the dumped batches."""
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import PretrainingTask, model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.task import build_train_step  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(spec["threads"])
  cfg = TrainConfig(**spec["train_config"])
  strategy = tf.distribute.get_strategy()
  model_config = model_config_for(cfg, dataset_info.read(cfg.train_data))
  train_step = build_train_step(PretrainingTask(cfg, strategy, model_config), strategy)
  batches = _load_batches(spec["batches"])
  iterator = iter(tf.data.Dataset.from_tensor_slices(batches).repeat().prefetch(2))
  info = {"versions": f"tensorflow {tf.__version__}, keras {keras.__version__}",
          "threads": f"TF intra-op {tf.config.threading.get_intra_op_parallelism_threads()}, "
                     f"inter-op {tf.config.threading.get_inter_op_parallelism_threads()} "
                     "(0: TF's default)"}
  return (lambda: train_step(lambda: next(iterator))[0]["loss"]), info


def hf_labels(batch: dict) -> np.ndarray:
  """[N, B, S] MLM labels: -100 everywhere but the masked positions (weight > 0), which hold
  their original ids: ours' targets in HF's form."""
  labels = np.full(batch["input_ids"].shape, -100, np.int64)
  n, b, p = np.nonzero(batch["mask_weights"] > 0)
  labels[n, b, batch["mask_positions"][n, b, p]] = batch["mask_ids"][n, b, p]
  return labels


def build_hf_worker(spec: dict):
  """RobertaForMaskedLM + torch AdamW, a bare training loop over the dumped batches."""
  import contextlib  # pylint: disable=import-outside-toplevel
  import types  # pylint: disable=import-outside-toplevel

  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel

  from benchmarks.quality_sides import hf_config  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec["threads"])
  torch.manual_seed(0)
  config = hf_config(types.SimpleNamespace(**spec["model_config"]))
  config.hidden_dropout_prob = spec["model_config"]["dropout"]
  config.attention_probs_dropout_prob = spec["model_config"]["attention_dropout"]
  model = transformers.RobertaForMaskedLM(config)
  model.train()
  params = [p for p in model.parameters() if p.requires_grad]  # the tied decoder appears once
  opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.01},
                           {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                          lr=1e-4, betas=(0.9, 0.98), eps=1e-6)
  batches = _load_batches(spec["batches"])
  labels = torch.from_numpy(hf_labels(batches))
  ids = torch.from_numpy(batches["input_ids"].astype(np.int64))
  mask = torch.from_numpy(batches["padding_mask"].astype(np.int64))
  bf16 = spec["precision"] == "mixed_bfloat16"
  clip = spec["clip_norm"]
  index = iter(range(10**12))

  def step():
    i = next(index) % len(ids)
    with (torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()):
      loss = model(input_ids=ids[i], attention_mask=mask[i], labels=labels[i]).loss
    loss.backward()
    if clip > 0:
      torch.nn.utils.clip_grad_norm_(params, clip)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()

  info = {"versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
          "threads": f"torch intra-op {torch.get_num_threads()}, inter-op "
                     f"{torch.get_num_interop_threads()}"}
  return step, info


def worker_main(side: str) -> int:
  """The worker loop: a spec line on stdin, then {"steps": n} requests, each answered with the
  seconds n steps took (one host sync at the end). Answers go to the original stdout; anything
  else printing to stdout lands on stderr."""
  answers = os.fdopen(os.dup(1), "w", buffering=1)
  os.dup2(2, 1)
  spec = json.loads(sys.stdin.readline())
  step, info = (build_ours_worker if side == "ours" else build_hf_worker)(spec)
  answers.write(json.dumps({"ready": True, **info}) + "\n")
  for line in sys.stdin:
    request = json.loads(line)
    if request.get("quit"):
      break
    start = time.perf_counter()
    for _ in range(request["steps"]):
      out = step()
    loss = float(out)  # the host sync
    answers.write(json.dumps({"seconds": time.perf_counter() - start, "loss": loss}) + "\n")
  return 0


# ---- the driver -------------------------------------------------------------------------------
class WorkerError(RuntimeError):
  pass


class Worker:
  """One side's process (this script with --worker), spoken to by JSON lines over pipes."""

  def __init__(self, side: str, spec: dict, work: str, timeout: float):
    self.side, self.timeout, self.last_loss = side, timeout, float("nan")
    self.stderr_path = os.path.join(work, f"{side}.stderr")
    with open(self.stderr_path, "w", encoding="utf-8") as stderr:
      self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
          [sys.executable, os.path.abspath(__file__), f"--worker={side}"], cwd=REPO,
          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, text=True)
    self._send(spec)

  def _send(self, message: dict) -> None:
    try:
      self.proc.stdin.write(json.dumps(message) + "\n")
      self.proc.stdin.flush()
    except BrokenPipeError:
      pass  # the worker is gone; the next answer reports why

  def answer(self) -> dict:
    ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
    line = self.proc.stdout.readline() if ready else ""
    if not line:
      if ready:
        self.proc.wait()
      else:
        self.proc.kill()
      with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
        tail = "".join(f.readlines()[-30:])
      why = (f"exited with status {self.proc.returncode}" if ready
             else f"gave no answer in {self.timeout:.0f}s")
      raise WorkerError(f"the {LABELS[self.side]} worker {why}; its stderr ends:\n{tail}")
    return json.loads(line)

  def run(self, steps: int) -> float:
    self._send({"steps": steps})
    answer = self.answer()
    self.last_loss = answer["loss"]
    return answer["seconds"]

  def close(self) -> None:
    self._send({"quit": True})
    try:
      self.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
      self.proc.kill()
      self.proc.wait()


def dump_batches(args, data: str, path: str) -> None:
  """--num_batches batches of the real pipeline (our masking) as stacked arrays in `path`."""
  from roberta_tf.data import dataset_info, pipeline  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  cfg = TrainConfig(**train_config_fields(args, data, args.presets.split(",")[0], "float32"))
  model_config = model_config_for(cfg, dataset_info.read(data))
  ds = pipeline.build_dataset(data, "train", training=True,
                              per_replica_batch_size=args.batch_size,
                              max_seq_len=args.max_seq_len, masking=cfg.masking_config(),
                              model_config=model_config, seed=0, shuffle_buffer=1000)
  batches = [{k: v.numpy() for k, v in b.items()} for b in ds.take(args.num_batches)]
  if "token_type_ids" in batches[0]:
    sys.exit(f"--data={data}: pair-packing (NSP) shards; this benchmark compares plain MLM")
  np.savez(path, **{k: np.stack([b[k] for b in batches]) for k in batches[0]})


def train_config_fields(args, data: str, preset: str, precision: str) -> dict:
  """TrainConfig's fields for our side (what train_throughput.build_ours sets)."""
  fields = {"model_dir": "", "train_data": data, "config": preset,
            "max_seq_len": args.max_seq_len, "batch_size": args.batch_size,
            "train_steps": 10**6, "warmup_steps": 1, "learning_rate": 1e-4,
            "precision": precision, "shuffle_buffer": 1000, "seed": 0, "dropout": args.dropout}
  if args.clip_norm is not None:
    fields["clip_norm"] = args.clip_norm
  return fields


def time_windows(workers: dict, args) -> dict:
  """{side: [tokens/s of each window]}: warm-up, then alternating windows, the first side
  alternating by round."""
  for worker in workers.values():
    worker.run(args.warmup_steps)
  tokens = args.batch_size * args.max_seq_len * args.window
  rates = {side: [] for side in workers}
  for r in range(args.rounds):
    for side in (SIDES if r % 2 == 0 else SIDES[::-1]):
      rates[side].append(tokens / workers[side].run(args.window))
  return rates


def compare(args, data: str, batches: str, work: str, preset: str, precision: str,
            header: dict) -> dict:
  """One preset x precision: both workers, their windows, the row."""
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining import flops  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  fields = train_config_fields(args, data, preset, precision)
  cfg = TrainConfig(**fields)
  model_config = model_config_for(cfg, dataset_info.read(data))
  common = {"threads": args.threads, "batches": batches, "precision": precision}
  specs = {"ours": {**common, "train_config": fields},
           "hf": {**common, "model_config": model_config.to_dict(),
                  "clip_norm": cfg.clip_norm}}
  workers = {}
  try:
    for side in SIDES:  # built one after the other: no two sides' work at once
      workers[side] = Worker(side, specs[side], work, args.worker_timeout)
      ready = workers[side].answer()
      if side not in header:
        header[side] = ready
        print(f"{LABELS[side]}: {ready['versions']}; threads: {ready['threads']}", flush=True)
    rates = time_windows(workers, args)
  finally:
    for worker in workers.values():
      worker.close()
  step_flops = flops.train_step_flops(
      num_layers=model_config.num_layers, hidden_size=model_config.hidden_size,
      intermediate_size=model_config.intermediate_size, vocab_size=model_config.vocab_size,
      seq_len=args.max_seq_len,
      predictions_per_seq=cfg.masking_config().resolved_max_predictions(args.max_seq_len),
      sequences=args.batch_size)
  peak = args.peak_flops_bf16 if precision == "mixed_bfloat16" else args.peak_flops_fp32
  peak = peak or (cfg.peak_flops_bf16 if precision == "mixed_bfloat16" else cfg.peak_flops_fp32)
  mfu = lambda rate: rate / (args.batch_size * args.max_seq_len) * step_flops / peak
  paired = [a / b for a, b in zip(rates["ours"], rates["hf"], strict=True)]
  row = {"preset": preset, "precision": precision, "batch_size": args.batch_size,
         "max_seq_len": args.max_seq_len, "vocab_size": model_config.vocab_size,
         "dropout": args.dropout, "data": args.data or "synthetic", "peak_flops": peak,
         "ratio": statistics.median(paired), "paired_ratio_range": [min(paired), max(paired)],
         "windows": rates, **{f"{s}_last_loss": workers[s].last_loss for s in SIDES}}
  for side in SIDES:
    median = statistics.median(rates[side])
    row.update({f"{side}_tokens_per_sec": median, f"{side}_best_tokens_per_sec": max(rates[side]),
                f"{side}_mfu": mfu(median)})
  return row


def main(argv=None):
  args = parse_args(argv)
  if args.worker:
    return worker_main(args.worker)
  from benchmarks.train_throughput import cpu_model, write_synthetic_shards  # pylint: disable=import-outside-toplevel
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
    cpu = cpu_model()
    print(f"CPU: {cpu}", flush=True)
    print(f"B={args.batch_size} S={args.max_seq_len} data {args.data or 'synthetic'} "
          f"({args.num_batches} batches, cycled) dropout {args.dropout}; {args.threads} threads "
          f"a side; tokens/s = median of {args.rounds} alternating {args.window}-step windows "
          f"after {args.warmup_steps} warm-up steps; ratio = median of paired window ratios "
          "(ours / HF)", flush=True)
    header = {}
    rows = []
    table = [f"{'preset':8} {'precision':15} {'ours tok/s':>11} {'best':>8} {'MFU':>6} "
             f"{'HF tok/s':>11} {'best':>8} {'MFU':>6} {'ratio':>6}  [paired range]"]
    for preset in args.presets.split(","):
      for precision in args.precisions.split(","):
        try:
          row = compare(args, data, batches, work, preset, precision, header)
        except WorkerError as e:
          print(f"{preset} {precision}: {e}", file=sys.stderr, flush=True)
          return 2
        row.update({"cpu": cpu, **{f"{s}_versions": header[s]["versions"] for s in SIDES},
                    **{f"{s}_threads": header[s]["threads"] for s in SIDES}})
        rows.append(row)
        table.append(
            f"{preset:8} {precision:15} {row['ours_tokens_per_sec']:11,.0f} "
            f"{row['ours_best_tokens_per_sec']:8,.0f} {row['ours_mfu']:6.3f} "
            f"{row['hf_tokens_per_sec']:11,.0f} {row['hf_best_tokens_per_sec']:8,.0f} "
            f"{row['hf_mfu']:6.3f} {row['ratio']:6.2f}x  [{row['paired_ratio_range'][0]:.2f}-"
            f"{row['paired_ratio_range'][1]:.2f}]")
        print(table[-1] if len(table) > 2 else "\n".join(table), flush=True)
        if args.json_out:
          with open(args.json_out, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
    print("\n" + "\n".join(table))
    slower = [(r["preset"], r["precision"]) for r in rows if r["ratio"] < 1.0]
    if slower:
      print(f"SLOWER than HF at: {slower}")
    return 1 if slower else 0
  finally:
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
  sys.exit(main())
