r"""A real-text classification task: which part of the Python docs a paragraph comes from.

    python -m roberta_tf.finetuning.docs_sections \
        --corpus=../shared/corpora/python-docs.jsonl.gz --output_dir=DIR \
        [--train_per_class=60] [--dev_per_class=30] [--seed=0]

The corpus has one `{"text", "source"}` object per document, source like
"python-3.11-docs/library/os.rst.txt"; the label is the top-level section (library, c-api,
reference, tutorial, howto). Prose paragraphs only (no headings, directives, code, lists or
tables). Paragraphs are sampled per section and split at random between train and dev (a dev
paragraph may share a page with training ones: splitting by page instead leaves too little in
common between the splits for 60 examples a class to learn -- naive Bayes scores 0.29 there,
0.63 here). Writes DIR/train.jsonl and DIR/dev.jsonl ({"text", "label", "source"}).
Pretraining for this task must not see the dev paragraphs: `pretraining_documents`.
"""

from __future__ import annotations

import dataclasses
import gzip
import io
import json
import random
import re
from collections.abc import Iterator

from roberta_tf.common import atomic_write, cli, files, options
from roberta_tf.common.options import option

SECTIONS = ("library", "c-api", "reference", "tutorial", "howto")
_BLANK = re.compile(r"\n\s*\n")
_MARKUP_START = ("..", "*", "-", "+", "|", "=", ">>>", "#", ":", "`")


def section_of(source: str) -> str | None:
  """"python-3.11-docs/library/os.rst.txt" -> "library"; None outside SECTIONS."""
  parts = source.split("/")
  return parts[1] if len(parts) > 2 and parts[1] in SECTIONS else None


def prose_paragraphs(text: str, min_chars: int = 120, max_chars: int = 600) -> Iterator[str]:
  """The document's prose paragraphs, each on one line: unindented blocks of sentences that are
  not headings, directives, lists, tables or code, between min_chars and max_chars long."""
  for block in _BLANK.split(text):
    lines = block.split("\n")
    if not lines or any(not line.strip() or line[:1].isspace() for line in lines):
      continue  # indented: code, quotes, directive bodies
    if lines[0].lstrip().startswith(_MARKUP_START) or re.fullmatch(r"[=\-~^\"'*#+]{3,}",
                                                                     lines[-1].strip()):
      continue  # markup or a heading's underline
    paragraph = " ".join(line.strip() for line in lines)
    letters = sum(c.isalpha() for c in paragraph)
    if (min_chars <= len(paragraph) <= max_chars and letters > 0.6 * len(paragraph)
        and paragraph[0].isalpha() and paragraph.rstrip()[-1] in ".:)"):
      yield paragraph


def _read(corpus: str) -> Iterator[dict]:
  with files.open(corpus, "rb") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
    for line in io.TextIOWrapper(unzipped, encoding="utf-8"):
      yield json.loads(line)


def build(corpus: str, train_per_class: int = 60, dev_per_class: int = 30,
          seed: int = 0) -> tuple[list[dict], list[dict]]:
  """(train, dev) rows {"text", "label", "source"}, balanced per class, shuffled.

  Each section's prose paragraphs (from all its pages) are sampled without replacement (seeded):
  the first train_per_class go to train, the next dev_per_class to dev.
  """
  pools: dict[str, list[tuple[str, str]]] = {s: [] for s in SECTIONS}
  for doc in _read(corpus):
    label = section_of(doc.get("source", ""))
    if label:
      pools[label].extend((doc["source"], p) for p in prose_paragraphs(doc["text"]))
  rng = random.Random(seed)
  train, dev = [], []
  for label in SECTIONS:
    unique = sorted(set(pools[label]))
    if len(unique) < train_per_class + dev_per_class:
      raise ValueError(f"section {label!r} has only {len(unique)} paragraphs")
    picked = rng.sample(unique, train_per_class + dev_per_class)
    train += [{"text": p, "label": label, "source": s} for s, p in picked[:train_per_class]]
    dev += [{"text": p, "label": label, "source": s} for s, p in picked[train_per_class:]]
  rng.shuffle(train)
  rng.shuffle(dev)
  return train, dev


def pretraining_documents(corpus: str, exclude: set[str]) -> Iterator[str]:
  """The corpus's documents with the paragraphs in `exclude` (as prose_paragraphs gives them)
  cut out: pretraining text that never shows the model a dev paragraph."""
  for doc in _read(corpus):
    blocks = [b for b in _BLANK.split(doc["text"])
              if " ".join(line.strip() for line in b.split("\n")) not in exclude]
    yield "\n\n".join(blocks)


def write_jsonl(path: str, rows: list[dict]) -> None:
  with atomic_write.atomic_file(path) as f:
    for row in rows:
      f.write(json.dumps(row, ensure_ascii=False) + "\n")


@dataclasses.dataclass(frozen=True)
class DocsSectionsSettings:
  """docs_sections' flags."""
  corpus: str = option(
      help="The docs corpus: JSONL of {\"text\", \"source\"} (e.g. the project's "
      "../shared/corpora/python-docs.jsonl.gz).", path=True)
  output_dir: str = option(help="Where train.jsonl and dev.jsonl go.", path=True)
  train_per_class: int = option(60, "Training paragraphs per section.")
  dev_per_class: int = option(30, "Dev paragraphs per section.")
  seed: int = option(0, "Seed of the document split and the sampling.")


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(DocsSectionsSettings, FLAGS)


def main(argv):
  del argv
  s = options.from_flags(DocsSectionsSettings, FLAGS)
  train, dev = build(s.corpus, s.train_per_class, s.dev_per_class, seed=s.seed)
  files.makedirs(s.output_dir)
  write_jsonl(files.join(s.output_dir, "train.jsonl"), train)
  write_jsonl(files.join(s.output_dir, "dev.jsonl"), dev)
  print(f"wrote {len(train)} train and {len(dev)} dev paragraphs to {s.output_dir}")


if __name__ == "__main__":
  cli.run(main, FLAGS)
