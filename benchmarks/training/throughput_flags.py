"""The flags the training-throughput comparisons share (throughput.py, throughput_vs_hf.py):
what is timed (presets x precisions, B, S, dropout), how (warm-up, rounds of windows), and the
MFU peaks. No TF or torch here: throughput_vs_hf's driver stays free of both."""

from __future__ import annotations

import types

from absl import flags

from benchmarks.common import commands

# The flags its define_* functions declare belong to the calling script: its --help lists them.
flags.disclaim_key_flags()
FLAGS = flags.FLAGS


def define_flags(*, warmup_steps: int, window: int, dropout: float, dropout_help: str,
                 quick_help: str) -> None:
  """The shared flags, with each script's defaults."""
  flags.DEFINE_bool("quick", False, quick_help)
  flags.DEFINE_string("presets", "small,medium", "Comma list of model presets.")
  flags.DEFINE_string("precisions", "float32,mixed_bfloat16", "Comma list.")
  flags.DEFINE_integer("batch_size", 32, "Sequences per step (B).")
  flags.DEFINE_integer("max_seq_len", 128, "S.")
  flags.DEFINE_integer("warmup_steps", warmup_steps, "Untimed steps per side (tracing, first "
                       "allocations).")
  flags.DEFINE_integer("rounds", 8, "Timed windows per side.")
  flags.DEFINE_integer("window", window, "Steps per timing window.")
  flags.DEFINE_float("dropout", dropout, dropout_help)
  for name, precision in (("fp32", "fp32"), ("bf16", "bf16")):
    flags.DEFINE_float(f"peak_flops_{name}", 0.0, f"Peak {precision} FLOP/s for MFU (0: "
                       "measured, precision_probe.peak_flops).")


def args(**quick) -> types.SimpleNamespace:
  """The parsed flags as a namespace; with --quick, `quick`'s values replace theirs."""
  values = commands.flag_args(FLAGS)
  if values.quick:
    for name, value in quick.items():
      setattr(values, name, value)
  return values


def verdict(slower: list, peer: str) -> int:
  """The exit status of a comparison: 1, saying where, when ours is slower than `peer`
  anywhere (`slower`: where), else 0."""
  if slower:
    print(f"SLOWER than {peer} at: {slower}")
  return 1 if slower else 0
