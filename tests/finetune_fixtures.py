"""Small synthetic fine-tuning data sets (deterministic) and a pretrained model dir for tests."""

from __future__ import annotations

import csv
import json
import os
import random
import shutil

POSITIVE = ("great", "wonderful", "excellent", "lovely", "good", "superb")
NEGATIVE = ("terrible", "awful", "bad", "horrible", "poor", "dreadful")
NAMES = ("Alice", "Bob", "Carol", "Dmitri", "Élodie", "Zoë", "Hiroshi", "Nadia")
THINGS = ("cat", "violin", "garden", "bicycle", "telescope", "kettle")


def sentiment_rows(n: int, seed: int) -> list[dict]:
  """{"sentence", "sentence2", "label" ("pos"/"neg"), "score" (0-5)}: the label is the sentiment
  word in `sentence`; `sentence2` is noise (a pair problem that ignores B is still learnable)."""
  rng = random.Random(seed)
  rows = []
  for _ in range(n):
    positive = rng.random() < 0.5
    word = rng.choice(POSITIVE if positive else NEGATIVE)
    rows.append({"sentence": f"the film was {word} , I think",
                 "sentence2": f"a \"quoted\" note, {rng.choice(THINGS)}",
                 "label": "pos" if positive else "neg",
                 "score": 4.0 + rng.random() if positive else rng.random()})
  return rows


def write_table(path: str, rows: list[dict]) -> str:
  """Writes rows as .tsv, .csv or .jsonl (by the extension); returns path."""
  ext = os.path.splitext(path)[1]
  with open(path, "w", encoding="utf-8", newline="") as f:
    if ext == ".jsonl":
      for row in rows:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
      fields = list(rows[0])
      if ext == ".tsv":
        f.write("\t".join(fields) + "\n")
        for row in rows:
          f.write("\t".join(str(row[k]) for k in fields) + "\n")
      else:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
  return path


def squad_paragraph(index: int, rng: random.Random, version_2: bool, filler: int) -> dict:
  """A context "<filler> A owns a x. B owns a y. ..." with a question per owner (answers: the
  thing, sometimes also "a thing"); v2 adds an unanswerable question about a missing name."""
  names, things = rng.sample(NAMES, 4), rng.sample(THINGS, 4)
  prefix = " ".join(["The weather was mild and nothing happened that day."] * filler)
  context = (prefix + "  " if prefix else "") + " ".join(
      f"{a} owns a {b}." for a, b in zip(names, things, strict=True)) + " That is all."
  qas = []
  for k, (name, thing) in enumerate(zip(names, things, strict=True)):
    start = context.index(f"{name} owns a ") + len(f"{name} owns a ")
    answers = [{"text": thing, "answer_start": start}]
    if rng.random() < 0.5:
      answers.append({"text": f"a {thing}", "answer_start": start - 2})
    qa = {"id": f"p{index}q{k}", "question": f"What does {name} own?", "answers": answers}
    if version_2:
      qa["is_impossible"] = False
    qas.append(qa)
  if version_2:
    missing = next(n for n in NAMES if n not in names)
    qas.append({"id": f"p{index}qx", "question": f"What does {missing} own?", "answers": [],
                "is_impossible": True})
  return {"context": context, "qas": qas}


def write_squad(path: str, paragraphs: int, seed: int, version_2: bool = False) -> str:
  rng = random.Random(seed)
  data = {"version": "v2.0" if version_2 else "1.1", "data": [{"title": "synthetic", "paragraphs": [
      squad_paragraph(i, rng, version_2, filler=rng.randint(0, 3)) for i in range(paragraphs)]}]}
  with open(path, "w", encoding="utf-8") as f:
    json.dump(data, f, ensure_ascii=False)
  return path


def write_race(path: str, passages: int, seed: int) -> str:
  """RACE-layout JSONL: per passage "A owns a x. ..." with questions about owners, 4 options,
  one cloze question ("_") per passage."""
  rng = random.Random(seed)
  with open(path, "w", encoding="utf-8") as f:
    for p in range(passages):
      names, things = rng.sample(NAMES, 4), rng.sample(THINGS, 4)
      article = " ".join(f"{a} owns a {b}." for a, b in zip(names, things, strict=True))
      questions, options, answers = [], [], []
      for k, (name, thing) in enumerate(zip(names, things, strict=True)):
        choice = rng.sample(things, 4)
        questions.append(f"What does {name} own?" if k else f"{name} owns a _ .")
        options.append(choice)
        answers.append("ABCD"[choice.index(thing)])
      f.write(json.dumps({"id": f"r{p}", "article": article, "questions": questions,
                          "options": options, "answers": answers}) + "\n")
  return path


