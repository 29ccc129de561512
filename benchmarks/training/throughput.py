r"""Training throughput: our TrainStep vs. keras-hub `RobertaMaskedLM.fit` (or vs. our own step
under --jit_compile), tokens/s and MFU.

    python -m benchmarks.training.throughput [--quick] [--presets=small,medium] \
        [--precisions=float32,mixed_bfloat16] [--batch_size=32] [--max_seq_len=128] \
        [--warmup_steps=3] [--rounds=4] [--window=3] [--dropout=0.0] [--jit_compile]

For each preset and precision, on the same synthetic shards (random ids, V=8000, every sequence
a full --max_seq_len, with a dataset_info.json like data_prep's) read by the real pipeline:
  ours:      the pretraining run's own objects: `PretrainingTask` with
             `build_train_step` (RobertaPretrainer, AdamW, TrainStep) and
             `inputs.build_datasets` on the default strategy; a window is --window calls of
             a `TrainStep` call with one host sync at its end, as the loop does between logs;
  keras-hub: `keras_hub.models.RobertaMaskedLM` on a `RobertaBackbone` of the same dims, compiled
             with the same AdamW (weight decay 0.01 off LayerNorm/biases, beta2 0.98, eps 1e-6),
             masked cross-entropy with sample weights and weighted accuracy (our step computes
             accuracy too); a window is --window calls of the `train_function` that `fit` runs
             per step, on the same pipeline's batches as (token_ids, padding_mask,
             mask_positions) -> mask_ids, sample weights mask_weights.
With --jit_compile the peer is our own step again, built the same way with
`TrainConfig.jit_compile=True` (train --jit_compile: each replica's forward + backward pass
XLA-compiled); the ratio is then jit / default (above 1: XLA is faster).
Both use the preset's dropout (0.1; --dropout overrides it for both) and run --warmup_steps
untimed steps first (tracing, and XLA's compile). Then the windows alternate, ours / the peer,
for --rounds rounds. The machine is shared and its load swings
(windows of one side differ up to 2x), so the ratio is the median of the rounds' paired ratios
(ours / keras-hub in adjacent windows, which see about the same load); tokens/s per side are
the median windows, and the best windows are printed too. The CPU model (/proc/cpuinfo) is
printed first.
MFU = roberta_tf.models.flops.train_step_flops / step time / peak, the peak measured on
this machine in the precision (training/precision_probe.peak_flops, as a training run's MFU: a
2048^3 matmul, cached per machine; --peak_flops_* override), printed with whether it was cached.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import tensorflow as tf
from absl import app, flags

from benchmarks.common import commands
from benchmarks.training import throughput_flags
from roberta_tf import models
from roberta_tf.data import dataset_info, pipeline
from roberta_tf.models import flops, registry
from roberta_tf.pretraining import inputs
from roberta_tf.pretraining.task import PretrainingTask, model_config_for
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.tokenization import vocab_files
from roberta_tf.training import precision_probe
from roberta_tf.training.task import build_train_step

HF_TINY = commands.FIXTURE_VOCAB
VOCAB_SIZE = 8000
SPECIAL_IDS = {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 4}  # the fixture vocab's



def write_synthetic_shards(out: str, num_sequences: int, seq_len: int, seed: int = 0) -> str:
  """Full-length random sequences (<s> ids </s>) as 2 train shards + dataset_info.json."""
  rng = np.random.default_rng(seed)
  shards = []
  for index in range(2):
    name = f"train-{index:05d}-of-00002.tfrecord"
    with tf.io.TFRecordWriter(os.path.join(out, name)) as writer:
      for _ in range(num_sequences // 2):
        ids = np.concatenate([[SPECIAL_IDS["bos"]], rng.integers(5, VOCAB_SIZE, seq_len - 2),
                              [SPECIAL_IDS["eos"]]])
        feature = tf.train.Feature(int64_list=tf.train.Int64List(value=ids.tolist()))
        writer.write(tf.train.Example(features=tf.train.Features(
            feature={"input_ids": feature})).SerializeToString())
    shards.append({"file": name, "num_sequences": num_sequences // 2,
                   "num_tokens": num_sequences // 2 * seq_len})
  total = sum(s["num_sequences"] for s in shards)
  dataset_info.write(out, {
      "format_version": 1,
      "vocab": {"sha256": vocab_files.file_sha256(os.path.join(HF_TINY, "vocab.json")),
                "merges_sha256": vocab_files.file_sha256(os.path.join(HF_TINY, "merges.txt")),
                "size": VOCAB_SIZE},
      "special_ids": SPECIAL_IDS, "max_seq_len": seq_len, "packing": "full_sentences",
      "compression": "none",
      # Independent random sequences: every shard is a uniform sample in random order, which
      # this field says (without it the pipeline notes that the shards are in corpus order).
      "shuffle": {"scheme": dataset_info.GLOBAL_SHUFFLE, "seed": seed},
      "splits": {"train": {"num_sequences": total, "num_tokens": total * seq_len,
                           "packing_efficiency": 1.0, "shards": shards}},
      "source": {"synthetic": True, "vocab_dir": HF_TINY}})
  return out


def cpu_model() -> str:
  """The CPU's model name and its number of logical CPUs, from /proc/cpuinfo (Linux)."""
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      lines = f.read().splitlines()
  except OSError:
    return f"unknown CPU ({os.cpu_count()} logical CPUs)"
  field = lambda key: next((line.split(":", 1)[1].strip() for line in lines
                            if line.split(":", 1)[0].strip() == key), "?")
  logical = sum(line.startswith("processor") for line in lines)
  isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in field("flags").split()]
  # A VM's model name can be generic ("Intel(R) Xeon(R) Processor"): family/model/stepping
  # name the microarchitecture.
  return (f"{field('model name')} (family {field('cpu family')} model {field('model')} "
          f"stepping {field('stepping')}), {logical} logical CPUs, {' '.join(isa)}")


