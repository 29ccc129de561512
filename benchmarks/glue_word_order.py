"""A GLUE-layout task from real text for the fine-tuning benchmarks: word order, as SST-2's files.

Is a sentence's word order intact ("0") or were two of its words swapped ("1")? An
acceptability judgement like CoLA's, from the Python docs corpus (benchmarks/word_order_task.py
makes the sentences). Every `held_out_every`-th document of the corpus is held out of the
pretraining and gives the task's sentences, so the task's text is never pretrained on.

Written in GLUE SST-2's layout, so `roberta_tf.finetune --glue_task=sst2 --data_dir=DIR` reads
it as the real SST-2: train.tsv and dev.tsv (header `sentence<TAB>label`), test.tsv (header
`index<TAB>sentence`, no labels). Sentences are single lines without tabs.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterator

from benchmarks import word_order_task
from roberta_tf.finetuning import docs_sections

LABELS = {"intact": "0", "swapped": "1"}


def documents(corpus: str, held_out_every: int, held_out: bool) -> Iterator[str]:
  """The corpus's document texts: the held-out ones (every held_out_every-th) or the others."""
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    for i, line in enumerate(f):
      if (i % held_out_every == held_out_every - 1) == held_out:
        yield json.loads(line)["text"]


def write_task(corpus: str, out_dir: str, train: int, dev: int, test: int,
               held_out_every: int = 10, seed: int = 0) -> dict:
  """Writes train.tsv / dev.tsv / test.tsv of up to train / dev / test sentences; returns the
  counts written. Sentences are drawn from the held-out documents' prose paragraphs, shuffled
  (seeded), each once, half of each split swapped."""
  paragraphs = [p for text in documents(corpus, held_out_every, held_out=True)
                for p in docs_sections.prose_paragraphs(text)]
  rows = [r for r in word_order_task.examples(paragraphs, seed) if "\t" not in r["text"]]
  random.Random(seed).shuffle(rows)
  splits = {"train": rows[:train], "dev": rows[train:train + dev],
            "test": rows[train + dev:train + dev + test]}
  os.makedirs(out_dir, exist_ok=True)
  for name, part in splits.items():
    with open(os.path.join(out_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
      if name == "test":
        f.write("index\tsentence\n")
        f.writelines(f"{i}\t{r['text']}\n" for i, r in enumerate(part))
      else:
        f.write("sentence\tlabel\n")
        f.writelines(f"{r['text']}\t{LABELS[r['label']]}\n" for r in part)
  return {name: len(part) for name, part in splits.items()}


def read_split(path: str) -> tuple[list[str], list[int]]:
  """(sentences, int labels) of a train.tsv / dev.tsv written here."""
  with open(path, encoding="utf-8") as f:
    rows = [line.rstrip("\n").split("\t") for line in f][1:]
  return [r[0] for r in rows], [int(r[1]) for r in rows]
