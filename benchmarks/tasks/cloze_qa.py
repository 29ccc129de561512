r"""An extractive QA set in SQuAD v1.1's format, built from real text: cloze questions on the
Python docs' prose.

    python -m benchmarks.tasks.cloze_qa --output_dir=DIR \
        [--corpus=../shared/corpora/python-docs.jsonl.gz] [--train_questions=5000] \
        [--dev_questions=500] [--dev_percent=10] [--test_percent=15] [--seed=0]

No QA data set is in the repository or downloadable here, so the questions are made from the
corpus by a fixed rule (never by hand):
- contexts: the documents' prose paragraphs (docs_sections.prose_paragraphs, 120..--max_chars
  characters, reStructuredText markup kept as written), split into sentences
  (docs_retrieval.sentences); a sentence of 6..40 words gives at most one question;
- the answer: one span of the sentence, at most 40 characters, picked at random (seeded) among
  the candidates of the first kind the sentence has, in this order: its ``literals`` (the text
  between the double backquotes) and Sphinx roles whose target is a plain name (:func:`open`
  -> open, :meth:`dict.get` -> dict.get); its numbers (3, 3.11); its capitalized words after
  the first (Python, Unicode) -- names first, so that "Python" is not half the answers;
- the question: the sentence with the whole marked span (backquotes and role included)
  replaced by "___" -- a cloze question whose answer is the span's text at its offset in the
  paragraph (answer_start);
- at most --per_paragraph questions per paragraph (from different sentences);
- splits by document, with docs_retrieval.split_of (a hash of the source): train questions
  from the "train" documents, dev questions from the others ("dev" and "test", which a
  checkpoint pretrained by embedding_vs_st or bf16_accuracy never saw). Each split is
  shuffled (seeded) and cut to its count.
Files: DIR/train.json, DIR/dev.json (SQuAD v1.1: data -> paragraphs -> context, qas), and
DIR/counts.json. Deterministic for a given corpus and flags.
"""

from __future__ import annotations

import json
import os
import random
import re

from absl import app, flags

from benchmarks.common import commands
from benchmarks.tasks import docs_retrieval, roles_tagging
from roberta_tf.finetuning import docs_sections

BLANK = "___"
_LITERAL = re.compile(r"``([^`]+)``")
_ROLE = re.compile(r":[a-z]+:`([\w.]+(?:\(\))?)`")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w])")
_CAPITALIZED = re.compile(r"(?<=\s)([A-Z][a-zA-Z]+)\b")


def spans(sentence: str, max_answer_chars: int = 40) -> list[tuple[int, int, int, int]]:
  """(markup start, markup end, answer start, answer end) character offsets in `sentence` of
  the candidate answers of the first kind it has (names, then numbers, then capitalized
  words; the markup is what the question blanks out, the answer is inside it)."""
  for patterns in ((_LITERAL, _ROLE), (_NUMBER,), (_CAPITALIZED,)):
    found = sorted((m.start(), m.end(), m.start(1), m.end(1))
                   for pattern in patterns for m in pattern.finditer(sentence)
                   if 0 < len(m.group(1)) <= max_answer_chars
                   and m.group(1) == m.group(1).strip())
    if found:
      return found
  return []


def paragraph_questions(paragraph: str, rng: random.Random, per_paragraph: int,
                        max_answer_chars: int = 40) -> list[dict]:
  """SQuAD `qas` rows (without ids) of one paragraph: cloze questions of its sentences."""
  rows, cursor = [], 0
  for sentence in docs_retrieval.sentences(paragraph):
    at = paragraph.find(sentence, cursor)
    if at < 0:
      continue  # whitespace differs from the paragraph's: no reliable offset
    cursor = at + len(sentence)
    if not 6 <= len(sentence.split()) <= 40:
      continue
    candidates = spans(sentence, max_answer_chars)
    if not candidates:
      continue
    start, end, answer_start, answer_end = rng.choice(candidates)
    question = " ".join(f"{sentence[:start]}{BLANK}{sentence[end:]}".split())
    rows.append({"question": question,
                 "answers": [{"text": sentence[answer_start:answer_end],
                              "answer_start": at + answer_start}]})
  rng.shuffle(rows)
  return rows[:per_paragraph]