def pretrained_model_dir(hf_tiny_dir: str, out_dir: str, seed: int = 0) -> str:
  """A model dir like pretraining writes (config.json + checkpoint + vocab files): the tests'
  tiny model (harness.tiny_config: L2 H128, the fixture's 8000-id vocab, max_seq_len 64) with
  the presets' dropout 0.1, which fine-tuning reads from config.json; seeded random weights --
  which fine-tune on the synthetic problems in a few steps (the HF fixture's H64 weights do not)."""
  import keras  # pylint: disable=import-outside-toplevel

  from roberta_tf import models  # pylint: disable=import-outside-toplevel
  from tests.harness import tiny_config  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(seed)
  config = tiny_config(dropout=0.1, attention_dropout=0.1)
  models.save(out_dir, models.RobertaPretrainer(config))
  for name in ("vocab.json", "merges.txt"):
    shutil.copyfile(os.path.join(hf_tiny_dir, name), os.path.join(out_dir, name))
  return out_dir


PLACES = (("Paris",), ("New", "York"), ("Kyoto",), ("São", "Paulo"), ("Reykjavík",))
ORGS = (("Acme", "Corp"), ("the", "Red", "Cross"), ("Zebrafish", "Labs"))


def ner_sentences(n: int, seed: int) -> list[tuple[list[str], list[str]]]:
  """(words, IOB2 tags) of synthetic NER sentences: people (PER), places (LOC, some two
  words), organisations (ORG); accented and rare names split into several byte-BPE pieces."""
  rng = random.Random(seed)
  out = []
  for _ in range(n):
    name, place, org = rng.choice(NAMES), rng.choice(PLACES), rng.choice(ORGS)
    words, tags = [name], ["B-PER"]
    words += ["met", "a", "friend", "from"]
    tags += ["O"] * 4
    if rng.random() < 0.5:
      words += list(org)
      tags += ["B-ORG"] + ["I-ORG"] * (len(org) - 1)
      words += ["in"]
      tags += ["O"]
    words += list(place) + ["."]
    tags += ["B-LOC"] + ["I-LOC"] * (len(place) - 1) + ["O"]
    out.append((words, tags))
  return out


def write_conll(path: str, sentences: list[tuple[list[str], list[str]]],
                docstart: bool = True) -> str:
  """CoNLL-2003's layout: `word POS chunk tag` (dummy middle columns), -DOCSTART- first."""
  with open(path, "w", encoding="utf-8") as f:
    if docstart:
      f.write("-DOCSTART- -X- -X- O\n\n")
    for words, tags in sentences:
      for word, tag in zip(words, tags, strict=True):
        f.write(f"{word} NN O {tag}\n")
      f.write("\n")
  return path


COLOURS = ("red", "green", "blue", "yellow", "violet", "orange")


def _fact(name: str, thing: str, colour: str) -> tuple[str, str]:
  """(a document, a query it answers)."""
  return (f"{name} keeps a {colour} {thing} in the shed behind the house.",
          f"who keeps the {colour} {thing}?")


def embedding_rows(n: int, seed: int, negatives: bool = False) -> list[dict]:
  """{"query", "document"(, "negative")}: a question and the sentence that answers it (the
  negative: the same person with another thing and colour)."""
  rng = random.Random(seed)
  rows = []
  for _ in range(n):
    name, thing, colour = rng.choice(NAMES), rng.choice(THINGS), rng.choice(COLOURS)
    document, query = _fact(name, thing, colour)
    row = {"query": query, "document": document}
    if negatives:
      row["negative"] = _fact(name, rng.choice([t for t in THINGS if t != thing]),
                              rng.choice([c for c in COLOURS if c != colour]))[0]
    rows.append(row)
  return rows


def write_beir(directory: str, queries: int, seed: int) -> str:
  """A BEIR-layout dev set: every (thing, colour) document for a few names, `queries` queries
  each with one relevant document."""
  rng = random.Random(seed)
  os.makedirs(os.path.join(directory, "qrels"), exist_ok=True)
  docs = [(f"d{i}", *_fact(n, t, c)) for i, (n, t, c) in enumerate(
      (n, t, c) for n in NAMES[:3] for t in THINGS for c in COLOURS)]
  picked = rng.sample(docs, queries)
  with open(os.path.join(directory, "corpus.jsonl"), "w", encoding="utf-8") as f:
    for doc_id, text, _ in docs:
      f.write(json.dumps({"_id": doc_id, "title": "", "text": text}) + "\n")
  with open(os.path.join(directory, "queries.jsonl"), "w", encoding="utf-8") as f:
    for k, (_, _, query) in enumerate(picked):
      f.write(json.dumps({"_id": f"q{k}", "text": query}) + "\n")
  with open(os.path.join(directory, "qrels", "dev.tsv"), "w", encoding="utf-8") as f:
    f.write("query-id\tcorpus-id\tscore\n")
    for k, (doc_id, _, _) in enumerate(picked):
      f.write(f"q{k}\t{doc_id}\t1\n")
  return directory
