"""A small task that asks for knowledge of English, not of topic words: is a sentence's word
order intact, or were two of its words swapped? (An acceptability judgement, like CoLA's.)

Used by benchmarks/finetune_word_order.py. The docs-sections task (which Python-docs section a
paragraph comes from) is solved largely from topic words, which a random-init model also picks up
from 300 examples; word order is not in the words themselves, so this task shows what the
pretraining learned about the language.

Sentences come from the docs-sections paragraphs (tests/testdata/docs_sections): dev sentences
only from its dev paragraphs, which the pretraining corpus leaves out
(`docs_sections.pretraining_documents`), train sentences from its train paragraphs. Each
sentence appears once, intact or with two distinct words (not the first) swapped -- half of
each split's sentences, picked at random -- so no pair of an intact and a swapped copy shows the
answer and a constant guess scores 0.5.
"""

from __future__ import annotations

import json
import random
import re

LABELS = ("intact", "swapped")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


def sentences(paragraph: str, min_words: int = 8, max_words: int = 40) -> list[str]:
  """The paragraph's sentences of min_words..max_words words (split after . ! ? + capital)."""
  return [s.strip() for s in _SENTENCE_END.split(paragraph)
          if min_words <= len(s.split()) <= max_words]


def swap_two_words(sentence: str, rng: random.Random) -> str:
  """The sentence with two distinct words (positions 1.., the first word kept) exchanged."""
  words = sentence.split()
  for _ in range(100):
    i, j = sorted(rng.sample(range(1, len(words)), 2))
    if words[i] != words[j]:
      words[i], words[j] = words[j], words[i]
      return " ".join(words)
  raise ValueError(f"no two distinct words to swap in {sentence!r}")


def examples(paragraphs: list[str], seed: int) -> list[dict]:
  """{"text", "label"} rows: every sentence of `paragraphs` once, a random half of them (seeded)
  with two words swapped, shuffled."""
  rng = random.Random(seed)
  pool = [s for p in paragraphs for s in sentences(p)]
  rng.shuffle(pool)
  rows = [{"text": swap_two_words(s, rng) if i % 2 else s, "label": LABELS[i % 2]}
          for i, s in enumerate(pool)]
  rng.shuffle(rows)
  return rows


def read_paragraphs(path: str) -> list[str]:
  with open(path, encoding="utf-8") as f:
    return [json.loads(line)["text"] for line in f if line.strip()]
