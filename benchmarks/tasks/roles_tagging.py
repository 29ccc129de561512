r"""A named-entity tagging set from real text: the Sphinx roles of the Python docs.

    python -m benchmarks.tasks.roles_tagging --output_dir=DIR \
        [--corpus=../shared/corpora/python-docs.jsonl.gz] [--train_sentences=4000] \
        [--dev_sentences=800] [--test_sentences=800] [--min_words=4] [--max_words=80] \
        [--no_entity_share=0.1] [--dev_percent=15] [--test_percent=15] [--seed=0] \
        [--vocab_dir=DIR --max_pieces=126]

The docs' authors mark Python objects with roles -- :func:`open`, :class:`~io.TextIOWrapper`,
:exc:`ValueError` -- which makes a hand-labelled NER set: each role becomes the words Sphinx
displays (`~a.b.c` shows `c`; `title <target>` shows `title`; a leading `!` is dropped; `()`
stays as written), tagged B-TYPE / I-TYPE (IOB2) with TYPE one of FUNC CLASS METH MOD EXC ATTR
CONST DATA. Every other word is O: other roles (:c:func:, :ref:, :term:, ...), ``literals``
(backticks removed), *emphasis*, links, plain text -- including names the authors left unmarked,
which is the set's label noise.

Text: prose paragraphs only (directive bodies such as a function's description count; code
blocks, `::` literal blocks, doctests, tables, headings, comments, field lists are dropped),
split into sentences after `.` `!` `?`; punctuation at a word's ends is split off as its own
word (as CoNLL-2003 does). A sentence is kept when it has min_words..max_words words and ends
in . ! ? or :. Splits are by document (a hash of its `source`), so no document gives sentences
to two splits. A sentence repeated in the docs is kept once; dev and test leave out any that
train has, and any with a tag the train file lacks (a rare I- tag: it could not be learned).
Each split keeps sentences with an entity plus --no_entity_share without, shuffled (seeded),
up to its cap. Files: DIR/{train,dev,test}.conll, `word TAG` per line, a blank line after each
sentence. Deterministic for a given corpus and flags.
"""

from __future__ import annotations

import collections
import gzip
import hashlib
import json
import os
import random
import re
from collections.abc import Callable, Iterator

from absl import app, flags

from benchmarks.common import commands

TYPES = {"func": "FUNC", "class": "CLASS", "meth": "METH", "mod": "MOD", "exc": "EXC",
         "attr": "ATTR", "const": "CONST", "data": "DATA"}
SPLITS = ("train", "dev", "test")
# Directives whose body is prose (an object's description, a note): their text is kept, the
# directive line and its options are not. Any other directive's body (code, index entries,
# tables, toctrees, comments) is dropped.
PROSE_DIRECTIVES = {"function", "method", "class", "exception", "attribute", "data", "module",
                    "classmethod", "staticmethod", "decorator", "decoratormethod", "opcode",
                    "note", "warning", "seealso", "versionadded", "versionchanged",
                    "deprecated", "deprecated-removed", "impl-detail", "describe", "cmdoption",
                    "option", "envvar", "abstractmethod", "coroutinefunction",
                    "coroutinemethod", "awaitablefunction", "awaitablemethod", "tip",
                    "important", "caution", "attention", "hint", "admonition", "topic"}
_UNDERLINE = re.compile(r"([=\-~^\"'*#+`:._])\1{2,}")
_SIMPLE_TABLE = re.compile(r"=+(\s+=+)+")
_BULLET = re.compile(r"([*\-+\u2022]|#\.|\d+\.|\(?[a-zA-Z0-9]\))\s+")
_FIELD = re.compile(r":[^:`]+:(\s|$)")
_DIRECTIVE = re.compile(r"\.\.\s+([\w:-]+)::")
_INLINE = re.compile(
    r"(?::(?P<domain>[\w-]+))?:(?P<role>[\w-]+):`(?P<role_text>[^`]+)`"
    r"|``(?P<literal>.+?)``"
    r"|`(?P<link>[^`]+)`_{1,2}"
    r"|`(?P<default>[^`]+)`"
    r"|\*\*(?P<strong>[^*]+)\*\*"
    r"|\*(?P<emph>[^*\s][^*]*)\*"
    r"|\|(?P<subst>[^|\s][^|]*)\|_{0,2}")
_OPENING, _CLOSING = "([{\"'", ".,;:!?)]}\"'"
_ENDS = {".", "!", "?"}
# "e.g. :func:`f`" must not end a sentence before the entity.
_ABBREVIATIONS = {"e.g", "i.e", "etc", "vs", "cf", "Mr", "Dr", "approx", "resp", "incl"}


