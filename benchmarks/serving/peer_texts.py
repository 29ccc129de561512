"""The texts benchmarks/serving/vs_peers.py sends to every side, and the vocabulary of its
random-weight `base` model: both from the Python documentation corpus (../shared/corpora/
python-docs.jsonl.gz, text the repository does not hold), split by document.

  train documents (80%):    their prose sentences train an --vocab_size byte-level BPE
                            (data_prep.train_tokenizer), cached as WORK/vocab;
  held-out documents (20%): "short" texts, one sentence of 10-14 tokens, and "long" texts, a
                            paragraph cut at a word boundary to 110-118 tokens; in each, one
                            word (3+ letters, not the first) replaced by `<mask>`.

Token counts are the vocabulary's own (no <s> </s>). No TF or torch here (tokenizers only).
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re

from benchmarks.common import commands
from benchmarks.tasks import docs_retrieval

SHORT_TOKENS = (10, 14)  # inclusive range, without <s> </s>
LONG_TOKENS = (110, 118)
_WORD = re.compile(r"(?<=\s)[A-Za-z]{3,}(?=[\s.,;:!?)])")
HELD_OUT_PERCENT = 20


def paragraphs(corpus: str) -> dict[str, list[str]]:
  """{"train" | "held_out": prose paragraphs} of the docs corpus (docs_retrieval's parsing:
  markup stripped; API summaries and prose blocks), split by source document."""
  out = {"train": [], "held_out": []}
  seen = set()
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    for line in f:
      doc = json.loads(line)
      split = ("held_out" if docs_retrieval.split_of(doc["source"], HELD_OUT_PERCENT, 0) == "dev"
               else "train")
      for e in docs_retrieval.entries(doc["source"], doc["text"], max_words=400):
        text = f"{e.query} {e.text}"
        if text not in seen:
          seen.add(text)
          out[split].append(text)
  return out


def train_vocab(work: str, train_paragraphs: list[str], vocab_size: int) -> str:
  """WORK/vocab: vocab.json + merges.txt trained on the paragraphs' sentences (cached)."""
  vocab_dir = os.path.join(work, "vocab")
  if os.path.isfile(os.path.join(vocab_dir, "vocab.json")):
    return vocab_dir
  os.makedirs(work, exist_ok=True)
  text = os.path.join(work, "vocab_train.txt")
  with open(text, "w", encoding="utf-8") as f:  # .txt: a sentence a line, blank line per doc
    for p in train_paragraphs:
      f.write("\n".join(docs_retrieval.sentences(p)) + "\n\n")
  commands.run_module(["data_prep.train_tokenizer", f"--input={text}",
                       f"--vocab_size={vocab_size}", f"--output_dir={vocab_dir}",
                       "--noprogress"], os.path.join(work, "train_tokenizer.log"), timed=True)
  return vocab_dir


def _tokenizer(vocab_dir: str):
  from tokenizers import ByteLevelBPETokenizer  # pylint: disable=import-outside-toplevel
  tok = ByteLevelBPETokenizer(os.path.join(vocab_dir, "vocab.json"),
                              os.path.join(vocab_dir, "merges.txt"))
  tok.add_special_tokens(["<mask>"])  # one token, as every side's tokenizer has it
  return tok


def _masked(text: str, rng: random.Random) -> str | None:
  words = list(_WORD.finditer(text))
  if not words:
    return None
  m = rng.choice(words)
  return text[:m.start()] + "<mask>" + text[m.end():]


def _long_prefix(paragraph: str, count) -> str | None:
  """The paragraph's longest word prefix of at most LONG_TOKENS[1] tokens, if it has at least
  LONG_TOKENS[0]."""
  words = paragraph.split()
  lo, hi = 1, len(words)
  while lo < hi:  # the most words whose prefix fits (token counts grow with words)
    mid = (lo + hi + 1) // 2
    lo, hi = (mid, hi) if count(" ".join(words[:mid])) <= LONG_TOKENS[1] else (lo, mid - 1)
  prefix = " ".join(words[:lo])
  return prefix if count(prefix) >= LONG_TOKENS[0] else None


def held_out_texts(held_out: list[str], vocab_dir: str, count: int, least: int,
                   seed: int = 0) -> dict[str, list[str]]:
  """{"short": [texts], "long": [texts]}, up to `count` of each, each with one `<mask>`.

  Raises:
    ValueError: the held-out paragraphs give fewer than `least` texts of a kind.
  """
  tok = _tokenizer(vocab_dir)
  n_tokens = lambda s: len(tok.encode(s).ids)
  rng = random.Random(seed)
  order = list(held_out)
  rng.shuffle(order)
  short, long = [], []
  for p in order:
    if len(long) < count and (prefix := _long_prefix(p, n_tokens)) and (
        text := _masked(prefix, rng)):
      long.append(text)
    for s in docs_retrieval.sentences(p):
      if len(short) < count and SHORT_TOKENS[0] <= n_tokens(s) <= SHORT_TOKENS[1] and (
          text := _masked(s, rng)):
        short.append(text)
  out = {"short": short, "long": long}
  for kind, texts in out.items():
    if len(texts) < least:
      raise ValueError(f"only {len(texts)} held-out {kind} texts, {least} needed")
  return out


def mean_tokens(texts: list[str], vocab_dir: str) -> float:
  """Mean tokens per text with <s> </s> (what each side's model sees)."""
  tok = _tokenizer(vocab_dir)
  return sum(len(tok.encode(t).ids) + 2 for t in texts) / len(texts)
