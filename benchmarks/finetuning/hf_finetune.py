"""The peer's fine-tuning for the benchmarks: Hugging Face `transformers` on torch, a plain loop.

The recipe is roberta_tf.finetune's (the paper's, Appendix C): RobertaForSequenceClassification
from a `convert_checkpoint --to_hf` folder (its classification head: dense tanh + out_proj on
`<s>`, N(0, 0.02) init), AdamW with beta2 0.98, epsilon 1e-6, weight decay 0.1 on matrices only
(not biases or LayerNorm: torch's decoupled decay, as ours), a linear warmup over 6% of the
updates then linear decay to 0 (`get_linear_schedule_with_warmup`), dropout as the model's
config, no gradient clipping (fairseq's fine-tuning default; ours is off too), the mean loss of
the batch. Batches: a seeded random order, each padded to its longest example
(`DataCollatorWithPadding`: HF's standard). Pairs `<s> A </s></s> B </s>`, truncated longest
first to max_seq_len, as ours. Each epoch ends with the dev metrics; a run reports every epoch's
and the best.

torch and transformers come from requirements-bench.txt.
"""

from __future__ import annotations

import dataclasses
import time

import numpy as np


@dataclasses.dataclass
class Recipe:
  """The hyperparameters both sides share."""
  max_seq_len: int
  batch_size: int
  learning_rate: float
  epochs: int
  warmup_ratio: float = 0.06
  weight_decay: float = 0.1
  adam_beta2: float = 0.98
  adam_epsilon: float = 1e-6
  dropout: float = 0.1


def _metrics(labels: np.ndarray, logits: np.ndarray, regression: bool) -> dict:
  from roberta_tf.finetuning import metrics  # pylint: disable=import-outside-toplevel
  if regression:
    return metrics.regression_metrics(labels, logits[:, 0])
  return metrics.classification_metrics(labels, logits.argmax(-1), logits.shape[-1])


def optimizer_and_schedule(model, recipe: Recipe, total_steps: int):
  """torch AdamW with the recipe's decay on matrices only, and the linear warmup + decay."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  # Decay on matrices only: biases and LayerNorm scales are vectors (ours and fairseq's rule).
  decay = [p for p in model.parameters() if p.ndim >= 2]
  no_decay = [p for p in model.parameters() if p.ndim < 2]
  optimizer = torch.optim.AdamW(
      [{"params": decay, "weight_decay": recipe.weight_decay},
       {"params": no_decay, "weight_decay": 0.0}],
      lr=recipe.learning_rate, betas=(0.9, recipe.adam_beta2), eps=recipe.adam_epsilon)
  scheduler = transformers.get_linear_schedule_with_warmup(
      optimizer, int(round(recipe.warmup_ratio * total_steps)), total_steps)
  return optimizer, scheduler


def train_epoch(model, loader, optimizer, scheduler) -> dict:
  """One pass over the training batches: {"train_seconds", "tokens", "padded_tokens"}."""
  model.train()
  start, tokens, padded = time.perf_counter(), 0, 0
  for batch in loader:
    model(**batch).loss.backward()  # the batch's mean loss
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    tokens += int(batch["attention_mask"].sum())
    padded += batch["input_ids"].numel()
  return {"train_seconds": time.perf_counter() - start, "tokens": tokens,
          "padded_tokens": padded}


def finetune(hf_dir: str, train: tuple[list, list | None, np.ndarray],
             dev: tuple[list, list | None, np.ndarray], num_labels: int, recipe: Recipe,
             seed: int, metric: str = "", threads: int = 0) -> dict:
  """One HF fine-tuning run.

  Args:
    hf_dir: a --to_hf folder (config.json, model.safetensors, tokenizer files).
    train, dev: (texts_a, texts_b or None, labels: int class ids, or floats with num_labels 1).
  Returns:
    {"epochs": [{"dev": metrics, "train_seconds", "train_examples_per_sec", "tokens",
    "padded_tokens"}], "best": the best epoch's dev metrics (by `metric`; default accuracy,
    regression pearson)}.
  """
  import torch  # pylint: disable=import-outside-toplevel
  from transformers import (  # pylint: disable=import-outside-toplevel
    AutoModelForSequenceClassification,
    AutoTokenizer,
    DataCollatorWithPadding,
  )
  if threads:
    torch.set_num_threads(threads)
  regression = num_labels == 1
  tokenizer = AutoTokenizer.from_pretrained(hf_dir)

  def encode(split):
    a, b, labels = split
    enc = tokenizer(a, b, truncation=True, max_length=recipe.max_seq_len) if b else tokenizer(
        a, truncation=True, max_length=recipe.max_seq_len)
    return [{"input_ids": ids, "attention_mask": mask, "labels": y} for ids, mask, y in
            zip(enc["input_ids"], enc["attention_mask"], labels.tolist(), strict=True)]

  train_rows, dev_rows = encode(train), encode(dev)
  torch.manual_seed(seed)  # the new head's init
  model = AutoModelForSequenceClassification.from_pretrained(
      hf_dir, num_labels=num_labels, hidden_dropout_prob=recipe.dropout,
      attention_probs_dropout_prob=recipe.dropout,
      problem_type="regression" if regression else "single_label_classification")
  collate = DataCollatorWithPadding(tokenizer)
  generator = torch.Generator().manual_seed(seed)
  loader = torch.utils.data.DataLoader(train_rows, batch_size=recipe.batch_size, shuffle=True,
                                       generator=generator, collate_fn=collate)
  dev_loader = torch.utils.data.DataLoader(dev_rows, batch_size=recipe.batch_size,
                                           collate_fn=collate)
  optimizer, scheduler = optimizer_and_schedule(model, recipe, recipe.epochs * len(loader))
  dev_labels = dev[2]
  epochs = []
  for _ in range(recipe.epochs):
    epoch = train_epoch(model, loader, optimizer, scheduler)
    model.eval()
    with torch.no_grad():
      logits = np.concatenate([model(**{k: v for k, v in b.items() if k != "labels"})
                               .logits.float().numpy() for b in dev_loader])
    epochs.append({"dev": _metrics(dev_labels, logits, regression), **epoch,
                   "train_examples_per_sec": len(train_rows) / epoch["train_seconds"]})
  key = metric or ("pearson" if regression else "accuracy")
  best = max(epochs, key=lambda e: -e["dev"][key] if key == "mse" else e["dev"][key])
  return {"epochs": epochs, "best": best["dev"]}