def _flush(block: list[str]) -> str:
  """The block's lines as one paragraph, a closing `::` shown as Sphinx shows it."""
  text = " ".join(block).strip()
  if text.endswith("::"):
    text = text[:-2].rstrip() + (":" if not text[:-2].endswith(" ") else "")
  return text


def _markup(stripped: str) -> bool:
  """A line that is no prose: a heading's underline or overline, a table row or border, a
  doctest, a field list entry."""
  return bool(_UNDERLINE.fullmatch(stripped) or _SIMPLE_TABLE.fullmatch(stripped)
              or stripped[0] in "+|" or stripped.startswith(">>>") or _FIELD.match(stripped))


def paragraphs(text: str) -> Iterator[str]:
  """The prose paragraphs of one reST document, each joined onto one line (inline markup
  kept). A paragraph is consecutive lines at one indentation (a list item's text counts from
  after its bullet); a change of indentation or a bullet starts a new one."""
  skip_deeper = None  # drop lines indented deeper than this: a literal or a non-prose body
  block, block_indent, dropping = [], -1, False  # dropping: the rest of this block
  directive_at = None  # a prose directive's indent while its arguments and options are dropped
  for line in text.split("\n") + [""]:
    stripped, indent = line.strip(), len(line) - len(line.lstrip())
    if skip_deeper is not None:
      if not stripped or indent > skip_deeper:
        dropping = dropping and bool(stripped)
        continue
      skip_deeper = None
    if (directive_at is not None and stripped and directive_at < indent <= directive_at + 4
        and not _FIELD.match(stripped)):
      dropping = False  # a body that starts without a blank line (a signature's continuation
      # lines are aligned further in)
    directive_at = directive_at if dropping else None
    bullet = _BULLET.match(stripped)
    if block and (not stripped or bullet or indent != block_indent
                  or stripped.startswith("..")):
      if " ".join(block).rstrip().endswith("::"):
        skip_deeper = block_indent  # the literal block that follows
      if _flush(block):
        yield _flush(block)
      block = []
    if not stripped or dropping:
      dropping = dropping and bool(stripped)
      continue
    if stripped.startswith(".."):
      directive = _DIRECTIVE.match(stripped)
      if not directive or directive.group(1).rpartition(":")[2] not in PROSE_DIRECTIVES:
        skip_deeper = indent  # a comment, a target or a non-prose directive: its body too
      dropping, directive_at = True, indent  # the directive's arguments and options
    elif _markup(stripped):
      block, dropping = [], True  # a heading's underline drops its title line too
    else:
      if not block:
        block_indent = indent + (bullet.end() if bullet else 0)
        stripped = stripped[bullet.end():] if bullet else stripped
      block.append(stripped)


def _split_punctuation(word: str) -> list[str]:
  """`(see` -> `(`, `see`; `semantics.),` -> `semantics`, `.`, `)`, `,`."""
  head, tail = [], []
  while word and word[0] in _OPENING:
    head.append(word[0])
    word = word[1:]
  while word and word[-1] in _CLOSING:
    tail.insert(0, word[-1])
    word = word[:-1]
  return head + ([word] if word else []) + tail


def role_display(content: str) -> str:
  """What Sphinx shows for a role's content: `title <target>` -> title, `~a.b.c` -> c, a
  leading `!` dropped."""
  titled = re.fullmatch(r"(.*?)\s*<([^<>]+)>", content, re.S)
  if titled and titled.group(1):
    return titled.group(1)
  content = content.lstrip("!")
  if content.startswith("~"):
    return content[1:].rsplit(".", 1)[-1]
  return content


def _plain(text: str) -> list[str]:
  text = re.sub(r"\\ ", "", text).replace("\\", "")  # reST escapes: `\ ` joins, `\*` is `*`
  return [piece for word in text.split() for piece in _split_punctuation(word)]


def tagged_words(paragraph: str) -> list[tuple[str, str]]:
  """(word, IOB2 tag) for one paragraph: entity roles become tagged words, other markup O."""
  words, at = [], 0
  for match in _INLINE.finditer(paragraph):
    words += [(w, "O") for w in _plain(paragraph[at:match.start()])]
    at = match.end()
    role = match.group("role")
    if role is not None:
      shown = role_display(match.group("role_text")).replace("\\", "").split()
      kind = TYPES.get(role) if match.group("domain") in (None, "py") else None
      if role in ("pep", "rfc") and shown:
        shown = [role.upper(), *shown]
      words += [(w, "O" if not kind else ("B-" if i == 0 else "I-") + kind)
                for i, w in enumerate(shown)]
    elif match.group("literal") is not None:
      words += [(w, "O") for w in match.group("literal").split()]
    else:
      shown = next(g for g in match.groups()[4:] if g is not None)
      words += [(w, "O") for w in _plain(role_display(shown))]
  return words + [(w, "O") for w in _plain(paragraph[at:])]


