"""throughput_vs_hf's Hugging Face arms: `RobertaForMaskedLM` of our dims + torch AdamW in a bare
training loop over the dumped batches, with one of two heads:

  stock:  `model(input_ids, attention_mask, labels)`: the LM head projects every position onto
          the vocabulary and the loss skips the -100 labels (HF as its users run it);
  masked: `model.roberta(...)`, the hidden states gathered at the masked positions ([N, H],
          N = the batch's predicted tokens), `model.lm_head` on those rows only and the
          cross-entropy against their ids: the head's work ours does (the same weights and
          loss value; only the unused positions' vocabulary projections are skipped).

Imports torch (never TF): it runs in a process of its own (throughput_vs_hf's workers).
"""

from __future__ import annotations

import contextlib
import types

import numpy as np

HEADS = ("stock", "masked")


def load_batches(path: str) -> dict:
  """The dumped batches: {feature: stacked array [num_batches, ...]}."""
  with np.load(path) as z:
    return {k: z[k] for k in z.files}


def hf_labels(batch: dict) -> np.ndarray:
  """[N, B, S] MLM labels: -100 everywhere but the masked positions (weight > 0), which hold
  their original ids: ours' targets in HF's form."""
  labels = np.full(batch["input_ids"].shape, -100, np.int64)
  n, b, p = np.nonzero(batch["mask_weights"] > 0)
  labels[n, b, batch["mask_positions"][n, b, p]] = batch["mask_ids"][n, b, p]
  return labels


def masked_rows(batch: dict) -> list[tuple[np.ndarray, np.ndarray]]:
  """Per batch, (rows int64 [M]: b * S + position of each masked token, in the flattened
  [B * S, H] hidden states; their original ids int64 [M]), M = the batch's weight > 0 slots."""
  seq_len = batch["input_ids"].shape[2]
  out = []
  for positions, ids, weights in zip(batch["mask_positions"], batch["mask_ids"],
                                     batch["mask_weights"], strict=True):
    b, p = np.nonzero(weights > 0)
    out.append(((b * seq_len + positions[b, p]).astype(np.int64), ids[b, p].astype(np.int64)))
  return out


def _model_and_optimizer(spec: dict):
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel

  from benchmarks.quality.pretraining_sides import hf_config  # pylint: disable=import-outside-toplevel
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
  return model, params, opt


def _loss_fn(model, batches: dict, head: str):
  """i -> the loss of batch i (a scalar tensor, autograd attached), with `head`."""
  import torch  # pylint: disable=import-outside-toplevel
  ids = torch.from_numpy(batches["input_ids"].astype(np.int64))
  mask = torch.from_numpy(batches["padding_mask"].astype(np.int64))
  if head == "stock":
    labels = torch.from_numpy(hf_labels(batches))
    return lambda i: model(input_ids=ids[i], attention_mask=mask[i], labels=labels[i]).loss
  targets = [(torch.from_numpy(r), torch.from_numpy(t)) for r, t in masked_rows(batches)]

  def masked_loss(i):
    hidden = model.roberta(input_ids=ids[i], attention_mask=mask[i]).last_hidden_state
    rows, target = targets[i]
    logits = model.lm_head(hidden.reshape(-1, hidden.shape[-1]).index_select(0, rows))
    return torch.nn.functional.cross_entropy(logits, target)
  return masked_loss


def build_hf_worker(spec: dict):
  """(step, info): `step()` runs one update of batch i (cycling) and returns its loss tensor
  (detached); `info` names the versions and threads. `spec`: threads, batches (the .npz),
  precision (mixed_bfloat16: torch.autocast bf16 around the forward and loss), model_config
  (RobertaConfig.to_dict()), clip_norm (> 0: clip_grad_norm_) and head (HEADS)."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec["threads"])
  model, params, opt = _model_and_optimizer(spec)
  batches = load_batches(spec["batches"])
  loss_of = _loss_fn(model, batches, spec["head"])
  num_batches = len(batches["input_ids"])
  bf16 = spec["precision"] == "mixed_bfloat16"
  clip = spec["clip_norm"]
  index = iter(range(10**12))

  def step():
    i = next(index) % num_batches
    with (torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()):
      loss = loss_of(i)
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
