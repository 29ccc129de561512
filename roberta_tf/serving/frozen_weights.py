"""oneDNN's weight caching: set by the processes that only serve, refused by those that train.

TF's oneDNN matmul (MatMul + BiasAdd fused into one call, as the exports' serving layout runs
every Dense: models/roberta/transformer_layer.py) re-packs its weight matrix into oneDNN's blocked
layout on every call unless it is told the weights never change; then it packs each once and
keeps it. At batch 1 the re-packing is most of a matmul's time (docs/serving_performance.md:
a base encoder on 16 tokens, bf16, 2 threads, 28 ms → 17 ms).

The switch is TensorFlow's environment variable TF_ONEDNN_ASSUME_FROZEN_WEIGHTS, read once per
process, the first time a fused matmul runs ("1" or "true", any case, is on; TF aborts on a
value other than those and "0"/"false"). It is a hidden input to every matmul in the process:
only correct where no variable a matmul reads ever changes after its first run. So no library
function sets it (loading an export does not); the serving binaries (fill_mask, tag, embed) call
`serve_only` first thing in their `main`, and the binaries that train (train, finetune, ablate,
quickstart) call `refuse_in_training`, which stops them in one line when the environment has it
on: under it a fine-tuning head computes with its first weights forever, silently.
"""

from __future__ import annotations

import os

ENV = "TF_ONEDNN_ASSUME_FROZEN_WEIGHTS"
_OFF = ("", "0", "false")  # what TF reads as off (unset included); anything else is on or fatal


class FrozenWeightsError(ValueError):
  """A process that trains was started with the switch on."""


def serve_only() -> None:
  """Declares this process inference-only: oneDNN keeps packed weights between calls, unless the
  environment already says otherwise (an explicit TF_ONEDNN_ASSUME_FROZEN_WEIGHTS=0 wins).
  Only a serving binary's `main` (or a benchmark that only serves) calls it."""
  os.environ.setdefault(ENV, "1")


def is_on(environ=None) -> bool:
  """The switch is on (or set to a value TF would not parse) in `environ` (os.environ)."""
  environ = os.environ if environ is None else environ
  return environ.get(ENV, "").strip().lower() not in _OFF


def refuse_in_training(environ=None) -> None:
  """For a binary that trains, first thing in its `main`.

  Raises:
    FrozenWeightsError: one line naming the variable, when `environ` (os.environ) has it on.
  """
  environ = os.environ if environ is None else environ
  if is_on(environ):
    raise FrozenWeightsError(
        f"{ENV}={environ[ENV]} is set in the environment: oneDNN would keep the first packed "
        "copy of every weight and training would compute with stale weights; unset it (it is "
        "for processes that only serve)")