def build(corpus: str, dev_percent: int, test_percent: int, per_paragraph: int = 2,
          max_chars: int = 450, seed: int = 0) -> dict[str, list[dict]]:
  """{"train" | "dev": [{"title", "context", "qas"}]} paragraph entries, each question with a
  unique id, every split shuffled (seeded)."""
  rng = random.Random(seed)
  splits: dict[str, list[dict]] = {"train": [], "dev": []}
  seen = set()
  for source, text in roles_tagging.documents(corpus):
    split = docs_retrieval.split_of(source, dev_percent, test_percent)
    for paragraph in docs_sections.prose_paragraphs(text, max_chars=max_chars):
      if paragraph in seen:
        continue  # a paragraph repeated in the docs is asked about once
      seen.add(paragraph)
      qas = paragraph_questions(paragraph, rng, per_paragraph)
      if qas:
        splits["train" if split == "train" else "dev"].append(
            {"title": source, "context": paragraph, "qas": qas})
  for name, entries in splits.items():
    rng.shuffle(entries)
    for n, entry in enumerate(entries):
      for k, qa in enumerate(entry["qas"]):
        qa["id"] = f"{name}-{n}-{k}"
  return splits


def cut(entries: list[dict], questions: int) -> list[dict]:
  """The first entries holding `questions` questions in all (the last one trimmed)."""
  out, left = [], questions
  for entry in entries:
    if left <= 0:
      break
    out.append({**entry, "qas": entry["qas"][:left]})
    left -= len(out[-1]["qas"])
  return out


def write(out_dir: str, splits: dict[str, list[dict]], counts: dict[str, int]) -> dict:
  """DIR/{train,dev}.json with counts[split] questions each; returns counts.json's content."""
  os.makedirs(out_dir, exist_ok=True)
  summary = {}
  for name, entries in splits.items():
    kept = cut(entries, counts[name])
    data = [{"title": e["title"], "paragraphs": [{"context": e["context"], "qas": e["qas"]}]}
            for e in kept]
    with open(os.path.join(out_dir, f"{name}.json"), "w", encoding="utf-8") as f:
      json.dump({"version": "1.1", "data": data}, f, ensure_ascii=False)
    summary[name] = {"questions": sum(len(e["qas"]) for e in kept), "paragraphs": len(kept),
                     "documents": len({e["title"] for e in kept}),
                     "available_questions": sum(len(e["qas"]) for e in entries)}
  with open(os.path.join(out_dir, "counts.json"), "w", encoding="utf-8") as f:
    json.dump(summary, f, indent=1)
  return summary


def define_flags() -> None:
  """The set's flags (also bf16_accuracy's; the corpus and split flags may be defined there)."""
  flags.DEFINE_integer("train_questions", 5000, "Training questions at most.")
  flags.DEFINE_integer("dev_questions", 500, "Dev questions at most.")
  flags.DEFINE_integer("per_paragraph", 2, "Questions per paragraph at most.")
  flags.DEFINE_integer("max_chars", 450, "Longest context paragraph, in characters.")


FLAGS = flags.FLAGS


def build_from_flags(out_dir: str) -> dict:
  """`build` + `write` with the flags; returns the counts."""
  splits = build(FLAGS.corpus, FLAGS.dev_percent, FLAGS.test_percent, FLAGS.per_paragraph,
                 FLAGS.max_chars, FLAGS.seed)
  return write(out_dir, splits, {"train": FLAGS.train_questions, "dev": FLAGS.dev_questions})


def main(argv):
  del argv
  print(json.dumps(build_from_flags(FLAGS.output_dir)))


if __name__ == "__main__":
  define_flags()
  commands.define_corpus_flags(dev_percent=10, test_percent=15)
  flags.DEFINE_integer("seed", 0, "Seed of the picking and shuffling.")
  flags.DEFINE_string("output_dir", None, "Where train.json, dev.json, counts.json go.")
  flags.mark_flag_as_required("output_dir")
  app.run(main)