def peaks(args) -> dict[str, float]:
  """{precision: peak FLOP/s} for --precisions: --peak_flops_* where given, else measured
  (precision_probe.peak_flops: again now, the best seen on this machine kept); each printed."""
  given = {"float32": args.peak_flops_fp32, "mixed_bfloat16": args.peak_flops_bf16}
  out = {}
  for precision in args.precisions.split(","):
    if given.get(precision):
      out[precision] = given[precision]
      print(f"peak for MFU: {precision} {out[precision] / 1e9:.0f} GFLOP/s (given)", flush=True)
    else:
      out[precision], _ = precision_probe.peak_flops(precision, remeasure=True)
  return out


def build_ours(args, data, preset, precision, jit_compile=False):
  """A function running one step of our TrainStep on the pipeline; returns a tensor to sync on."""
  cfg = TrainConfig.from_dict(dict(
      model_dir="", train_data=data, config=preset, max_seq_len=args.max_seq_len,
      batch_size=args.batch_size, train_steps=10**6, warmup_steps=1, learning_rate=1e-4,
      precision=precision, shuffle_buffer=1000, seed=0, dropout=args.dropout,
      jit_compile=jit_compile))
  strategy = tf.distribute.get_strategy()
  model_config = model_config_for(cfg, dataset_info.read(data))
  train_step = build_train_step(PretrainingTask(cfg, strategy, model_config), strategy)
  train_ds, _ = inputs.build_datasets(cfg, strategy, model_config, start=0)
  iterator = iter(train_ds)
  return lambda: train_step(lambda: next(iterator))[0]["loss"]


def build_keras_hub(args, data, preset, precision):
  """A function running one keras-hub `fit` step (its train_function) on the same batches."""
  import keras  # pylint: disable=import-outside-toplevel
  import keras_hub  # pylint: disable=import-outside-toplevel
  config = models.preset(preset, vocab_size=VOCAB_SIZE, max_positions=args.max_seq_len + 2)
  if args.dropout >= 0:
    config = config.replace(dropout=args.dropout, attention_dropout=args.dropout)
  keras.utils.set_random_seed(0)
  previous = keras.mixed_precision.global_policy()
  keras.mixed_precision.set_global_policy(precision)
  try:
    backbone = keras_hub.models.RobertaBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers,
        num_heads=config.num_heads, hidden_dim=config.hidden_size,
        intermediate_dim=config.intermediate_size, dropout=config.dropout,
        max_sequence_length=args.max_seq_len)
    model = keras_hub.models.RobertaMaskedLM(backbone, preprocessor=None)
    opt = keras.optimizers.AdamW(learning_rate=1e-4, weight_decay=0.01, beta_1=0.9,
                                 beta_2=0.98, epsilon=1e-6)
    opt.exclude_from_weight_decay(var_names=["bias", "gamma", "beta"])
    model.compile(optimizer=opt,
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()])
  finally:
    keras.mixed_precision.set_global_policy(previous)

  def to_keras(batch):
    x = {"token_ids": batch["input_ids"], "padding_mask": batch["padding_mask"],
         "mask_positions": batch["mask_positions"]}
    return x, batch["mask_ids"], batch["mask_weights"]
  ds = pipeline.build_dataset(data, "train", training=True, per_replica_batch_size=args.batch_size,
                              max_seq_len=args.max_seq_len, model_config=config,
                              shuffle_buffer=1000).map(to_keras)
  # What fit() runs per step (steps_per_execution=1, jit_compile="auto": no XLA on CPU), minus
  # its callbacks and progress bar: if anything, this favors keras-hub.
  model.make_train_function()
  train_function, iterator = model.train_function, iter(ds)
  return lambda: train_function(iterator)["loss"]


def time_windows(steps: dict, args) -> dict:
  """{name: [tokens/s of each window]}: warm-up, then alternating windows of each step fn."""
  for step in steps.values():
    for _ in range(args.warmup_steps):
      out = step()
    out.numpy()
  rates = {name: [] for name in steps}
  tokens = args.batch_size * args.max_seq_len * args.window
  for _ in range(args.rounds):
    for name, step in steps.items():
      start = time.perf_counter()
      for _ in range(args.window):
        out = step()
      out.numpy()  # one host sync per window, as the training loop between log steps
      rates[name].append(tokens / (time.perf_counter() - start))
  return rates


