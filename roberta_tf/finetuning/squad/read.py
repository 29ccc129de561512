"""SQuAD v1.1 / v2.0 files read into examples, their answers checked against their contexts.

The file is SQuAD's {"data": [{"paragraphs": [{"context", "qas": [{"id", "question",
"answers": [{"text", "answer_start"}], "is_impossible"?}]}]}]}; v2 = some question has
`is_impossible`. features.py turns the examples into model inputs, decode.py the
model's logits back into answers, write.py writes those.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from roberta_tf.common import files


class SquadError(ValueError):
  """Unusable SQuAD data or settings; the message names the file, question or flag."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """A question on a context; `answers` are (text, character start) pairs."""
  id: str
  question: str
  context: str
  answers: tuple[tuple[str, int], ...]
  is_impossible: bool


def _line_of(raw: str, qid: str) -> int | None:
  """The line of `raw` (the JSON text) where question `qid`'s "id" is, or None."""
  m = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(qid)), raw)
  return raw.count("\n", 0, m.start()) + 1 if m else None


def read_squad(path: str, require_answers: bool = True, skip_bad: bool = False,
               on_skip: Callable[[str], None] | None = None) -> tuple[list[SquadExample], bool]:
  """Reads a SQuAD JSON file; returns (examples, is_v2). v2 = some question has `is_impossible`.

  Every answer's text must be at its `answer_start` in the context (else it would train the
  span of other text). With `skip_bad` such an answer is dropped instead (`on_skip` gets the
  message), and a question left without answers is dropped with it.

  Raises:
    SquadError: not SQuAD's {"data": [{"paragraphs": [{"context", "qas": [...]}]}]} layout, an
      answer whose `answer_start` is outside its context or (unless skip_bad) does not point at
      its text (the message names the file, line and question id), or (require_answers) an
      answerable question without answers.
  """
  try:
    raw = files.read_text(path)
    data = json.loads(raw)
  except (OSError, tf.errors.OpError, json.JSONDecodeError, UnicodeDecodeError) as e:
    raise SquadError(f"{path}: cannot read SQuAD JSON: {e}") from e
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise SquadError(f"{path}: expected SQuAD's {{\"data\": [...]}} layout")
  examples, v2 = [], False
  for article in data["data"]:
    for paragraph in article.get("paragraphs", []):
      context = paragraph.get("context")
      if not isinstance(context, str):
        raise SquadError(f"{path}: a paragraph has no 'context' text")
      for qa in paragraph.get("qas", []):
        qid = str(qa.get("id"))
        # The line is searched for only when a message needs it.
        where = lambda qid=qid: f"{path}:{_line_of(raw, qid) or '?'}: question {qid}"
        v2 = v2 or "is_impossible" in qa
        example = _question(qa, qid, context, where, require_answers, skip_bad, on_skip)
        if example is not None:
          examples.append(example)
  if not examples:
    raise SquadError(f"{path}: no questions")
  return examples, v2


def _question(qa: dict[str, Any], qid: str, context: str, where: Callable[[], str],
              require_answers: bool, skip_bad: bool,
              on_skip: Callable[[str], None] | None) -> SquadExample | None:
  """One "qas" entry as an example; None when skip_bad dropped every one of its answers."""
  question = qa.get("question")
  if not isinstance(question, str):
    raise SquadError(f"{where()} has no 'question' text")
  impossible = bool(qa.get("is_impossible", False))
  answers, dropped = [], 0
  for a in qa.get("answers", []):
    message = _answer_problem(a, context, where)
    if message is None:
      answers.append((a["text"], a["answer_start"]))
      continue
    if not skip_bad:
      raise SquadError(f"{message}: fix answer_start, or pass --skip_bad_examples to skip such "
                       "answers")
    dropped += 1
    if on_skip is not None:
      on_skip(message)
  if dropped and not answers and not impossible:
    return None  # every answer was bad: the question goes too (skip_bad)
  if require_answers and not impossible and not answers:
    raise SquadError(f"{where()} is answerable but has no answers")
  return SquadExample(qid, question, context, tuple(answers), impossible)


def _answer_problem(answer: Any, context: str, where: Callable[[], str]) -> str | None:
  """None when `answer`'s text is at its answer_start in `context`; else what is wrong with it
  (a message for --skip_bad_examples to skip).

  Raises:
    SquadError: the answer has no text or start, or does not fit inside the context at all.
  """
  text, start = answer.get("text"), answer.get("answer_start")
  if not isinstance(text, str) or not isinstance(start, int) or not (
      0 <= start <= len(context) - len(text)):
    raise SquadError(f"{where()}: answer {answer!r} does not fit its context "
                     f"({len(context)} characters)")
  if context[start:start + len(text)] == text:
    return None
  found = context.find(text)
  return (f"{where()}: answer {text!r} is not at answer_start {start} (the context reads "
          f"{context[start:start + len(text)]!r} there"
          + (f"; the text occurs at {found}" if found >= 0 else "") + ")")


def gold_answers(examples: Sequence[SquadExample]) -> dict[str, list[str]]:
  """id -> gold answer texts (empty for unanswerable questions), for eval.py's `evaluate`."""
  return {e.id: [] if e.is_impossible else [a for a, _ in e.answers] for e in examples}
