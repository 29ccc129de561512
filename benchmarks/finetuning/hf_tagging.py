"""The peer's token classification for the benchmarks: Hugging Face `transformers` on torch.

Trained as HF's token-classification example (examples/pytorch/token-classification/run_ner.py)
trains it, in a plain loop with roberta_tf.finetune's recipe
(benchmarks/finetuning/hf_finetune.Recipe):
- RobertaForTokenClassification (`AutoModelForTokenClassification`) from a `convert_checkpoint
  --to_hf` folder, num_labels / id2label / label2id from the sorted tag set (run_ner's
  `get_label_list`, over all three files), the new head drawn under torch.manual_seed(seed);
- the words encoded by the folder's tokenizer with add_prefix_space=True and
  is_split_into_words=True, truncated to max_seq_len; a word's label on its first piece, -100 on
  its other pieces and the special tokens (run_ner's default label_all_tokens=False), so the
  loss is the mean over words;
- random batches (seeded) padded to their longest (`DataCollatorForTokenClassification`);
- AdamW beta2 0.98, epsilon 1e-6, weight decay on matrices only, 6% linear warmup then linear
  decay to 0, dropout 0.1, no gradient clipping;
- after every epoch dev and test scored with `seqeval.metrics` in its default mode (what
  run_ner's `evaluate.load("seqeval")` reports as overall_precision/recall/f1/accuracy: entity
  micro averages, conlleval-style chunks), over the words that kept a label (all of them when
  nothing is truncated). The best epoch by dev F1 is the run's result, with its test figures.
"""

from __future__ import annotations

import numpy as np

from benchmarks.finetuning import hf_finetune

Sentences = list[tuple[list[str], list[str]]]


def seqeval_metrics(true_tags: list[list[str]], predicted: list[list[str]]) -> dict:
  """{"precision", "recall", "f1", "accuracy"}: seqeval's entity micro averages (default mode)
  and the per-word accuracy."""
  from seqeval import metrics  # pylint: disable=import-outside-toplevel
  return {"precision": metrics.precision_score(true_tags, predicted),
          "recall": metrics.recall_score(true_tags, predicted),
          "f1": metrics.f1_score(true_tags, predicted),
          "accuracy": metrics.accuracy_score(true_tags, predicted)}


def encode(tokenizer, sentences: Sentences, label2id: dict[str, int], max_seq_len: int) -> list:
  """One row per sentence: input_ids, attention_mask, labels (first piece of a word: its tag's
  id; other pieces and specials: -100)."""
  words = [w for w, _ in sentences]
  enc = tokenizer(words, is_split_into_words=True, truncation=True, max_length=max_seq_len)
  rows = []
  for i, (_, tags) in enumerate(sentences):
    labels, previous = [], None
    for word in enc.word_ids(i):
      labels.append(-100 if word is None or word == previous else label2id[tags[word]])
      previous = word
    rows.append({"input_ids": enc["input_ids"][i], "attention_mask": enc["attention_mask"][i],
                 "labels": labels})
  return rows


def _score(model, loader, id2label: dict[int, str]) -> dict:
  """Entity metrics of the model on a loader's batches, over the labelled positions."""
  import torch  # pylint: disable=import-outside-toplevel
  true_tags, predicted = [], []
  model.eval()
  with torch.no_grad():
    for batch in loader:
      labels = batch.pop("labels").numpy()
      guesses = model(**batch).logits.argmax(-1).numpy()
      for row_labels, row_guesses in zip(labels, guesses, strict=True):
        kept = row_labels != -100
        true_tags.append([id2label[int(y)] for y in row_labels[kept]])
        predicted.append([id2label[int(y)] for y in row_guesses[kept]])
  return seqeval_metrics(true_tags, predicted)


def finetune(hf_dir: str, train: Sentences, dev: Sentences, test: Sentences,
             recipe: hf_finetune.Recipe, seed: int, threads: int = 0) -> dict:
  """One HF token-classification run.

  Args:
    hf_dir: a --to_hf folder (config.json, model.safetensors, tokenizer files).
    train, dev, test: (words, tags) per sentence, IOB2 tags.
  Returns:
    {"labels": the label list, "truncated": sentences of each split that lost words,
     "epochs": [{"dev": metrics, "test": metrics, "train_seconds", "train_examples_per_sec",
     "tokens", "padded_tokens"}], "best_epoch": 1-based, by dev f1, "best": its dev metrics,
     "best_test": its test metrics}.
  """
  import torch  # pylint: disable=import-outside-toplevel
  from transformers import (  # pylint: disable=import-outside-toplevel
    AutoModelForTokenClassification,
    AutoTokenizer,
    DataCollatorForTokenClassification,
  )
  if threads:
    torch.set_num_threads(threads)
  # run_ner takes the training file's tags; the union also covers a tag that only dev or test
  # has (a rare I- tag), which would otherwise stop the run.
  labels = sorted({t for split in (train, dev, test) for _, tags in split for t in tags})
  label2id = {t: i for i, t in enumerate(labels)}
  tokenizer = AutoTokenizer.from_pretrained(hf_dir, add_prefix_space=True)
  rows = {name: encode(tokenizer, split, label2id, recipe.max_seq_len)
          for name, split in (("train", train), ("dev", dev), ("test", test))}
  truncated = {name: sum(sum(y != -100 for y in r["labels"]) < len(s[0])
                         for r, s in zip(rows[name], split, strict=True))
               for name, split in (("train", train), ("dev", dev), ("test", test))}
  torch.manual_seed(seed)  # the new head's init
  model = AutoModelForTokenClassification.from_pretrained(
      hf_dir, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id,
      hidden_dropout_prob=recipe.dropout, attention_probs_dropout_prob=recipe.dropout)
  collate = DataCollatorForTokenClassification(tokenizer)
  loader = torch.utils.data.DataLoader(rows["train"], batch_size=recipe.batch_size, shuffle=True,
                                       generator=torch.Generator().manual_seed(seed),
                                       collate_fn=collate)
  evaluation = {name: torch.utils.data.DataLoader(rows[name], batch_size=64, collate_fn=collate)
                for name in ("dev", "test")}
  optimizer, scheduler = hf_finetune.optimizer_and_schedule(model, recipe,
                                                          recipe.epochs * len(loader))
  epochs = []
  for _ in range(recipe.epochs):
    epoch = hf_finetune.train_epoch(model, loader, optimizer, scheduler)
    epoch["train_examples_per_sec"] = len(train) / epoch["train_seconds"]
    epochs.append({**epoch, **{name: _score(model, evaluation[name], model.config.id2label)
                               for name in ("dev", "test")}})
  best = int(np.argmax([e["dev"]["f1"] for e in epochs]))  # the first of equals, as ours
  return {"labels": labels, "truncated": truncated, "epochs": epochs, "best_epoch": best + 1,
          "best": epochs[best]["dev"], "best_test": epochs[best]["test"]}
