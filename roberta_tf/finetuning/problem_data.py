"""Readers for fine-tuning data: tables (TSV, CSV, JSONL) and RACE-style multiple choice.

Tables (classification / regression), one example a row:
  .tsv  tab-separated with a header row; quotes are ordinary characters (GLUE's files)
  .csv  comma-separated with a header row (RFC 4180 quoting)
  .jsonl / .json  one JSON object a line (a .json file may also hold one list of objects)
Any of them may be gzipped (name ending .gz). Texts come from `text_fields` (one field: single
texts; two: pairs), the label from `label_field`.

Multiple choice (RACE): a JSON object per passage, as in the RACE release
  {"article": str, "questions": [str], "options": [[str]], "answers": ["A"|"B"|...], "id": str}
or one object per question {"article"|"context", "question", "options": [str], "answer"|"label"}
(answer: a letter or a 0-based index). A path may be a file (.json: one object or a list,
.jsonl: one object a line, .txt: RACE's one object per file) or a directory of such files.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import gzip
import io
import json
import os
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from roberta_tf.common import files


class ProblemDataError(ValueError):
  """Unusable fine-tuning data; the message names the file (and line) and the problem."""


@dataclasses.dataclass(frozen=True)
class TextExample:
  """A classification/regression example: a text or a text pair, and its label (or None)."""
  text_a: str
  text_b: str | None
  label: str | float | None


@dataclasses.dataclass(frozen=True)
class ChoiceExample:
  """One multiple-choice question: passage, question, options and the 0-based right option."""
  id: str
  context: str
  question: str
  options: tuple[str, ...]
  label: int | None


@contextlib.contextmanager
def open_text(path: str) -> Iterator[io.TextIOWrapper]:
  """`path` (a local path or a URL; gunzipped when its name ends .gz) as UTF-8 text, lines
  untranslated (csv's newline="")."""
  if not files.isfile(path):
    raise ProblemDataError(f"{path}: no such file")
  with files.open(path, "rb") as raw:
    with (gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz")
          else contextlib.nullcontext(raw)) as data:
      text = io.TextIOWrapper(data, encoding="utf-8", newline="")
      try:
        yield text
      finally:
        text.detach()  # the `with`s above close the streams


def _format(path: str) -> str:
  name = path[:-3] if path.endswith(".gz") else path
  ext = os.path.splitext(name)[1].lower()
  if ext not in (".tsv", ".csv", ".jsonl", ".json"):
    raise ProblemDataError(f"{path}: unknown table format {ext!r}; expected .tsv, .csv, .jsonl or "
                           ".json (optionally .gz)")
  return ext


def _json_lines(text: str, path: str) -> list[tuple[int, Any]]:
  """(line number, value) of each non-blank line of JSON Lines `text` (read from `path`)."""
  rows = []
  for lineno, line in enumerate(text.split("\n"), 1):
    if line.strip():
      try:
        rows.append((lineno, json.loads(line)))
      except json.JSONDecodeError as e:
        raise ProblemDataError(f"{path}:{lineno}: invalid JSON: {e}") from e
  return rows


def read_records(path: str) -> list[tuple[int, dict[str, Any]]]:
  """The rows of a table file as (line number, {field: value}) pairs, in file order."""
  ext = _format(path)
  try:
    with open_text(path) as f:
      if ext in (".tsv", ".csv"):
        reader = (csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if ext == ".tsv"
                  else csv.DictReader(f))
        if not reader.fieldnames:
          raise ProblemDataError(f"{path}: empty file (a header row naming the fields is required)")
        rows = []
        for row in reader:
          if None in row or None in row.values():
            raise ProblemDataError(f"{path}:{reader.line_num}: {len(reader.fieldnames)} fields in "
                                   f"the header, a different number in this row")
          rows.append((reader.line_num, row))
        return rows
      text = f.read()
  except (UnicodeDecodeError, OSError, csv.Error) as e:
    raise ProblemDataError(f"{path}: cannot read: {e}") from e
  if ext == ".json" and text.lstrip().startswith("["):
    try:
      values = json.loads(text)
    except json.JSONDecodeError as e:
      raise ProblemDataError(f"{path}: invalid JSON: {e}") from e
    rows = list(enumerate(values, 1))
  else:
    rows = _json_lines(text, path)
  for lineno, row in rows:
    if not isinstance(row, dict):
      raise ProblemDataError(f"{path}:{lineno}: expected a JSON object, got {type(row).__name__}")
  return rows


def _label_value(value: Any) -> str:
  """Labels become strings, so 1 in JSONL and "1" in TSV are the same class."""
  if isinstance(value, bool):
    return str(value).lower()
  if isinstance(value, float) and value.is_integer():
    return str(int(value))
  return str(value)


def read_text_examples(path: str, text_fields: Sequence[str], label_field: str,
                       regression: bool = False, require_labels: bool = True
                       ) -> list[TextExample]:
  """Classification/regression examples from a table file.

  Args:
    path: .tsv/.csv/.jsonl/.json, optionally gzipped.
    text_fields: one field (single texts) or two (pairs).
    label_field: the label's field; a string class name for classification (numbers become
      their decimal string), a number for regression.
    regression: parse labels as floats.
    require_labels: a row without a label is an error (else its label is None).
  """
  if len(text_fields) not in (1, 2):
    raise ProblemDataError(f"--text_fields must name one or two fields, got {list(text_fields)}")
  examples = []
  for lineno, row in read_records(path):
    missing = [f for f in text_fields if f not in row]
    if missing:
      raise ProblemDataError(f"{path}:{lineno}: no field {missing[0]!r} (--text_fields); the "
                             f"row has {sorted(row)}")
    texts = []
    for field in text_fields:
      value = row[field]
      if not isinstance(value, str):
        raise ProblemDataError(f"{path}:{lineno}: field {field!r} is {type(value).__name__}, "
                               "expected text")
      texts.append(value)
    label = row.get(label_field)
    if label in (None, ""):
      if require_labels:
        raise ProblemDataError(f"{path}:{lineno}: no label in field {label_field!r} "
                               f"(--label_field); the row has {sorted(row)}")
      label = None
    elif regression:
      try:
        label = float(label)
      except (TypeError, ValueError) as e:
        raise ProblemDataError(
            f"{path}:{lineno}: regression label {label!r} is not a number") from e
    else:
      label = _label_value(label)
    examples.append(TextExample(texts[0], texts[1] if len(texts) == 2 else None, label))
  if not examples:
    raise ProblemDataError(f"{path}: no examples")
  return examples


def label_names(examples: Iterable[TextExample], given: Sequence[str] = ()) -> list[str]:
  """The class names in id order: `given` if any, else the sorted labels of the examples."""
  if given:
    names = [_label_value(v) for v in given]
    if len(set(names)) != len(names):
      raise ProblemDataError(f"--labels has duplicates: {names}")
    return names
  names = sorted({e.label for e in examples if e.label is not None})
  if len(names) < 2:
    raise ProblemDataError(f"classification needs at least two classes in the training labels, "
                           f"found {names}")
  return names


def label_ids(examples: Sequence[TextExample], names: Sequence[str], path: str) -> list[int]:
  """Class ids of the examples' labels; a label outside `names` is an error naming it."""
  index = {n: i for i, n in enumerate(names)}
  ids = []
  for e in examples:
    if e.label not in index:
      raise ProblemDataError(f"{path}: label {e.label!r} is not one of the classes {list(names)} "
                             "(taken from the training file or --labels)")
    ids.append(index[e.label])
  return ids


# ---- multiple choice ------------------------------------------------------------------------

def option_text(question: str, option: str) -> str:
  """The second segment for one option (fairseq's RACE recipe): a cloze question ("... _ ...")
  gets the option in the blank, any other question is followed by the option."""
  if "_" in question:
    return question.replace("_", option)
  return f"{question} {option}"


def _answer_index(answer: Any, num_options: int, where: str) -> int:
  if isinstance(answer, str) and len(answer) == 1 and answer.isalpha():
    index = ord(answer.upper()) - ord("A")
  elif isinstance(answer, int) and not isinstance(answer, bool):
    index = answer
  elif isinstance(answer, str) and answer.isdigit():
    index = int(answer)
  else:
    raise ProblemDataError(f"{where}: answer {answer!r} is neither a letter nor a 0-based index")
  if not 0 <= index < num_options:
    raise ProblemDataError(f"{where}: answer {answer!r} is outside the {num_options} options")
  return index


def _choice_examples(obj: Any, where: str, require_labels: bool) -> list[ChoiceExample]:
  if not isinstance(obj, dict):
    raise ProblemDataError(f"{where}: expected a JSON object, got {type(obj).__name__}")
  context = obj.get("article", obj.get("context"))
  if not isinstance(context, str):
    raise ProblemDataError(f"{where}: no 'article' (or 'context') text")
  if "questions" in obj:  # RACE: one passage, parallel lists of questions/options/answers
    questions, options = obj["questions"], obj.get("options")
    answers = obj.get("answers") or [None] * len(questions)
    if not (isinstance(options, list) and len(options) == len(questions) == len(answers)):
      raise ProblemDataError(f"{where}: 'questions', 'options' and 'answers' must be lists of the "
                             "same length")
    base = str(obj.get("id", where))
    items = [(f"{base}-{i}", q, o, a) for i, (q, o, a) in
             enumerate(zip(questions, options, answers, strict=True))]
  else:
    items = [(str(obj.get("id", where)), obj.get("question"), obj.get("options"),
              obj.get("answer", obj.get("label")))]
  examples = []
  for qid, question, opts, answer in items:
    if not isinstance(question, str) or not isinstance(opts, list) or len(opts) < 2 or not all(
        isinstance(o, str) for o in opts):
      raise ProblemDataError(f"{where} ({qid}): needs a 'question' text and 'options', a list "
                             "of at least two texts")
    if answer is None and require_labels:
      raise ProblemDataError(f"{where} ({qid}): no 'answer'")
    label = None if answer is None else _answer_index(answer, len(opts), f"{where} ({qid})")
    examples.append(ChoiceExample(qid, context, question, tuple(opts), label))
  return examples


def read_choice_examples(path: str, require_labels: bool = True) -> list[ChoiceExample]:
  """Multiple-choice examples from a RACE-style file or directory (see the module docstring).

  All questions must have the same number of options (RACE: 4): the model scores a fixed
  [B, C] grid of options.
  """
  if files.isdir(path):
    names = sorted(files.join(root, n) for root, _, found in files.walk(path) for n in found
                   if n.endswith((".json", ".jsonl", ".txt", ".json.gz", ".jsonl.gz")))
    if not names:
      raise ProblemDataError(f"{path}: directory holds no .json/.jsonl/.txt files")
  else:
    names = [path]
  examples = []
  for name in names:
    with open_text(name) as f:
      try:
        text = f.read()
      except (UnicodeDecodeError, OSError) as e:
        raise ProblemDataError(f"{name}: cannot read: {e}") from e
    try:
      objs = [(name, json.loads(text))]
    except json.JSONDecodeError:
      objs = [(f"{name}:{lineno}", obj) for lineno, obj in _json_lines(text, name)]
    for where, obj in objs:
      for item in obj if isinstance(obj, list) else [obj]:
        examples.extend(_choice_examples(item, where, require_labels))
  if not examples:
    raise ProblemDataError(f"{path}: no questions")
  counts = {len(e.options) for e in examples}
  if len(counts) > 1:
    raise ProblemDataError(f"{path}: questions have different numbers of options {sorted(counts)}; "
                           "all must have the same")
  return examples