def sentences(words: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
  """A paragraph's words cut after `.` `!` `?` (tag O) when the next word starts a sentence
  (a capital, or an entity) and the word before is no abbreviation."""
  out, start = [], 0
  for i in range(1, len(words) - 1):
    word, tag = words[i]
    following, following_tag = words[i + 1]
    if (word in _ENDS and tag == "O" and words[i - 1][0] not in _ABBREVIATIONS
        and (following[:1].isupper() or following_tag.startswith("B-"))):
      out.append(words[start:i + 1])
      start = i + 1
  out.append(words[start:])
  return [s for s in out if s]


def split_of(source: str, dev_percent: int, test_percent: int) -> str:
  """train, dev or test for a document, by a hash of its source name (stable across runs)."""
  bucket = int(hashlib.sha256(source.encode("utf-8")).hexdigest(), 16) % 100
  return "dev" if bucket < dev_percent else "test" if bucket < dev_percent + test_percent \
      else "train"


def documents(corpus: str) -> Iterator[tuple[str, str]]:
  """(source, text) of every document of a {"text", "source"} JSONL(.gz) corpus, in order."""
  with (gzip.open if corpus.endswith(".gz") else open)(corpus, "rt", encoding="utf-8") as f:
    for number, line in enumerate(f):
      doc = json.loads(line)
      yield doc.get("source") or f"document-{number}", doc["text"]


def document_sentences(text: str, min_words: int, max_words: int) -> Iterator[tuple]:
  """A document's usable sentences as tuples of (word, tag): min_words..max_words words,
  ending in . ! ? or : (a paragraph cut elsewhere is a heading, a term or a list fragment)."""
  for paragraph in paragraphs(text):
    for sentence in sentences(tagged_words(paragraph)):
      if min_words <= len(sentence) <= max_words and sentence[-1][0] in _ENDS | {":"}:
        yield tuple(sentence)


def _pick(pool: list[tuple], cap: int, no_entity_share: float, rng: random.Random) -> list:
  """Up to `cap` sentences of the pool: those with an entity, and no_entity_share of the
  result without one, shuffled."""
  with_entity = [s for s in pool if any(tag != "O" for _, tag in s)]
  without = [s for s in pool if all(tag == "O" for _, tag in s)]
  rng.shuffle(with_entity)
  rng.shuffle(without)
  taken = with_entity[:round(cap * (1 - no_entity_share))]
  extra = round(len(taken) * no_entity_share / max(1 - no_entity_share, 1e-9))
  picked = taken + without[:min(extra, cap - len(taken))]
  rng.shuffle(picked)
  return picked


def build(corpus: str, caps: dict[str, int], min_words: int = 4, max_words: int = 80,
          no_entity_share: float = 0.1, dev_percent: int = 15, test_percent: int = 15,
          seed: int = 0, keep: Callable[[list[str]], bool] | None = None) -> dict[str, list]:
  """{split: [sentence as a tuple of (word, tag)]} for "train", "dev", "test", each up to
  caps[split] sentences. `keep(words)`: an extra test a sentence must pass (e.g. a length in
  pieces), applied before the caps."""
  pools = {name: {} for name in SPLITS}  # a dict keeps one copy of a repeated sentence, in order
  for source, text in documents(corpus):
    pool = pools[split_of(source, dev_percent, test_percent)]
    for sentence in document_sentences(text, min_words, max_words):
      pool.setdefault(sentence, None)
  seen_in_train = {tuple(w for w, _ in s) for s in pools["train"]}
  rng = random.Random(seed)
  out = {"train": _pick([s for s in pools["train"] if keep is None or keep([w for w, _ in s])],
                        caps["train"], no_entity_share, rng)}
  # A tag that training never shows (a rare I- tag) cannot be learned, and fine-tuning
  # refuses dev/test files with one: such sentences stay out of dev and test.
  train_tags = {tag for s in out["train"] for _, tag in s}
  for name in ("dev", "test"):
    pool = [s for s in pools[name] if tuple(w for w, _ in s) not in seen_in_train
            and {tag for _, tag in s} <= train_tags and (keep is None or keep([w for w, _ in s]))]
    out[name] = _pick(pool, caps[name], no_entity_share, rng)
  return out


def write_conll(path: str, sentences_: list) -> None:
  """`word TAG` lines, a blank line after each sentence."""
  with open(path, "w", encoding="utf-8") as f:
    for sentence in sentences_:
      f.writelines(f"{word} {tag}\n" for word, tag in sentence)
      f.write("\n")


def read_conll(path: str) -> list[tuple[list[str], list[str]]]:
  """(words, tags) per sentence of a CoNLL file: the first column is the word, the last the
  tag; blank lines end sentences; -DOCSTART- lines are skipped."""
  out, words, tags = [], [], []
  with open(path, encoding="utf-8") as f:
    for line in list(f) + [""]:
      fields = line.split()
      if fields and fields[0] != "-DOCSTART-":
        words.append(fields[0])
        tags.append(fields[-1])
      elif not fields and words:
        out.append((words, tags))
        words, tags = [], []
  return out


def entity_counts(sentences_: list) -> collections.Counter:
  """Entities (B- tags) per type."""
  return collections.Counter(tag[2:] for s in sentences_ for _, tag in s if tag.startswith("B-"))


def _roberta_tokenizer(vocab_dir: str):
  from transformers import RobertaTokenizer  # pylint: disable=import-outside-toplevel
  return RobertaTokenizer(vocab=os.path.join(vocab_dir, "vocab.json"),
                          merges=os.path.join(vocab_dir, "merges.txt"), add_prefix_space=True)


def piece_filter(vocab_dir: str, max_pieces: int) -> Callable[[list[str]], bool]:
  """keep(words) for `build`: the sentence fits max_pieces byte-BPE pieces with `<s>` and
  `</s>` (HF's tokenizer, add_prefix_space=True, as RobertaTokenizerFast with
  is_split_into_words=True encodes it: the pieces both sides see)."""
  from transformers import AutoTokenizer  # pylint: disable=import-outside-toplevel
  # A folder's own tokenizer files when it has them (a --to_hf folder), else vocab + merges;
  # transformers 5's RobertaTokenizer reads the file paths from `vocab` and `merges`.
  tokenizer = AutoTokenizer.from_pretrained(vocab_dir, add_prefix_space=True) if os.path.isfile(
      os.path.join(vocab_dir, "config.json")) else _roberta_tokenizer(vocab_dir)
  tokenizer.model_max_length = 1 << 30  # measuring long sentences is the point: no warning
  return lambda words: len(tokenizer(words, is_split_into_words=True)["input_ids"]) <= max_pieces


def write(out_dir: str, splits: dict[str, list]) -> dict:
  """Writes out_dir/{split}.conll; returns {split: {"sentences", "words", "entities": {type:
  n}}}."""
  os.makedirs(out_dir, exist_ok=True)
  counts = {}
  for name, part in splits.items():
    write_conll(os.path.join(out_dir, f"{name}.conll"), part)
    counts[name] = {"sentences": len(part), "words": sum(len(s) for s in part),
                    "entities": dict(sorted(entity_counts(part).items()))}
  return counts


FLAGS = flags.FLAGS


def define_flags() -> None:
  """The set's flags (also the driver's: benchmarks/finetuning/tagging_vs_hf.py)."""
  commands.define_corpus_flags(dev_percent=15, test_percent=15)
  for split, most in (("train", 4000), ("dev", 800), ("test", 800)):
    flags.DEFINE_integer(f"{split}_sentences", most, f"{split.capitalize()} sentences at most.")
  flags.DEFINE_integer("min_words", 4, "Shortest sentence kept, in words.")
  flags.DEFINE_integer("max_words", 80, "Longest sentence kept, in words.")
  flags.DEFINE_float("no_entity_share", 0.1, "Share of each split's sentences without an "
                     "entity.")
  flags.DEFINE_integer("seed", 0, "Seed of the sampling and shuffling.")


def build_from_flags(vocab_dir: str = "", max_pieces: int = 0) -> dict[str, list]:
  """`build` with the flags of `define_flags`; with vocab_dir, sentences over max_pieces
  pieces are left out."""
  keep = piece_filter(vocab_dir, max_pieces) if vocab_dir and max_pieces else None
  return build(FLAGS.corpus, {"train": FLAGS.train_sentences, "dev": FLAGS.dev_sentences,
                              "test": FLAGS.test_sentences}, FLAGS.min_words, FLAGS.max_words,
               FLAGS.no_entity_share, FLAGS.dev_percent, FLAGS.test_percent, FLAGS.seed, keep)


def print_counts(counts: dict) -> None:
  for name, c in counts.items():
    print(f"{name}: {c['sentences']} sentences, {c['words']} words, entities "
          + ", ".join(f"{k} {v}" for k, v in c["entities"].items()), flush=True)


def main(argv):
  del argv
  counts = write(FLAGS.output_dir, build_from_flags(FLAGS.vocab_dir, FLAGS.max_pieces))
  print_counts(counts)


if __name__ == "__main__":
  define_flags()
  flags.DEFINE_string("output_dir", None, "Where train/dev/test.conll go.", required=True)
  flags.DEFINE_string("vocab_dir", "", "vocab.json + merges.txt: with --max_pieces, leave out "
                      "sentences longer than that in byte-BPE pieces.")
  flags.DEFINE_integer("max_pieces", 0, "Longest sentence kept, in pieces with <s> and </s> "
                       "(0: no limit); --max_seq_len of the fine-tuning, so none is truncated.")
  app.run(main)
