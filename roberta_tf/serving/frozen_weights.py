"""oneDNN's weight caching, for processes that only serve.

TF's oneDNN matmul (MatMul + BiasAdd fused into one call, as the exports' serving layout runs
every Dense: models/transformer_layer.py) re-packs its weight matrix into oneDNN's blocked
layout on every call unless it is told the weights never change; then it packs each once and
keeps it. At batch 1 the re-packing is most of a matmul's time (docs/serving_performance.md:
a base encoder on 16 tokens, bf16, 2 threads, 28 ms → 17 ms).

The switch is TensorFlow's environment variable TF_ONEDNN_ASSUME_FROZEN_WEIGHTS, read once per
process, the first time a fused matmul runs. It is only correct where no variable a matmul reads
ever changes after that first run: a process that serves a SavedModel, never one that trains
(the packed copy would go stale). The serving binaries (fill_mask, tag, embed) set it through
`serve_only` before they load an export; TF Serving users set it in the server's environment.
"""

from __future__ import annotations

import os

ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"


def serve_only() -> None:
  """Declares this process inference-only: oneDNN keeps packed weights between calls, unless the
  environment already says otherwise (an explicit TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=0 wins)."""
  os.environ.setdefault(ENV, "1")
