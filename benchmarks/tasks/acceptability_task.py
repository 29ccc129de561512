"""Acceptability: is a sentence as written, or was it corrupted? (CoLA-like.) Used by
benchmarks/finetuning/acceptability_gain.py.

The docs-sections task (which Python-docs section a paragraph comes from) is solved largely from
topic words, which a random-init model also picks up from 300 examples. A corruption here leaves
the words' distribution alone, so only what a model knows about English tells the classes apart:
- `swap`: two distinct words (not the first) trade places (word_order_task.py's task);
- `replace`: two words (not the first) are replaced by words drawn from the split's other
  sentences, so a corrupted sentence holds no rarer words than an intact one.

Sentences come from the docs-sections paragraphs as in word_order_task.py: dev sentences only
from its dev paragraphs, which the pretraining corpus leaves out; each sentence once, a random
half of each split corrupted, so a constant guess scores 0.5.
"""

from __future__ import annotations

import random

from benchmarks.tasks.word_order_task import read_paragraphs, sentences, swap_two_words

__all__ = ["CORRUPTIONS", "LABELS", "examples", "read_paragraphs", "replace_two_words"]

LABELS = ("intact", "corrupted")
CORRUPTIONS = ("swap", "replace")


def replace_two_words(sentence: str, rng: random.Random, vocabulary: list[str]) -> str:
  """The sentence with two words (positions 1..) replaced by other words from `vocabulary`."""
  words = sentence.split()
  for i in rng.sample(range(1, len(words)), 2):
    word = words[i]
    while word == words[i]:
      word = rng.choice(vocabulary)
    words[i] = word
  return " ".join(words)


def examples(paragraphs: list[str], seed: int, corruption: str) -> list[dict]:
  """{"text", "label"} rows: every sentence of `paragraphs` once, a random half of them (seeded)
  corrupted by `corruption`, shuffled."""
  if corruption not in CORRUPTIONS:
    raise ValueError(f"corruption {corruption!r} is not one of {CORRUPTIONS}")
  rng = random.Random(seed)
  pool = [s for p in paragraphs for s in sentences(p)]
  vocabulary = [w for s in pool for w in s.split()[1:]]
  rng.shuffle(pool)
  rows = []
  for i, sentence in enumerate(pool):
    if i % 2:
      sentence = (swap_two_words(sentence, rng) if corruption == "swap"
                  else replace_two_words(sentence, rng, vocabulary))
    rows.append({"text": sentence, "label": LABELS[i % 2]})
  rng.shuffle(rows)
  return rows
