"""Token classification data: sentences of words, each word with its tag.

Two formats (either may be gzipped, name ending .gz):
  CoNLL (any other name: .conll, .txt, .iob, .tsv, ...): one word a line, the word in the first
    whitespace-separated column and its tag in the LAST (CoNLL-2003's four columns and UD-style
    two-column files both load); a blank line ends a sentence; `-DOCSTART-` lines are skipped.
  JSON lines (.jsonl, .json): one sentence an object, its words in "tokens" and its tags in
    "tags" (strings) or "ner_tags" (HF datasets' integer ids, named in order by --labels);
    --label_field names another tags field.
The label set is the training tags in first-appearance order unless --labels gives it. Refused
with file:line: a word without a tag, a malformed line or object, tokens and tags of different
lengths, an integer tag without --labels (or outside them), and a dev/test tag that training
never saw (`tag_ids`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from roberta_tf.finetuning.problem_data import ProblemDataError, open_text

DOCSTART = "-DOCSTART-"
_JSON_WORDS = "tokens"
_JSON_TAGS = ("tags", "ner_tags")


@dataclasses.dataclass(frozen=True)
class TaggedSentence:
  """A sentence's words and their tags (None: unlabeled); `where` is "file:line" of its first
  word (error messages)."""
  words: tuple[str, ...]
  tags: tuple[str, ...] | None
  where: str


def _is_json(path: str) -> bool:
  name = path[:-3] if path.endswith(".gz") else path
  return name.lower().endswith((".jsonl", ".json"))


def _read_lines(path: str) -> list[str]:
  try:
    with open_text(path) as f:
      return f.read().splitlines()
  except UnicodeDecodeError as e:
    raise ProblemDataError(f"{path}: not UTF-8 text: {e}") from e
  except OSError as e:
    raise ProblemDataError(f"{path}: cannot read: {e}") from e


def _conll(path: str, require_tags: bool) -> list[TaggedSentence]:
  sentences, words, tags, first = [], [], [], 0

  def close():
    if words:
      sentences.append(TaggedSentence(tuple(words), tuple(tags) if require_tags else None,
                                      f"{path}:{first}"))
    words.clear()
    tags.clear()

  for lineno, line in enumerate(_read_lines(path), 1):
    columns = line.split()
    if not columns:
      close()
      continue
    if columns[0] == DOCSTART:
      close()
      continue
    if require_tags and len(columns) < 2:
      raise ProblemDataError(f"{path}:{lineno}: the word {columns[0]!r} has no tag (a CoNLL line "
                             "is the word, optional columns, then its tag, separated by "
                             "whitespace)")
    if not words:
      first = lineno
    words.append(columns[0])
    tags.append(columns[-1])
  close()
  return sentences


def _json_tags(row: dict, where: str, tags_field: str, labels: Sequence[str]) -> list[str]:
  fields = (tags_field,) if tags_field else _JSON_TAGS
  name = next((f for f in fields if f in row), None)
  if name is None:
    raise ProblemDataError(f"{where}: no tags field ({' or '.join(map(repr, fields))}); the "
                           f"object has {sorted(row)}")
  tags = row[name]
  if not isinstance(tags, list):
    raise ProblemDataError(f"{where}: {name!r} must be a list, got {type(tags).__name__}")
  out = []
  for tag in tags:
    if isinstance(tag, int) and not isinstance(tag, bool):
      if not labels:
        raise ProblemDataError(f"{where}: integer tags in {name!r} need --labels naming them in "
                               "id order (HF datasets' ClassLabel names)")
      if not 0 <= tag < len(labels):
        raise ProblemDataError(f"{where}: tag id {tag} is outside --labels ({len(labels)} names)")
      out.append(labels[tag])
    elif isinstance(tag, str) and tag and not any(c.isspace() for c in tag):
      out.append(tag)
    else:
      raise ProblemDataError(f"{where}: tag {tag!r} is neither a name without spaces nor an "
                             "integer id")
  return out


def _json(path: str, require_tags: bool, tags_field: str,
          labels: Sequence[str]) -> list[TaggedSentence]:
  sentences = []
  for lineno, line in enumerate(_read_lines(path), 1):
    if not line.strip():
      continue
    where = f"{path}:{lineno}"
    try:
      row = json.loads(line)
    except json.JSONDecodeError as e:
      raise ProblemDataError(f"{where}: invalid JSON: {e}") from e
    words = row.get(_JSON_WORDS) if isinstance(row, dict) else None
    if not isinstance(words, list) or not words or not all(
        isinstance(w, str) and w and not any(c.isspace() for c in w) for w in words):
      raise ProblemDataError(f"{where}: expected an object whose {_JSON_WORDS!r} is a non-empty "
                             "list of words (non-empty strings without whitespace)")
    tags = _json_tags(row, where, tags_field, labels) if require_tags else None
    if tags is not None and len(tags) != len(words):
      raise ProblemDataError(f"{where}: {len(words)} tokens but {len(tags)} tags")
    sentences.append(TaggedSentence(tuple(words), None if tags is None else tuple(tags), where))
  return sentences


def read_tagged(path: str, labels: Sequence[str] = (), tags_field: str = "",
                require_tags: bool = True) -> list[TaggedSentence]:
  """The sentences of a CoNLL or JSON-lines file (see the module docstring), in file order.

  Args:
    labels: --labels (names integer JSON tags); tags_field: --label_field for JSON lines ("":
      "tags" or "ner_tags").
    require_tags: a word without a tag is an error (else sentences carry tags=None).
  """
  if _is_json(path):
    sentences = _json(path, require_tags, tags_field, labels)
  else:
    sentences = _conll(path, require_tags)
  if not sentences:
    raise ProblemDataError(f"{path}: no sentences")
  return sentences


def tag_names(train: Sequence[TaggedSentence], given: Sequence[str] = ()) -> list[str]:
  """The label set in id order: `given` (--labels) if any, else the training tags in order of
  first appearance."""
  if given:
    names = list(given)
    if len(set(names)) != len(names):
      raise ProblemDataError(f"--labels has duplicates: {names}")
    return names
  names = list(dict.fromkeys(t for s in train for t in s.tags))
  if len(names) < 2:
    raise ProblemDataError(f"token classification needs at least two tags in the training data, "
                           f"found {names}")
  return names


def tag_ids(sentences: Sequence[TaggedSentence], names: Sequence[str]) -> list[list[int]]:
  """Each sentence's tag ids; a tag outside `names` is an error naming its file:line."""
  index = {n: i for i, n in enumerate(names)}
  out = []
  for s in sentences:
    for k, tag in enumerate(s.tags):
      if tag not in index:
        path, line = s.where.rsplit(":", 1)
        where = f"{path}:{int(line) + k}" if not _is_json(path) else s.where
        raise ProblemDataError(f"{where}: tag {tag!r} is not one of the {len(names)} tags "
                               "(the training file's, or --labels)")
    out.append([index[t] for t in s.tags])
  return out
