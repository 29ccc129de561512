r"""A retrieval set from real text: the Python docs' one-line summaries and what follows them.

    python -m benchmarks.tasks.docs_retrieval --output_dir=DIR \
        [--corpus=../shared/corpora/python-docs.jsonl.gz] [--train_pairs=4000] \
        [--dev_queries=300] [--test_queries=500] [--dev_percent=10] [--test_percent=15] \
        [--seed=0]

An entry is a piece of the docs that opens with a summary sentence:
- an API description (`.. function::`, `.. method::`, `.. class::`, `.. c:function::`, ...):
  the query is the first sentence of its body ("Serialize *obj* as a JSON formatted stream to
  *fp* ..."), the passage its signature as the title ("json.dump(obj, fp, *, skipkeys=False,
  ...)") and the rest of the body as the text;
- a prose paragraph of at least two sentences outside those: the query is its first sentence,
  the passage the document's title and the paragraph's other sentences.
So the query is never inside its passage: a model has to match a summary to the details that
follow it (and the name it belongs to). Text is markup-stripped (roles show their text,
``literals`` and *emphasis* lose their marks, links their targets); code blocks, doctests,
nested directives (notes, version changes), lists and tables are dropped; a passage keeps at
most --max_words words. An entry whose query or passage text occurs twice in the docs is
dropped (ambiguous).

Splits are by document (a hash of its `source`): --dev_percent and --test_percent of the
documents give the dev and test sets, the rest the training pairs, so no held-out passage is
trained on (and the benchmark's pretraining reads the train documents only). Written:
  DIR/train.jsonl          {"anchor": query, "positive": title + " " + text, "negative":
                           another passage of the same document (else of another one)}
  DIR/{dev,test}/          BEIR's layout: corpus.jsonl ({"_id", "title", "text"}: every
                           passage of the split's documents), queries.jsonl ({"_id", "text"}:
                           --dev_queries / --test_queries of them, sampled), qrels/dev.tsv
                           (query-id, corpus-id, 1: the file name
                           roberta_tf/finetuning/embedding/embed_data.read_beir reads, in both)
  DIR/counts.json          the sizes
Deterministic for a given corpus and flags.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import hashlib
import json
import os
import random
import re

from absl import app, flags

from benchmarks.common import commands

# Directives that describe one API object: the body's first sentence is its summary.
API_DIRECTIVES = {"function", "method", "class", "exception", "attribute", "data", "decorator",
                  "classmethod", "staticmethod", "abstractmethod", "coroutinefunction",
                  "coroutinemethod", "awaitablefunction", "opcode", "cmdoption", "envvar",
                  "describe", "c:function", "c:member", "c:type", "c:var", "c:macro",
                  "c:struct"}
_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+(?:py:)?([\w:-]+)::\s*(.*)$")
_UNDERLINE = re.compile(r"([=\-~^\"'*#+`:._])\1{2,}\s*")
_MARKUP_START = ("..", "*", "-", "+", "|", "=", ">>>", "#", ":", "`", "(")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_ABBREVIATIONS = ("e.g.", "i.e.", "etc.", "vs.", "Mr.", "Dr.", "approx.")


@dataclasses.dataclass(frozen=True)
class Entry:
  source: str
  query: str
  title: str
  text: str


def strip_markup(text: str) -> str:
  """reST inline markup -> the text Sphinx displays: `:role:\\`~a.b\\`` -> "b", `title <t>`
  -> "title", ``code`` -> code, *emph* / **strong** -> their words, `link <url>`_ -> link."""
  def role(m: re.Match) -> str:
    body = m.group(1)
    shown = re.match(r"(.*?)\s*<[^>]*>$", body, re.S)
    if shown and shown.group(1):
      return shown.group(1)
    body = body.lstrip("!")
    return body.rsplit(".", 1)[-1] if body.startswith("~") else body
  text = re.sub(r":[\w:+-]+:`([^`]*)`", role, text)
  text = re.sub(r"`([^`<]*?)\s*<[^>]*>`_{1,2}", r"\1", text)
  text = re.sub(r"``([^`]*)``", r"\1", text)
  text = re.sub(r"`([^`]*)`_{0,2}", r"\1", text)
  text = re.sub(r"\[#[^\]]*\]_|\[\d+\]_", "", text)
  text = re.sub(r"\*\*([^*]+)\*\*|\*([^*\s][^*]*)\*", lambda m: m.group(1) or m.group(2), text)
  text = re.sub(r"\|([^|\s][^|]*)\|", r"\1", text).replace("\\ ", "").replace("\\", "")
  return re.sub(r"\s+", " ", text).strip()


def sentences(paragraph: str) -> list[str]:
  """The paragraph split after . ! ? before a capital letter (not after e.g., i.e., etc.)."""
  parts, current = [], ""
  for piece in _SENTENCE_END.split(paragraph):
    current = f"{current} {piece}".strip() if current else piece
    if not current.endswith(_ABBREVIATIONS):
      parts.append(current)
      current = ""
  return parts + ([current] if current else [])


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip())


def _prose_blocks(lines: list[str]) -> list[str]:
  """The unindented prose paragraphs of dedented lines (no directives, code, lists, tables,
  headings), each joined into one markup-stripped line; a trailing `::` becomes `:`."""
  out, block = [], []
  for line in [*lines, ""]:
    if line.strip():
      block.append(line)
      continue
    if block and not any(_indent(b) for b in block) and not block[0].startswith(
        _MARKUP_START) and not _UNDERLINE.fullmatch(block[-1].strip()):
      text = " ".join(b.strip() for b in block)
      text = strip_markup(text[:-1] if text.endswith("::") else text)
      if text and sum(c.isalpha() for c in text) > 0.5 * len(text):
        out.append(text)
    block = []
  return out


def _directive_body(lines: list[str], start: int) -> tuple[list[str], int]:
  """The body of the directive on lines[start], dedented, and the index of the first line
  after it. Its header (more signatures, a long one's continuation lines, :options:) ends at
  the first blank line: reST wants one before a directive's content."""
  own = _indent(lines[start])
  end = start + 1
  while end < len(lines) and (not lines[end].strip() or _indent(lines[end]) > own):
    end += 1
  body = lines[start + 1:end]
  while body and body[0].strip():
    body = body[1:]
  depth = min((_indent(b) for b in body if b.strip()), default=0)
  return [b[depth:] for b in body], end


def _entry(source: str, title: str, paragraphs: list[str], max_words: int) -> Entry | None:
  if not paragraphs:
    return None
  first = sentences(paragraphs[0])
  query, rest = first[0], " ".join(first[1:] + paragraphs[1:])
  words = rest.split()
  if not 4 <= len(query.split()) <= 40 or len(words) < 8:
    return None
  return Entry(source, query, title, " ".join(words[:max_words]))


def entries(source: str, text: str, max_words: int = 120, prose: bool = True) -> list[Entry]:
  """The document's entries (see the module docstring), in document order; `prose`: also its
  paragraphs outside API descriptions."""
  lines = text.split("\n")
  heading = next((strip_markup(lines[i - 1]) for i in range(1, len(lines))
                  if _UNDERLINE.fullmatch(lines[i].strip()) and lines[i - 1].strip()), "")
  found, outside, i = [], [], 0
  while i < len(lines):
    m = _DIRECTIVE.match(lines[i])
    if m and m.group(2) in API_DIRECTIVES:
      signature = m.group(3).rstrip("\\").strip()
      body, end = _directive_body(lines, i)
      found.append(_entry(source, re.sub(r"\s+", " ", signature), _prose_blocks(body), max_words))
      # Nested API directives (a class's methods) are scanned too.
      found += entries(source, "\n".join(body), max_words, prose=False)
      i = end
      continue
    outside.append(lines[i])
    i += 1
  for paragraph in _prose_blocks(outside) if prose else ():
    if len(sentences(paragraph)) >= 2:
      found.append(_entry(source, heading, [paragraph], max_words))
  return [e for e in found if e is not None]


def split_of(source: str, dev_percent: int, test_percent: int) -> str:
  bucket = int(hashlib.sha256(source.encode()).hexdigest(), 16) % 100
  return "dev" if bucket < dev_percent else (
      "test" if bucket < dev_percent + test_percent else "train")


def build(corpus: str, dev_percent: int, test_percent: int,
          max_words: int = 120) -> dict[str, list[Entry]]:
  """{"train" | "dev" | "test": entries}, each split from its own documents; entries whose
  query or passage occurs twice anywhere are dropped."""
  found = []
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    for line in f:
      doc = json.loads(line)
      found += entries(doc["source"], doc["text"], max_words)
  queries = collections.Counter(e.query for e in found)
  passages = collections.Counter((e.title, e.text) for e in found)
  splits = {"train": [], "dev": [], "test": []}
  for e in found:
    if queries[e.query] == 1 and passages[(e.title, e.text)] == 1:
      splits[split_of(e.source, dev_percent, test_percent)].append(e)
  return splits


def _passage(e: Entry) -> str:
  return f"{e.title} {e.text}".strip()  # read_beir's join of title and text


def write_train(path: str, pool: list[Entry], count: int, rng: random.Random) -> int:
  """`count` sampled training rows with a hard negative each; returns how many."""
  by_doc = collections.defaultdict(list)
  for e in pool:
    by_doc[e.source].append(e)
  picked = rng.sample(pool, min(count, len(pool)))
  with open(path, "w", encoding="utf-8") as f:
    for e in picked:
      others = [o for o in by_doc[e.source] if o is not e] or [o for o in pool if o is not e]
      f.write(json.dumps({"anchor": e.query, "positive": _passage(e),
                          "negative": _passage(rng.choice(others))}, ensure_ascii=False) + "\n")
  return len(picked)


def write_beir(directory: str, pool: list[Entry], queries: int, rng: random.Random) -> dict:
  """BEIR's files for a held-out split: every passage in the corpus, `queries` of them asked."""
  os.makedirs(os.path.join(directory, "qrels"), exist_ok=True)
  with open(os.path.join(directory, "corpus.jsonl"), "w", encoding="utf-8") as f:
    for i, e in enumerate(pool):
      f.write(json.dumps({"_id": f"d{i}", "title": e.title, "text": e.text},
                         ensure_ascii=False) + "\n")
  asked = sorted(rng.sample(range(len(pool)), min(queries, len(pool))))
  with open(os.path.join(directory, "queries.jsonl"), "w", encoding="utf-8") as f:
    for i in asked:
      f.write(json.dumps({"_id": f"q{i}", "text": pool[i].query}, ensure_ascii=False) + "\n")
  with open(os.path.join(directory, "qrels", "dev.tsv"), "w", encoding="utf-8") as f:
    f.write("query-id\tcorpus-id\tscore\n")
    f.writelines(f"q{i}\td{i}\t1\n" for i in asked)
  return {"corpus": len(pool), "queries": len(asked),
          "documents": len({e.source for e in pool})}


def write(out_dir: str, splits: dict[str, list[Entry]], train_pairs: int, dev_queries: int,
          test_queries: int, seed: int = 0) -> dict:
  """The set's files (see the module docstring); returns counts.json's content."""
  rng = random.Random(seed)
  os.makedirs(out_dir, exist_ok=True)
  counts = {"train": {"pairs": write_train(os.path.join(out_dir, "train.jsonl"),
                                           splits["train"], train_pairs, rng),
                      "available": len(splits["train"]),
                      "documents": len({e.source for e in splits["train"]})}}
  for name, queries in (("dev", dev_queries), ("test", test_queries)):
    counts[name] = write_beir(os.path.join(out_dir, name), splits[name], queries, rng)
  with open(os.path.join(out_dir, "counts.json"), "w", encoding="utf-8") as f:
    json.dump(counts, f, indent=1)
  return counts


def define_flags() -> None:
  """The set's flags (also the drivers': embedding_vs_st.py)."""
  commands.define_corpus_flags(dev_percent=10, test_percent=15)
  flags.DEFINE_integer("train_pairs", 4000, "Training pairs (sampled from the train documents).")
  for split, most in (("dev", 300), ("test", 500)):
    flags.DEFINE_integer(f"{split}_queries", most, f"{split.capitalize()} queries (sampled; the "
                         "corpus has all passages).")
  flags.DEFINE_integer("max_words", 120, "Words kept of a passage's text.")
  flags.DEFINE_integer("data_seed", 0, "Seed of the sampling.")


def build_from_flags(out_dir: str) -> dict:
  FLAGS = flags.FLAGS  # pylint: disable=invalid-name
  splits = build(FLAGS.corpus, FLAGS.dev_percent, FLAGS.test_percent, FLAGS.max_words)
  return write(out_dir, splits, FLAGS.train_pairs, FLAGS.dev_queries, FLAGS.test_queries,
               FLAGS.data_seed)


def main(argv):
  del argv
  print(json.dumps(build_from_flags(flags.FLAGS.output_dir)))


if __name__ == "__main__":
  define_flags()
  flags.DEFINE_string("output_dir", None, "Where the set is written.")
  flags.mark_flag_as_required("output_dir")
  app.run(main)
