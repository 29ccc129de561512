"""GLUE-layout tasks from real text for the fine-tuning benchmarks (the Python docs corpus).

Every `held_out_every`-th document of the corpus is held out of the pretraining and gives the
tasks' sentences (its prose paragraphs split into sentences of 8-40 words), so a task's text is
never pretrained on. Written in a GLUE task's own layout, so `roberta_tf.finetune
--glue_task=... --data_dir=DIR` reads it as that GLUE task, and the HF side reads the same files
through the same reader (roberta_tf/finetuning/glue.py):

- section, as SST-2 (`write_section`): is a sentence from the library reference ("1") or from
  another part of the docs ("0")? Learnable by a tiny model in a few epochs: the fine-tuning
  parity benchmark's task.
- word order, as SST-2 (`write_word_order`): is a sentence's word order intact ("0") or were two
  of its words swapped ("1")? An acceptability judgement like CoLA's (benchmarks/
  word_order_task.py). Short single sentences: the batching benchmark's task.
- same document, as MRPC (`write_same_document`): do two sentences come from the same document
  ("1") or from two different held-out documents ("0")? Half of each. A sentence-pair task
  between topic and paraphrase.

train.tsv and dev.tsv carry labels; test.tsv (the layout's test header, no labels) gets the
leaderboard predictions. Texts are single lines without tabs.
"""

from __future__ import annotations

import gzip
import json
import os
import random
from collections.abc import Iterator

from absl import flags

from benchmarks.common import commands
from benchmarks.tasks import word_order_task
from roberta_tf.finetuning import docs_sections, glue

# The flags its define_* functions declare belong to the calling script: its --help lists them.
flags.disclaim_key_flags()
LABELS = {"intact": "0", "swapped": "1"}
MRPC_HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"


def documents(corpus: str, held_out_every: int, held_out: bool,
              with_source: bool = False) -> Iterator:
  """The corpus's document texts (or (source, text) pairs): the held-out ones (every
  held_out_every-th) or the others."""
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    for i, line in enumerate(f):
      if (i % held_out_every == held_out_every - 1) == held_out:
        doc = json.loads(line)
        yield (doc.get("source", ""), doc["text"]) if with_source else doc["text"]


def _sentences(text: str) -> list[str]:
  return [s for p in docs_sections.prose_paragraphs(text) for s in word_order_task.sentences(p)
          if "\t" not in s]


def write_word_order(corpus: str, out_dir: str, train: int, dev: int, test: int,
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


def write_same_document(corpus: str, out_dir: str, train: int, dev: int, test: int,
                        held_out_every: int = 2, seed: int = 0) -> dict:
  """Writes MRPC-layout train.tsv / dev.tsv / test.tsv of train / dev / test sentence pairs;
  returns the counts. Each split draws from its own documents (a document's sentences are in one
  split only), pairs are balanced and shuffled (seeded)."""
  rng = random.Random(seed)
  docs = [s for s in (_sentences(t) for t in documents(corpus, held_out_every, True))
          if len(s) >= 2]
  rng.shuffle(docs)
  total = sum(len(d) for d in docs)
  splits, start = {}, 0
  for name, count in (("train", train), ("dev", dev), ("test", test)):
    share, end = count / max(train + dev + test, 1) * total, start  # sentences in proportion
    taken = 0
    while end < len(docs) and taken < share:
      taken += len(docs[end])
      end += 1
    pool = docs[start:end]
    start = end
    rows = []
    for k in range(count):
      same = k % 2 == 0
      a_doc = rng.randrange(len(pool))
      b_doc = a_doc if same else rng.choice([i for i in range(len(pool)) if i != a_doc])
      a, b = (rng.sample(pool[a_doc], 2) if same else
              (rng.choice(pool[a_doc]), rng.choice(pool[b_doc])))
      rows.append(("1" if same else "0", a, b))
    rng.shuffle(rows)
    splits[name] = rows
  os.makedirs(out_dir, exist_ok=True)
  for name, rows in splits.items():
    with open(os.path.join(out_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
      f.write(("index" + MRPC_HEADER[len("Quality"):] if name == "test" else MRPC_HEADER) + "\n")
      f.writelines(f"{i if name == 'test' else label}\t{2 * i}\t{2 * i + 1}\t{a}\t{b}\n"
                   for i, (label, a, b) in enumerate(rows))
  return {name: len(rows) for name, rows in splits.items()}


def write_section(corpus: str, out_dir: str, train: int, dev: int, test: int,
                  held_out_every: int = 2, seed: int = 0) -> dict:
  """Writes SST-2-layout files: is a sentence from the library reference ("1") or from any
  other part of the docs -- tutorial, howto, language reference, C API, FAQ, what's new ("0")?
  Balanced, sentences sampled at random (seeded) from all held-out documents, each once."""
  rng = random.Random(seed)
  pools = {True: [], False: []}
  for src, text in documents(corpus, held_out_every, True, with_source=True):
    pools[docs_sections.section_of(src) == "library"].extend(_sentences(text))
  for pool in pools.values():
    rng.shuffle(pool)
  splits, used = {}, 0
  for name, count in (("train", train), ("dev", dev), ("test", test)):
    half = count // 2
    rows = [(flag, s) for flag in (True, False) for s in pools[flag][used:used + half]]
    used += half
    rng.shuffle(rows)
    splits[name] = rows
  os.makedirs(out_dir, exist_ok=True)
  for name, rows in splits.items():
    with open(os.path.join(out_dir, f"{name}.tsv"), "w", encoding="utf-8") as f:
      if name == "test":
        f.write("index\tsentence\n")
        f.writelines(f"{i}\t{s}\n" for i, (_, s) in enumerate(rows))
      else:
        f.write("sentence\tlabel\n")
        f.writelines(f"{s}\t{int(flag)}\n" for flag, s in rows)
  return {name: len(rows) for name, rows in splits.items()}


def read_split(glue_task: str, path: str) -> tuple[list[str], list[str] | None, list[int]]:
  """(texts_a, texts_b or None, class ids in the task's label order) of a labelled file, read
  by the GLUE preset's reader."""
  preset = glue.get(glue_task)
  examples, _ = glue.read_file(preset, path, preset.train)
  b = [e.text_b for e in examples] if len(preset.text_fields) == 2 else None
  return [e.text_a for e in examples], b, [preset.labels.index(e.label) for e in examples]


def define_data_flags(work_dir: str, work_dir_help: str) -> None:
  """--corpus, --vocab_dir and --work_dir of the fine-tuning benchmarks that use these tasks."""
  flags.DEFINE_string("corpus", commands.DOCS_CORPUS,
                      "The Python docs JSONL corpus (default: ../shared beside the repository).")
  flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB,
                      "vocab.json + merges.txt (the fixture's 8000-id vocab).")
  flags.DEFINE_string("work_dir", work_dir, work_dir_help)
