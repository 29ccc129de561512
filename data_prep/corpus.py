"""Reading text corpora as documents of sentences.

The corpus formats (the contract every data_prep binary shares):

- ``.txt``: a line is a sentence or paragraph; a blank line ends a document (fairseq's format).
- ``.jsonl``: one JSON object a line is a document; its ``text_field`` (default ``text``) holds
  the text, whose newlines separate sentences.
- either one gzip-compressed (``.gz``).
- ``.parquet``: one row is a document; its ``text_field`` column (a string or binary column)
  holds the text, whose newlines separate sentences, exactly as in a ``.jsonl`` document (a
  Parquet corpus and its JSONL twin give the same documents). Read one row group at a time
  (never the whole file) through a seekable file object, so a URL reads as a local file does. A
  null text is skipped like an empty one and counted in ``CorpusStats.null_texts``; a missing
  column is a CorpusError naming the file and the columns it has.
- an input spec is a comma list of files, globs and directories (searched recursively for the
  formats above), or ``stdlib``: the documentation of the running Python (module, class and
  function docstrings of the standard library, parsed with ``ast`` without importing anything,
  plus pydoc's topic texts), so a demo needs no download. Its texts are whole paragraphs (wrapped
  lines re-joined) and code lines, each after a document's first starting with whitespace, so
  packed texts never glue two words together (data_prep/stdlib_corpus.py).

A ``.txt`` line (a ``.jsonl`` / ``.parquet`` text's line) is one sentence: it is encoded on its own
and packed right after the line before it, without a space, as fairseq does with RoBERTa's
corpus (data_prep/sentence_encoders.py). A corpus hard-wrapped inside its paragraphs (a line
break every ~70 characters) therefore glues the last word of a line to the first of the next
("must be" + "sequential" reads "must besequential"): give one paragraph a line.

Every path may be a URL (gs://, ram://, ...: roberta_tf/common/files.py): files, globs and
directories are resolved through ``files`` (on a URL a glob's ``*`` stays within one directory
level; locally ``**`` recurses). ``iter_documents`` reads through ``files`` too, or through any
object with ``open(path, "rb")`` and ``getsize(path)`` (the Beam engine passes Beam's file
systems: data_prep/beam_engine.py).

Invalid UTF-8 is replaced with U+FFFD, one per invalid byte sequence (Python's ``errors="replace"``)
and counted in ``CorpusStats.invalid_utf8``. Over-long lines are split near ``max_line_bytes``
at a whitespace (or character) boundary and counted in ``CorpusStats.split_lines``.
"""

from __future__ import annotations

import codecs
import dataclasses
import gzip
import json
from collections.abc import Iterator
from typing import Any

from data_prep.stdlib_corpus import stdlib_documents
from roberta_tf.common import error_text
from roberta_tf.common import files as files_lib

STDLIB = "stdlib"
PARQUET = ".parquet"
_FORMATS = (".txt", ".jsonl", ".txt.gz", ".jsonl.gz", PARQUET)
# Rows converted to Python at once when reading a Parquet row group.
_PARQUET_BATCH_ROWS = 1024
# Larger lines are split before tokenization: bounded work per line, and memory that does not
# depend on the longest line in the corpus.
DEFAULT_MAX_LINE_BYTES = 1 << 20


class CorpusError(ValueError):
  """A corpus input that cannot be read; the message names the file."""


@dataclasses.dataclass
class CorpusStats:
  """Counters a reader fills while it reads (for progress and the final report)."""
  files: int = 0
  documents: int = 0
  sentences: int = 0
  bytes_read: int = 0       # bytes consumed from the files (compressed bytes for .gz)
  total_bytes: int = 0      # sum of the input file sizes (compressed for .gz): ETA's denominator
  invalid_utf8: int = 0     # invalid byte sequences replaced with U+FFFD
  split_lines: int = 0      # lines longer than max_line_bytes that were split
  null_texts: int = 0       # Parquet rows whose text is null (skipped)


# Files that mark a directory as this project's output (shards or a vocabulary), not a corpus:
# its merges.txt would otherwise be read as text.
_PREPARED_MARKERS = ("dataset_info.json", "merges.txt", "vocab.json")


def _refuse_prepared_dir(directory: str) -> None:
  """Raises CorpusError if `directory` (or a subdirectory) holds shards or a vocabulary."""
  for root, _, names in files_lib.walk(directory):
    marker = next((n for n in _PREPARED_MARKERS if n in names), None)
    if marker:
      raise CorpusError(f"input directory {directory!r} holds {files_lib.join(root, marker)}: "
                        "it is a shard or vocabulary directory, not a corpus; give the text "
                        "files")


