"""The one owner of a byte-level BPE vocabulary's files: `vocab.json` and `merges.txt`.

Their names, the RoBERTa special tokens, reading them (with the checks each reader needs),
hashing and copying them live here and nowhere else; the tokenizer, data_prep, the input
pipeline, training, fine-tuning, export and conversion all come here.

Paths may be URLs (gs://, ram://, ...): read and copied through roberta_tf.common.files.

Formats (GPT-2 / RoBERTa, as HF `tokenizers` reads them):
  vocab.json   a JSON object: byte-level piece -> int id >= 0, each id once
  merges.txt   an optional `#version` line, then one merge a line: "left right", by rank

A vocabulary is known by its content (`VocabId`), the one identity every check compares: the
sha256 of each file that defines its tokenization (vocab.json and merges.txt; tokenizer.json
for a Hugging Face tokenizer file), as data_prep records them in dataset_info.json ("vocab":
{"sha256", "merges_sha256", "size"}). A model dir's is computed when read, from the files
beside its checkpoints (models/model_dir.py `ModelDir.vocabulary`): nothing stored can go
stale. A record written before merges.txt was hashed holds vocab.json's alone: two vocabularies
are then compared by what both record, and `unchecked_warning` says so in one line.
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
TOKENIZER_FILE = "tokenizer.json"  # a Hugging Face tokenizer file
# The files that define a vocabulary's tokenization, one tuple per kind: byte-level BPE's two
# files, or a tokenizer.json alone (`VocabId.of_dir` takes the first kind present).
DEFINING_FILES = (FILES, (TOKENIZER_FILE,))
# An HF folder's files that name a tokenizer.json's special tokens (cls_token, ...): they go
# where its tokenizer.json goes (tokenization/vocabulary.py reads them).
ROLE_FILES = ("special_tokens_map.json", "tokenizer_config.json")

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
  """A vocabulary by its content: the sha256 of each file that defines its tokenization.

  The one identity every check compares (shards against a model dir, eval data against train
  data, an export or --vocab_dir against shards or a model): `same` is the one rule.

  Attributes:
    files: ((name, sha256 hex of its bytes), ...) sorted by name, of the files that define the
      tokenization (DEFINING_FILES): vocab.json + merges.txt for a byte-level BPE (records
      written before merges.txt was hashed hold vocab.json alone), tokenizer.json for a Hugging
      Face tokenizer file.
    size: ids (max id + 1).
  """
  files: tuple[tuple[str, str], ...]
  size: int

  def sha256_of(self, name: str) -> str | None:
    """The recorded sha256 of file `name`, or None when it is not recorded."""
    return dict(self.files).get(name)

  @property
  def digest(self) -> str:
    """One sha256 over the (name, sha256) pairs: equal for equal `files`."""
    return hashlib.sha256("".join(f"{n} {h}\n" for n, h in self.files).encode()).hexdigest()

  def same(self, other: VocabId) -> bool:
    """The same vocabulary: every file both record has equal bytes, and they record one in
    common at least (`unchecked` names the files only one of them records)."""
    mine, theirs = dict(self.files), dict(other.files)
    common = set(mine) & set(theirs)
    return bool(common) and all(mine[n] == theirs[n] for n in common)

  def unchecked(self, other: VocabId) -> tuple[str, ...]:
    """The files one of the two records and the other does not (`same` went without them)."""
    return tuple(sorted(set(dict(self.files)) ^ set(dict(other.files))))

  def describe(self) -> str:
    """`462 tokens, vocab.json sha256 398af66d33db, merges.txt 751fbdcb7429` (for messages)."""
    hashes = ", ".join(f"{n}{' sha256' if i == 0 else ''} {h[:12]}"
                       for i, (n, h) in enumerate(self.ordered()))
    return f"{self.size} tokens, {hashes}"

  def ordered(self) -> list[tuple[str, str]]:
    """`files` in DEFINING_FILES' order (vocab.json before merges.txt), others after."""
    rank = {n: i for i, n in enumerate(n for kind in DEFINING_FILES for n in kind)}
    return sorted(self.files, key=lambda f: (rank.get(f[0], len(rank)), f[0]))

  def record(self) -> dict:
    """As dataset_info.json and config.json record it: {"sha256": vocab.json's,
    "merges_sha256": merges.txt's, "size"}, other files under "files": {name: sha256}."""
    out, others = {}, {}
    for name, sha in self.files:
      if name in _RECORD_KEYS:
        out[_RECORD_KEYS[name]] = sha
      else:
        others[name] = sha
    if others:
      out["files"] = others
    return {**out, "size": self.size}

  @classmethod
  def of(cls, hashes: dict[str, str | None], size: int) -> VocabId:
    """From {file name: sha256} (None: not recorded)."""
    return cls(tuple(sorted((n, h) for n, h in hashes.items() if h)), int(size))

  @classmethod
  def of_dir(cls, directory: str) -> VocabId | None:
    """The vocabulary in `directory`: the files of the first kind in DEFINING_FILES whose first
    file is there (vocab.json, and merges.txt if there; else tokenizer.json), or None."""
    for kind in DEFINING_FILES:
      first = files.join(directory, kind[0])
      if files.isfile(first):
        size = (max(read_vocab(first).values()) + 1 if kind[0] == VOCAB_FILE
                else tokenizer_json_size(first))
        there = [n for n in kind if files.isfile(files.join(directory, n))]
        return cls.of({n: file_sha256(files.join(directory, n)) for n in there}, size)
    return None

  @classmethod
  def of_record(cls, record: dict) -> VocabId:
    """From dataset_info.json's / config.json's "vocab" (`record`'s format; "merges_sha256"
    absent in records written before merges.txt was hashed)."""
    hashes = {name: record.get(key) for name, key in _RECORD_KEYS.items()}
    hashes.update(record.get("files") or {})
    return cls.of({n: h and str(h) for n, h in hashes.items()}, record["size"])


