"""modernbert_vs_hf's Hugging Face side: transformers' `ModernBertForMaskedLM` (torch,
attn_implementation="sdpa") of our dims + torch AdamW in a bare training loop over the dumped
batches (hf_worker.py's loop, with ModernBERT's model), with one of two heads:

  stock:  `model(input_ids, attention_mask, labels)`, `sparse_prediction=False` (HF's default):
          the head and decoder run at every position, the loss skips the -100 labels;
  sparse: the same call with `sparse_prediction=True` (HF's own option, which ModernBERT's
          recipe trains with): the final hidden states are filtered to the labelled positions
          before the head, as ours computes the head at the masked positions only.

Imports torch (never TF): it runs in a process of its own (modernbert_vs_hf's workers).
"""

from __future__ import annotations

import contextlib

import numpy as np

from benchmarks.training.hf_worker import hf_labels, load_batches

HEADS = ("stock", "sparse")


def _model_and_optimizer(spec: dict):
  """The model from spec["hf_config"] (config_to_hf's dict) and ours' AdamW rule."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.manual_seed(0)
  config = transformers.ModernBertConfig(**{k: v for k, v in spec["hf_config"].items()
                                            if k not in ("architectures", "model_type")},
                                         sparse_prediction=spec["head"] == "sparse")
  model = transformers.ModernBertForMaskedLM._from_config(  # pylint: disable=protected-access
      config, attn_implementation="sdpa")
  model.train()
  params = [p for p in model.parameters() if p.requires_grad]  # the tied decoder appears once
  opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.01},
                           {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                          lr=1e-4, betas=(0.9, 0.98), eps=1e-6)
  return model, params, opt


def build_modernbert_hf_worker(spec: dict):
  """(step, info) for side_workers.serve: `step()` runs one update of batch i (cycling) and
  returns its loss (detached). `spec`: threads, batches (the .npz), precision (mixed_bfloat16:
  torch.autocast bf16 around the forward and loss), hf_config, clip_norm, head (HEADS)."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec["threads"])
  model, params, opt = _model_and_optimizer(spec)
  batches = load_batches(spec["batches"])
  ids = torch.from_numpy(batches["input_ids"].astype(np.int64))
  mask = torch.from_numpy(batches["padding_mask"].astype(np.int64))
  labels = torch.from_numpy(hf_labels(batches))
  bf16 = spec["precision"] == "mixed_bfloat16"
  index = iter(range(10**12))

  def step():
    i = next(index) % len(ids)
    with (torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()):
      loss = model(input_ids=ids[i], attention_mask=mask[i], labels=labels[i]).loss
    loss.backward()
    if spec["clip_norm"] > 0:
      torch.nn.utils.clip_grad_norm_(params, spec["clip_norm"])
    opt.step()
    opt.zero_grad(set_to_none=True)
    return loss.detach()

  info = {"versions": f"torch {torch.__version__}, transformers {transformers.__version__}",
          "threads": f"torch intra-op {torch.get_num_threads()}, inter-op "
                     f"{torch.get_num_interop_threads()}",
          "attention": model.config._attn_implementation}  # pylint: disable=protected-access
  return step, info
