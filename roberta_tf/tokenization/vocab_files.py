"""The one owner of a byte-level BPE vocabulary's files: `vocab.json` and `merges.txt`.

Their names, the RoBERTa special tokens, reading them (with the checks each reader needs),
hashing and copying them live here and nowhere else; the tokenizer, data_prep, the input
pipeline, training, fine-tuning, export and conversion all come here.

Paths may be URLs (gs://, ram://, ...): read and copied through roberta_tf.common.files.

Formats (GPT-2 / RoBERTa, as HF `tokenizers` reads them):
  vocab.json   a JSON object: byte-level piece -> int id >= 0, each id once
  merges.txt   an optional `#version` line, then one merge a line: "left right", by rank

A vocabulary is known by its content (`VocabId`): the sha256 of vocab.json's bytes and of
merges.txt's, as data_prep records them in dataset_info.json ("vocab": {"sha256",
"merges_sha256", "size"}). A model dir's is computed when read, from the files beside its
checkpoints (models/model_dir.py `ModelDir.vocabulary`): nothing stored can go stale.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os

from roberta_tf.common import atomic_write, error_text, files

VOCAB_FILE = "vocab.json"
MERGES_FILE = "merges.txt"
FILES = (VOCAB_FILE, MERGES_FILE)

BOS, PAD, EOS, UNK, MASK = "<s>", "<pad>", "</s>", "<unk>", "<mask>"
# The RoBERTa layout's special tokens by the names dataset_info.json's special_ids use.
SPECIAL_TOKENS = {"bos": BOS, "pad": PAD, "eos": EOS, "unk": UNK, "mask": MASK}


class VocabFileError(ValueError):
  """A vocab.json / merges.txt that cannot be used; the message names the file and the problem."""


def _read_error(e: Exception) -> bool:
  """Whether `e` is a failure to read a file: an OSError, or a TF file system's error (URLs)."""
  return isinstance(e, OSError) or error_text.is_tf_error(e)


def file_sha256(path: str) -> str:
  """sha256 (hex) of a file's bytes, read in 1 MB chunks."""
  h = hashlib.sha256()
  with files.open(path, "rb") as f:
    for chunk in iter(lambda: f.read(1 << 20), b""):
      h.update(chunk)
  return h.hexdigest()


@dataclasses.dataclass(frozen=True)
class VocabId:
  """A vocabulary by its content.

  Attributes:
    sha256: of vocab.json's bytes.
    merges_sha256: of merges.txt's bytes; None when unknown (no merges.txt, or shards written
      before it was recorded): then vocab.json alone decides.
    size: ids (max id + 1).
  """
  sha256: str
  merges_sha256: str | None
  size: int

  def same(self, other: VocabId) -> bool:
    """The same vocabulary: equal vocab.json bytes, and equal merges.txt bytes where both are
    known."""
    return self.sha256 == other.sha256 and (
        self.merges_sha256 is None or other.merges_sha256 is None
        or self.merges_sha256 == other.merges_sha256)

  def describe(self) -> str:
    """`462 tokens, vocab.json sha256 398af66d33db, merges.txt 751fbdcb7429` (for messages)."""
    merges = f", merges.txt {self.merges_sha256[:12]}" if self.merges_sha256 else ""
    return f"{self.size} tokens, vocab.json sha256 {self.sha256[:12]}{merges}"

  @classmethod
  def of_dir(cls, directory: str) -> VocabId | None:
    """The vocabulary in `directory` (its vocab.json, and merges.txt if there), or None when it
    has no vocab.json."""
    vocab_path, merges_path = paths(directory)
    if not files.isfile(vocab_path):
      return None
    size = max(read_vocab(vocab_path).values()) + 1
    merges = file_sha256(merges_path) if files.isfile(merges_path) else None
    return cls(file_sha256(vocab_path), merges, size)

  @classmethod
  def of_record(cls, record: dict) -> VocabId:
    """From dataset_info.json's "vocab" ({"sha256", "merges_sha256", "size"})."""
    return cls(str(record["sha256"]), record.get("merges_sha256"), int(record["size"]))


