"""Text-embedding data: training rows of texts, a retrieval dev set in BEIR's layout, STS pairs.

Training (`read_pairs`): a .tsv/.csv/.jsonl/.json table (problem_data.read_records), one row an
example; --text_fields names its columns in order: anchor, positive[, hard negative].
Retrieval dev set (`read_beir`), a directory as BEIR ships its data sets:
  corpus.jsonl    {"_id", "title" (optional), "text"} a line
  queries.jsonl   {"_id", "text"} a line
  qrels/dev.tsv   a header line, then query-id<TAB>corpus-id<TAB>score (score > 0: relevant)
STS (`read_sts`): a table of scored pairs, columns sentence1, sentence2, score (GLUE STS-B's).
Refused with file:line: an empty text, a missing column, a qrels row naming a query or document
that is not in queries.jsonl / corpus.jsonl, a score that is not a number.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

from roberta_tf.common import files
from roberta_tf.finetuning.problem_data import ProblemDataError, open_text, read_records

CORPUS, QUERIES, QRELS = "corpus.jsonl", "queries.jsonl", "qrels/dev.tsv"
STS_FIELDS = ("sentence1", "sentence2", "score")


@dataclasses.dataclass(frozen=True)
class RetrievalSet:
  """A BEIR-style dev set: doc ids and texts (title + " " + text, as BEIR's sentence-transformers
  wrapper joins them), query ids and texts, and qrels {query id: {doc id: relevance}}."""
  doc_ids: list[str]
  docs: list[str]
  query_ids: list[str]
  queries: list[str]
  qrels: dict[str, dict[str, int]]


def _text(row: dict, field: str, where: str) -> str:
  if field not in row:
    raise ProblemDataError(f"{where}: no field {field!r}; the row has {sorted(row)}")
  value = row[field]
  if not isinstance(value, str) or not value.strip():
    raise ProblemDataError(f"{where}: field {field!r} is {'empty' if value == '' else repr(value)}"
                           ", expected a non-empty text")
  return value


def read_pairs(path: str, text_fields: Sequence[str]) -> list[tuple[str, ...]]:
  """Training rows: (anchor, positive[, negative]) texts from the --text_fields columns."""
  if len(text_fields) not in (2, 3):
    raise ProblemDataError(f"--text_fields must name 2 or 3 columns (anchor, positive[, "
                           f"negative]), got {list(text_fields)}")
  rows = [tuple(_text(row, f, f"{path}:{lineno}") for f in text_fields)
          for lineno, row in read_records(path)]
  if not rows:
    raise ProblemDataError(f"{path}: no examples")
  return rows


def _jsonl(path: str) -> list[tuple[str, dict]]:
  if not files.isfile(path):
    raise ProblemDataError(f"{path}: no such file (a BEIR-style dev set holds {CORPUS}, "
                           f"{QUERIES} and {QRELS})")
  out = []
  with open_text(path) as f:
    for lineno, line in enumerate(f, 1):
      if line.strip():
        where = f"{path}:{lineno}"
        try:
          row = json.loads(line)
        except json.JSONDecodeError as e:
          raise ProblemDataError(f"{where}: invalid JSON: {e}") from e
        if not isinstance(row, dict) or "_id" not in row:
          raise ProblemDataError(f"{where}: expected an object with an \"_id\"")
        out.append((where, row))
  return out


def _qrels(path: str, query_ids: set, doc_ids: set) -> dict[str, dict[str, int]]:
  if not files.isfile(path):
    raise ProblemDataError(f"{path}: no such file")
  qrels: dict[str, dict[str, int]] = {}
  with open_text(path) as f:
    for lineno, line in enumerate(f, 1):
      columns = line.rstrip("\r\n").split("\t")
      if lineno == 1 or not line.strip():
        continue  # the header
      where = f"{path}:{lineno}"
      if len(columns) != 3:
        raise ProblemDataError(f"{where}: expected query-id<TAB>corpus-id<TAB>score")
      query, doc, score = columns
      for kind, value, known in (("query", query, query_ids), ("document", doc, doc_ids)):
        if value not in known:
          raise ProblemDataError(f"{where}: {kind} {value!r} is not in "
                                 f"{QUERIES if kind == 'query' else CORPUS}")
      try:
        qrels.setdefault(query, {})[doc] = int(float(score))
      except ValueError as e:
        raise ProblemDataError(f"{where}: score {score!r} is not a number") from e
  return qrels


def read_beir(directory: str) -> RetrievalSet:
  """The dev set in `directory` (see the module docstring); only queries with a relevant
  document are kept (BEIR's evaluation scores those)."""
  docs = [(str(r["_id"]), (str(r.get("title") or "") + " " + _text(r, "text", w)).strip())
          for w, r in _jsonl(files.join(directory, CORPUS))]
  queries = [(str(r["_id"]), _text(r, "text", w))
             for w, r in _jsonl(files.join(directory, QUERIES))]
  qrels = _qrels(files.join(directory, QRELS), {q for q, _ in queries}, {d for d, _ in docs})
  qrels = {q: rel for q, rel in qrels.items() if any(v > 0 for v in rel.values())}
  if not qrels:
    raise ProblemDataError(f"{files.join(directory, QRELS)}: no relevant (score > 0) pairs")
  queries = [(q, t) for q, t in queries if q in qrels]
  return RetrievalSet([d for d, _ in docs], [t for _, t in docs], [q for q, _ in queries],
                      [t for _, t in queries], qrels)


def read_sts(path: str) -> tuple[list[str], list[str], list[float]]:
  """(sentences1, sentences2, scores) of an STS table."""
  a, b, scores = [], [], []
  for lineno, row in read_records(path):
    where = f"{path}:{lineno}"
    a.append(_text(row, STS_FIELDS[0], where))
    b.append(_text(row, STS_FIELDS[1], where))
    try:
      scores.append(float(row.get(STS_FIELDS[2])))
    except (TypeError, ValueError) as e:
      raise ProblemDataError(f"{where}: score {row.get(STS_FIELDS[2])!r} is not a number") from e
  if len(a) < 2:
    raise ProblemDataError(f"{path}: fewer than two scored pairs")
  return a, b, scores