def resolve_inputs(spec: str) -> list[str]:
  """Expands a comma list of files, globs and directories into a sorted file list.

  ``stdlib`` stays as the single entry ``["stdlib"]``. Raises CorpusError naming any part that
  matches nothing, or a file of an unknown format; files.UnknownSchemeError (a ValueError) for a
  URL no file system handles.
  """
  parts = [p.strip() for p in spec.split(",") if p.strip()]
  if not parts:
    raise CorpusError("--input is empty: give files, globs, directories or 'stdlib'")
  if parts == [STDLIB]:
    return [STDLIB]
  files: list[str] = []
  for part in parts:
    if part == STDLIB:
      raise CorpusError("'stdlib' cannot be combined with other inputs")
    files_lib.check(part, "--input")
    if files_lib.isdir(part):
      _refuse_prepared_dir(part)
      found = sorted(
          files_lib.join(root, name)
          for root, _, names in files_lib.walk(part) for name in names
          if name.endswith(_FORMATS))
      if not found:
        raise CorpusError(f"directory {part!r} holds no {'/'.join(_FORMATS)} files")
      files.extend(found)
    elif any(c in part for c in "*?["):
      found = sorted(p for p in files_lib.glob(part) if files_lib.isfile(p))
      if not found:
        raise CorpusError(f"glob {part!r} matches no file")
      files.extend(found)
    else:
      if not files_lib.exists(part):
        raise CorpusError(f"input file {part!r} does not exist")
      if not files_lib.isfile(part):
        raise CorpusError(f"input {part!r} is not a regular file")
      files.append(part)
  for f in files:
    if files_lib.basename(f) == "merges.txt":
      _refuse_prepared_dir(files_lib.dirname(f) or ".")
    if not f.endswith(_FORMATS):
      raise CorpusError(f"input file {f!r}: unknown format (expected one of {', '.join(_FORMATS)})")
    if not files_lib.readable(f):
      raise CorpusError(f"input file {f!r} is not readable")
  return list(dict.fromkeys(files))  # dedupe, keep order


class _CountingReplace:
  """A codecs error handler that replaces like 'replace' and counts the replacements."""

  def __init__(self):
    self.count = 0

  def __call__(self, err: UnicodeDecodeError):
    self.count += 1
    return "\ufffd", err.end


_counter = _CountingReplace()
codecs.register_error("roberta_tf_count_replace", _counter)


def _decode(raw: bytes, stats: CorpusStats) -> str:
  before = _counter.count
  text = raw.decode("utf-8", errors="roberta_tf_count_replace")
  stats.invalid_utf8 += _counter.count - before
  return text