def read_vocab(path: str, dense: bool = False) -> dict[str, int]:
  """Reads a vocab.json (piece -> id).

  Args:
    path: the file.
    dense: also require ids exactly 0..V-1 (each once) and the five special tokens, as the
      input pipeline and data_prep do (the tokenizer accepts gaps: roberta-base's file has none,
      but other GPT-2 style files may).

  Raises:
    VocabFileError naming the file: unreadable or not UTF-8 JSON, not an object of piece ->
    int id >= 0, two pieces with one id, or (dense) gaps or a missing special token.
  """
  try:
    vocab = json.loads(files.read_bytes(path).decode("utf-8"))
  except Exception as e:
    if not (_read_error(e) or isinstance(e, (UnicodeDecodeError, json.JSONDecodeError))):
      raise
    raise VocabFileError(f"cannot read vocab file {path!r}: {e}") from e
  if not isinstance(vocab, dict) or not vocab or not all(
      isinstance(k, str) and type(v) is int and v >= 0  # pylint: disable=unidiomatic-typecheck
      for k, v in vocab.items()):
    raise VocabFileError(f"vocab file {path!r} is not a JSON object of token -> id >= 0")
  if len(set(vocab.values())) != len(vocab):
    raise VocabFileError(f"vocab file {path!r} gives two tokens the same id")
  if dense:
    if max(vocab.values()) != len(vocab) - 1:
      raise VocabFileError(f"{path}: ids are not exactly 0..{len(vocab) - 1}, each once")
    missing = [t for t in SPECIAL_TOKENS.values() if t not in vocab]
    if missing:
      raise VocabFileError(f"{path} lacks the special tokens {missing}")
  return vocab


def read_merges(path: str) -> list[tuple[str, str]]:
  """Reads a merges.txt (`#version` line, then "left right" a line), as HF `tokenizers` does."""
  try:
    lines = files.read_text(path).split("\n")
  except Exception as e:
    if not (_read_error(e) or isinstance(e, UnicodeDecodeError)):
      raise
    raise VocabFileError(f"cannot read merges file {path!r}: {e}") from e
  merges = []
  for lineno, line in enumerate(lines, 1):
    if line.startswith("#version") or not line:
      continue
    parts = line.split(" ")
    if len(parts) != 2 or not parts[0] or not parts[1]:
      raise VocabFileError(f"{path}:{lineno}: expected 'left right', got {line!r}")
    merges.append((parts[0], parts[1]))
  return merges


def paths(directory: str) -> tuple[str, str]:
  """(vocab.json, merges.txt) paths inside ``directory``."""
  return files.join(directory, VOCAB_FILE), files.join(directory, MERGES_FILE)


def present(directory: str) -> list[str]:
  """The names of FILES that exist in ``directory``."""
  return [n for n in FILES if files.isfile(files.join(directory, n))]


def copy_vocab_files(src_dir: str, dst_dir: str) -> list[str]:
  """Copies vocab.json and merges.txt, where present, from `src_dir` into `dst_dir`.

  Each file is copied under a temporary name and renamed, so a reader never sees half a file.
  Copying a directory onto itself is a no-op. Either side may be a URL. Returns the names
  copied.
  """
  copied = []
  for name in present(src_dir):
    src, dst = files.join(src_dir, name), files.join(dst_dir, name)
    if not _same_path(src, dst):
      atomic_write.copy_file(src, dst)
    copied.append(name)
  return copied


def _same_path(a: str, b: str) -> bool:
  """Whether two paths name the same file (by name: a URL is never made absolute)."""
  if files.is_url(a) or files.is_url(b):
    return files.normalize(a) == files.normalize(b)
  return os.path.abspath(a) == os.path.abspath(b)  # local-only: both local, compared by name