# A vocabulary record's key for each file's sha256 (other files: under "files").
_RECORD_KEYS = {"vocab.json": "sha256", "merges.txt": "merges_sha256"}


def unchecked_warning(a: VocabId, a_side: str, b: VocabId, b_side: str) -> str:
  """"" when `a` and `b` record the same files; else the one warning line saying what `same`
  compared them by and which side records what the other lacks. Sides: "--flag='value'"."""
  missing = {side: [n for n, _ in theirs.files if mine.sha256_of(n) is None]
             for side, mine, theirs in ((a_side, a, b), (b_side, b, a))}
  lacking = "; ".join(f"no {' or '.join(names)} is recorded for {side}"
                      for side, names in missing.items() if names)
  if not lacking:
    return ""
  common = sorted(set(dict(a.files)) & set(dict(b.files)))
  return (f"warning: the vocabularies of {a_side} and {b_side} are compared by "
          f"{' and '.join(common)} alone: {lacking} (a record written before it was hashed), "
          "so they may still tokenize text differently")


def tokenizer_json_size(path: str) -> int:
  """Ids of a Hugging Face tokenizer.json: max id + 1 over its model's vocab (a {piece: id}
  object; a Unigram's [[piece, score], ...] list holds ids 0..n-1) and its added tokens."""
  try:
    doc = json.loads(files.read_bytes(path).decode("utf-8"))
    vocab = doc["model"]["vocab"]
    ids = list(vocab.values()) if isinstance(vocab, dict) else [len(vocab) - 1]
    ids += [int(t["id"]) for t in doc.get("added_tokens") or []]
    return max(ids) + 1
  except Exception as e:
    if not (_read_error(e) or isinstance(e, (UnicodeDecodeError, ValueError, KeyError,
                                             TypeError, AttributeError))):
      raise
    raise VocabFileError(f"cannot read the vocabulary of {path!r}: {e}") from e


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


def vocabulary_files(directory: str) -> list[str]:
  """The names of the vocabulary files in `directory`: vocab.json and merges.txt where present;
  if neither is, tokenizer.json and the ROLE_FILES beside it; else []."""
  names = present(directory)
  if names or not files.isfile(files.join(directory, TOKENIZER_FILE)):
    return names
  return [TOKENIZER_FILE] + [n for n in ROLE_FILES if files.isfile(files.join(directory, n))]


def copy_vocab_files(src_dir: str, dst_dir: str) -> list[str]:
  """Copies the vocabulary files (`vocabulary_files`: vocab.json and merges.txt where present,
  else a tokenizer.json and its role files) from `src_dir` into `dst_dir`.

  Each file is copied under a temporary name and renamed, so a reader never sees half a file.
  Copying a directory onto itself is a no-op. Either side may be a URL. Returns the names
  copied.
  """
  copied = []
  for name in vocabulary_files(src_dir):
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