def split_long_line(line: str, max_bytes: int) -> list[str]:
  """Splits ``line`` into pieces of at most ~``max_bytes`` UTF-8 bytes, at whitespace if any.

  The pieces concatenated equal ``line``. A piece ends after the last whitespace within its
  budget, or at a character boundary when there is none.
  """
  if len(line.encode("utf-8")) <= max_bytes:
    return [line]
  max_chars = max(1, max_bytes // 4)  # 4 bytes per char at worst: a safe piece length in chars
  pieces = []
  start = 0
  while start < len(line):
    end = min(len(line), start + max_chars)
    if end < len(line):
      cut = max(line.rfind(" ", start, end), line.rfind("\n", start, end))
      if cut > start:
        end = cut + 1
    pieces.append(line[start:end])
    start = end
  return pieces


def _is_read_error(e: BaseException) -> bool:
  """A failure to read a file: an OSError (Beam's BeamIOError is one), EOF inside a gzip
  stream, or a TensorFlow file system's error (URLs)."""
  return isinstance(e, (OSError, EOFError, gzip.BadGzipFile)) or error_text.is_tf_error(e)


def _open(path: str, fs: Any):
  """``fs.open(path, "rb")``, its failures as a CorpusError naming ``path``."""
  try:
    return fs.open(path, "rb")
  except Exception as e:
    if not _is_read_error(e):
      raise
    raise CorpusError(f"cannot open input file {path!r}: "
                      f"{getattr(e, 'strerror', None) or error_text.one_line(e)}") from e


def _text_sentences(text: str) -> list[str]:
  """A .jsonl / .parquet document's text as its non-empty sentences ("\r\n" line ends inside
  the text end a sentence like "\n", as in .txt files)."""
  return [s.rstrip("\r") for s in text.split("\n") if s.strip()]


def _iter_file(path: str, text_field: str, stats: CorpusStats, max_line_bytes: int,
               bytes_before: int, fs: Any) -> Iterator[list[str]]:
  if path.endswith(PARQUET):
    yield from _iter_parquet(path, text_field, stats, max_line_bytes, bytes_before, fs)
    return
  is_jsonl = path.endswith((".jsonl", ".jsonl.gz"))
  raw = _open(path, fs)
  stream = gzip.GzipFile(fileobj=raw, mode="rb") if path.endswith(".gz") else raw
  doc: list[str] = []
  with raw, stream:
    try:
      for lineno, line_bytes in enumerate(stream, 1):
        stats.bytes_read = bytes_before + raw.tell()
        line = _decode(line_bytes, stats).rstrip("\r\n")
        if is_jsonl:
          if not line.strip():
            continue
          try:
            obj = json.loads(line)
          except json.JSONDecodeError as e:
            raise CorpusError(f"{path}:{lineno}: not a JSON object ({e.msg})") from e
          if not isinstance(obj, dict) or not isinstance(obj.get(text_field), str):
            raise CorpusError(f"{path}:{lineno}: no string field {text_field!r} "
                              "(set --text_field)")
          sentences = _text_sentences(obj[text_field])
          if sentences:
            yield _split_sentences(sentences, max_line_bytes, stats)
        elif line.strip():
          doc.append(line)
        elif doc:
          yield _split_sentences(doc, max_line_bytes, stats)
          doc = []
    except Exception as e:
      if not _is_read_error(e):
        raise
      raise CorpusError(f"input file {path!r} is corrupt or unreadable: "
                        f"{error_text.one_line(e)}") from e
  if doc:
    yield _split_sentences(doc, max_line_bytes, stats)


def _iter_parquet(path: str, text_field: str, stats: CorpusStats, max_line_bytes: int,
                  bytes_before: int, fs: Any) -> Iterator[list[str]]:
  """A Parquet file's documents: one a row, its ``text_field`` column's text, read one row
  group at a time (bounded memory) from a seekable file object."""
  import pyarrow as pa  # pylint: disable=import-outside-toplevel
  import pyarrow.parquet as pq  # pylint: disable=import-outside-toplevel

  def unreadable(e):
    return CorpusError(f"input file {path!r} is not a readable Parquet file: "
                       f"{error_text.one_line(e)}")

  raw = _open(path, fs)
  with raw:
    try:
      pf = pq.ParquetFile(raw)
    except Exception as e:
      if not (_is_read_error(e) or isinstance(e, pa.ArrowException)):
        raise
      raise unreadable(e) from e
    schema = pf.schema_arrow
    if text_field not in schema.names:
      raise CorpusError(f"{path}: no column {text_field!r} (its columns: "
                        f"{', '.join(schema.names) or 'none'}; set --text_field)")
    kind = schema.field(text_field).type
    if pa.types.is_dictionary(kind):
      kind = kind.value_type
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
            or pa.types.is_string_view(kind) or pa.types.is_binary_view(kind)):
      raise CorpusError(f"{path}: column {text_field!r} holds {kind}, not text "
                        "(set --text_field)")
    size = fs.getsize(path)
    rows_total, rows_done = pf.metadata.num_rows, 0
    try:
      for row_group in range(pf.num_row_groups):
        for batch in pf.iter_batches(batch_size=_PARQUET_BATCH_ROWS, row_groups=[row_group],
                                     columns=[text_field], use_threads=False):
          column = batch.column(0)
          if pa.types.is_dictionary(column.type):
            column = column.dictionary_decode()
          # As bytes, decoded here: invalid UTF-8 is replaced and counted as in .txt/.jsonl.
          for value in column.cast(pa.large_binary()).to_pylist():
            if value is None:
              stats.null_texts += 1
              continue
            sentences = _text_sentences(_decode(value, stats))
            if sentences:
              yield _split_sentences(sentences, max_line_bytes, stats)
          rows_done += batch.num_rows
          stats.bytes_read = bytes_before + size * rows_done // max(rows_total, 1)
    except Exception as e:
      if not (_is_read_error(e) or isinstance(e, pa.ArrowException)):
        raise
      raise unreadable(e) from e


def _split_sentences(sentences: list[str], max_line_bytes: int, stats: CorpusStats) -> list[str]:
  out = []
  for s in sentences:
    pieces = split_long_line(s, max_line_bytes)
    stats.split_lines += len(pieces) > 1
    out.extend(pieces)
  return out


def iter_documents(files: list[str], text_field: str = "text",
                   stats: CorpusStats | None = None,
                   max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                   fs: Any = None) -> Iterator[list[str]]:
  """Yields documents (lists of non-empty sentences, no trailing newlines) from ``files``.

  Args:
    files: the output of ``resolve_inputs``.
    text_field: the JSON field (.jsonl) or column (.parquet) that holds a document's text.
    stats: counters to fill while reading (optional).
    max_line_bytes: longer lines are split (see ``split_long_line``).
    fs: what opens the files: an object with ``open(path, "rb")`` (a seekable binary file
      object) and ``getsize(path)``; default roberta_tf.common.files (local paths and TF's URLs).
  Raises:
    CorpusError naming the file on unreadable or malformed input.
  """
  fs = fs if fs is not None else files_lib
  stats = stats if stats is not None else CorpusStats()
  if files == [STDLIB]:
    docs = stdlib_documents()
    stats.files = 1
    stats.total_bytes = sum(len(s.encode("utf-8")) + 1 for d in docs for s in d)
    for doc in docs:
      doc = _split_sentences(doc, max_line_bytes, stats)
      stats.bytes_read += sum(len(s.encode("utf-8")) + 1 for s in doc)
      stats.documents += 1
      stats.sentences += len(doc)
      yield doc
    return
  sizes = [fs.getsize(f) for f in files]
  stats.total_bytes = sum(sizes)
  done = 0
  for path, size in zip(files, sizes):
    stats.files += 1
    for doc in _iter_file(path, text_field, stats, max_line_bytes, done, fs):
      stats.documents += 1
      stats.sentences += len(doc)
      yield doc
    done += size
    stats.bytes_read = done