def measure(args, data: str, preset: str, precision: str, peer: str,
            mfu_per_token_s: float) -> dict:
  """One preset x precision: ours and the peer's windows, their row (printed)."""
  ours_step = build_ours(args, data, preset, precision)
  if args.jit_compile:
    peer_step = build_ours(args, data, preset, precision, jit_compile=True)
  else:
    peer_step = build_keras_hub(args, data, preset, precision)
  rates = time_windows({"ours": ours_step, peer: peer_step}, args)
  ours, theirs = (statistics.median(rates[k]) for k in ("ours", peer))
  best = {k: max(v) for k, v in rates.items()}
  # The ratio says how much faster ours is than keras-hub, or --jit_compile than ours.
  ratio = (lambda a, b: b / a) if args.jit_compile else (lambda a, b: a / b)
  paired = [ratio(a, b) for a, b in zip(rates["ours"], rates[peer], strict=True)]
  row = {"preset": preset, "precision": precision, "ours_tokens_per_sec": ours,
         "ours_mfu": ours * mfu_per_token_s, f"{peer}_tokens_per_sec": theirs,
         f"{peer}_mfu": theirs * mfu_per_token_s, "ratio": statistics.median(paired),
         "paired_ratio_range": [min(paired), max(paired)],
         "ours_best_tokens_per_sec": best["ours"],
         f"{peer}_best_tokens_per_sec": best[peer], "windows": rates}
  print(f"{preset:8} {precision:15} {ours:13,.0f} {row['ours_mfu']:6.2f} "
        f"{theirs:15,.0f} {row[f'{peer}_mfu']:6.2f} {row['ratio']:6.2f}x  "
        f"[{min(paired):.2f}-{max(paired):.2f}]  best windows {best['ours']:,.0f} vs "
        f"{best[peer]:,.0f} ({ratio(best['ours'], best[peer]):.2f}x)", flush=True)
  return row


def main(argv):
  del argv
  args = throughput_flags.args(presets="small", rounds=5, warmup_steps=2)
  work = tempfile.mkdtemp(prefix="train_throughput_")
  try:
    shards = os.path.join(work, "shards")
    os.makedirs(shards)
    data = write_synthetic_shards(shards, num_sequences=1024, seq_len=args.max_seq_len)
    peer, peer_label = (("ours_jit", "--jit_compile") if args.jit_compile
                        else ("keras_hub", "keras-hub"))
    print(f"CPU: {cpu_model()}", flush=True)
    peak = peaks(args)
    print(f"B={args.batch_size} S={args.max_seq_len} V={VOCAB_SIZE} dropout "
          f"{args.dropout if args.dropout >= 0 else 'preset'}; tokens/s = median of "
          f"{args.rounds} alternating {args.window}-step windows after {args.warmup_steps} "
          "warm-up steps; ratio = median of paired window ratios ("
          f"{'--jit_compile / default' if args.jit_compile else 'ours / keras-hub'})",
          flush=True)
    ours_label = "default tok/s" if args.jit_compile else "ours tok/s"
    header = (f"{'preset':8} {'precision':15} {ours_label:>13} {'MFU':>6} "
              f"{peer_label + ' tok/s':>15} {'MFU':>6} {'ratio':>6}  [paired range]")
    print(header, flush=True)
    rows = []
    for preset in args.presets.split(","):
      config = models.preset(preset, vocab_size=VOCAB_SIZE, max_positions=args.max_seq_len + 2)
      predictions = TrainConfig.from_dict(dict(model_dir="", train_data="")).for_family(
          registry.family_of(config)).masking_config().resolved_max_predictions(args.max_seq_len)
      step_flops = flops.train_step_flops(
          config.flop_terms(), seq_len=args.max_seq_len, predictions_per_seq=predictions,
          sequences=args.batch_size)
      for precision in args.precisions.split(","):
        rows.append(measure(args, data, preset, precision, peer,
                            step_flops / (args.batch_size * args.max_seq_len) / peak[precision]))
    print(json.dumps(rows))
    if args.jit_compile:  # a measurement, not a target
      return 0
    return throughput_flags.verdict(
        [(r["preset"], r["precision"]) for r in rows if r["ratio"] < 1.0], "keras-hub")
  finally:
    shutil.rmtree(work, ignore_errors=True)


def define_flags() -> None:
  """This script's flags (defined when it runs: throughput_vs_hf and the profilers import it)."""
  throughput_flags.define_flags(
      warmup_steps=3, window=1, dropout=-1.0, dropout_help="Dropout of both sides (-1: the "
      "preset's, 0.1).", quick_help="small preset only, fewer steps (a smoke run of the "
      "comparison).")
  flags.DEFINE_bool("jit_compile", False, "Compare our default step with our step under "
                    "--jit_compile (XLA) instead of keras-hub.")


if __name__ == "__main__":
  define_flags()
  app.run(main)
