"""FLOPs of one MLM training step, from what an encoder family's layers compute (for MFU).

A family describes its model as `ModelWork` (its config's `flop_terms()`): per layer the
multiply-adds of its dense projections per token and which keys its attention reads, plus the
heads' multiply-adds. This module turns that into FLOPs:

  layer, per sequence:  2 * S * projection_macs  +  2 * 2 * pairs(S, window) * attention_width
                        (the projections; the scores QK^T and the weighted sum PV)
  MLM head:             2 * P * head_macs            (P prediction slots per sequence)
  sequence head:        2 * sequence_macs            (NSP's pooler and classifier, if any)
  step FLOPs = 3 * sequences * (the sum of those)    (forward, and backward at twice it)

with S the padded length (pads are computed like tokens) and `pairs` the (query, key) pairs the
attention scores: S^2 for a global layer; for a windowed one (keys within window // 2 positions
on either side, ModernBERT's local layers) min(S, window + 1) keys per query in the middle of the
sequence, fewer at its ends, counted exactly. Those are the model's FLOPs: an implementation that
scores all S^2 pairs and masks most of them does more work than it is credited with (MFU, not
hardware utilization).

Only matmuls count (2 FLOPs per multiply-add), as in PaLM's MFU (Chowdhery et al. 2022, app. B)
and every MFU figure recorded here. Not counted: embedding lookups, LayerNorms (post- or pre-LN,
the final one too), bias and residual adds, GELU, the GEGLU product, softmax, masking and
rotary position embeddings (about 3 FLOPs per query and key element: x cos + rotate(x) sin).
They are elementwise, their FLOPs per element depend on the kernel, and together they are a
few % of the matmuls at most (less the wider the model); their time is in the step, so they
lower MFU as they should.
MFU = step FLOPs / step time / peak FLOP/s (pretraining/events.py).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class LayerWork:
  """What one encoder layer multiplies.

  Attributes:
    projection_macs: multiply-adds per token of its dense projections (attention's Q, K, V and
      output; the feed-forward's input(s) and output), H x out for each H -> out kernel.
    attention_width: heads x head size: the length of the q.k and p.v dot products summed
      over heads.
    window: None: global attention (every query reads all S keys); else the keys within
      window // 2 positions on either side (HF ModernBERT's `local_attention`).
  """
  projection_macs: int
  attention_width: int
  window: int | None = None


@dataclasses.dataclass(frozen=True)
class ModelWork:
  """What a pretrainer multiplies: its layers, its MLM head per predicted slot, and any head
  computed once per sequence (NSP's)."""
  layers: tuple[LayerWork, ...]
  head_macs: int
  sequence_macs: int = 0


def attention_pairs(seq_len: int, window: int | None) -> int:
  """(query, key) pairs of S = seq_len positions: S^2, or with a window those with
  |query - key| <= window // 2: S on the diagonal plus twice sum_{d=1..r} (S - d)."""
  if window is None:
    return seq_len * seq_len
  r = min(window // 2, seq_len - 1)
  return seq_len + 2 * (r * seq_len - r * (r + 1) // 2)


def forward_flops(work: ModelWork, *, seq_len: int, predictions_per_seq: int) -> int:
  """Matmul FLOPs of one sequence's forward pass (see the module docstring)."""
  layers = sum(2 * seq_len * layer.projection_macs
               + 4 * attention_pairs(seq_len, layer.window) * layer.attention_width
               for layer in work.layers)
  return layers + 2 * predictions_per_seq * work.head_macs + 2 * work.sequence_macs


def train_step_flops(work: ModelWork, *, seq_len: int, predictions_per_seq: int,
                     sequences: int) -> float:
  """Matmul FLOPs of one update on `sequences` sequences: 3 x forward (backward = 2 x)."""
  return 3.0 * sequences * forward_flops(work, seq_len=seq_len,
                                         predictions_per_seq=predictions_per_seq)
