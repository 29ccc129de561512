"""What masking needs to know about the vocabulary: its size, special ids, word-start pieces.

Read straight from a vocabulary folder of either kind (GPT-2/RoBERTa `vocab.json`, piece → id;
or an HF `tokenizer.json`, tokenization/vocabulary.py), so the pipeline does not need the
tokenizer itself. A piece starts a word when it begins with "Ġ" (U+0120), the byte-level BPE
stand-in for the space before a word; whole-word masking also treats the piece right after a
special token or after a whitespace-only piece as a word start (see masking.py), and a
whitespace-only piece is a word of its own: ModernBERT's vocabulary splits "a  b" into a, "  "
(an added token of two spaces), b, and "a\n\nb" is a, "ĊĊ", b in both kinds, so `b` starts a
word without a "Ġ" and the whitespace does not join `a`'s word.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from roberta_tf.common import files
from roberta_tf.tokenization import tokenizer_json, vocab_files, vocabulary
from roberta_tf.tokenization.vocab_files import SPECIAL_TOKENS, VOCAB_FILE

SPACE_MARKER = "\u0120"  # "Ġ": byte-level BPE's picture of b" ".
# Byte-level BPE's pictures of the whitespace bytes \t \n \v \f \r and space (GPT-2's
# bytes_to_unicode maps each of these unprintable bytes b to chr(256 + b)).
_SPACE_PICTURES = frozenset(chr(256 + b) for b in b"\t\n\v\f\r ")
# The roles every vocabulary has ("unk" may be absent from a tokenizer.json).
REQUIRED_ROLES = ("bos", "pad", "eos", "mask")


def is_space_piece(piece: str) -> bool:
  """Whether a vocabulary entry is whitespace only: a byte-level piece of whitespace bytes
  ("ĠĠ", "Ċ") or an added token of whitespace text (ModernBERT's "  ")."""
  return bool(piece) and (piece.isspace() or all(c in _SPACE_PICTURES for c in piece))


def _starts_word(piece: str) -> bool:
  """A piece that begins a word: "Ġ" first, or whitespace only (a word of its own)."""
  return piece.startswith(SPACE_MARKER) or is_space_piece(piece)


def _flags(vocab: dict[str, int], size: int, test) -> np.ndarray:
  flags = np.zeros([size], bool)
  for piece, i in vocab.items():
    flags[i] = test(piece)
  return flags
VocabError = vocab_files.VocabFileError


@dataclasses.dataclass(frozen=True, eq=False)
class VocabInfo:
  """The vocabulary facts the input pipeline uses.

  Attributes:
    vocab_size: number of ids (max id + 1).
    special_ids: {"bos", "pad", "eos", "unk", "mask"} → id ("unk" may be absent). None of them
      is ever selected for masking or drawn as a random replacement.
    word_start: bool [vocab_size], True where the piece begins with "Ġ" or is whitespace only
      (`is_space_piece`). None when unknown
      (built from ids only); whole-word masking then refuses to run.
    space: bool [vocab_size], True where the piece is whitespace only (`is_space_piece`): the
      piece after it starts a word. None: no such pieces known.
    vocab_id: the vocabulary by content (vocab_files.VocabId), or None; checked against
      dataset_info.json.
  """
  vocab_size: int
  special_ids: dict[str, int]
  word_start: np.ndarray | None = None
  vocab_id: vocab_files.VocabId | None = None
  space: np.ndarray | None = None

  def __post_init__(self):
    missing = [n for n in REQUIRED_ROLES if n not in self.special_ids]
    if missing:
      raise VocabError(f"special ids lack {missing}")
    bad = {n: i for n, i in self.special_ids.items() if not 0 <= i < self.vocab_size}
    if bad:
      raise VocabError(f"special ids {bad} are outside [0, {self.vocab_size})")
    if self.word_start is not None and self.word_start.shape != (self.vocab_size,):
      raise VocabError(f"word_start has shape {self.word_start.shape}, want ({self.vocab_size},)")

  @property
  def pad_id(self) -> int:
    return self.special_ids["pad"]

  @property
  def mask_id(self) -> int:
    return self.special_ids["mask"]

  def special_flags(self) -> np.ndarray:
    """bool [vocab_size]: True at the special ids."""
    flags = np.zeros([self.vocab_size], bool)
    special = list(self.special_ids.values())
    flags[special] = True
    return flags

  @classmethod
  def from_vocab_json(cls, path: str,
                      vocab_id: vocab_files.VocabId | None = None) -> VocabInfo:
    """Reads a GPT-2/RoBERTa vocab.json; ids must be exactly 0..V-1 (each once).

    Args:
      path: the vocab.json.
      vocab_id: its vocabulary's identity if the caller knows it (else that of the vocab.json
        and merges.txt in its directory, computed here).
    """
    vocab = vocab_files.read_vocab(path, dense=True)
    size = len(vocab)
    return cls(vocab_size=size,
               special_ids={n: vocab[t] for n, t in SPECIAL_TOKENS.items()},
               word_start=_flags(vocab, size, _starts_word),
               vocab_id=vocab_id or vocab_files.VocabId.of_dir(files.dirname(path)),
               space=_flags(vocab, size, is_space_piece))

  @classmethod
  def from_tokenizer_json(cls, vocab_dir: str,
                          vocab_id: vocab_files.VocabId | None = None) -> VocabInfo:
    """Reads `vocab_dir`'s tokenizer.json (the roles as vocabulary.Vocabulary.of_dir has them)."""
    found = vocabulary.Vocabulary.of_dir(vocab_dir)
    vocab = tokenizer_json.read(tokenizer_json.path_in(vocab_dir)).vocab
    return cls(vocab_size=found.size, special_ids=dict(found.special_ids),
               word_start=_flags(vocab, found.size, _starts_word),
               vocab_id=vocab_id or vocab_files.VocabId.of_dir(vocab_dir),
               space=_flags(vocab, found.size, is_space_piece))

  @classmethod
  def from_dir(cls, vocab_dir: str, vocab_id: vocab_files.VocabId | None = None) -> VocabInfo:
    """Reads a vocabulary folder of either kind (the directory the tokenizer is built from):
    vocab.json (+ merges.txt), else tokenizer.json."""
    if vocab_files.vocabulary_files(vocab_dir)[:1] == [vocab_files.TOKENIZER_FILE]:
      return cls.from_tokenizer_json(vocab_dir, vocab_id)
    return cls.from_vocab_json(files.join(vocab_dir, VOCAB_FILE), vocab_id)

  @classmethod
  def from_dataset_info(cls, info: dict) -> VocabInfo:
    """Size and special ids as the shards recorded them (no word starts: no whole-word masking)."""
    return cls(vocab_size=int(info["vocab"]["size"]),
               special_ids={n: int(i) for n, i in info["special_ids"].items()},
               word_start=None, vocab_id=vocab_files.VocabId.of_record(info["vocab"]))

  @classmethod
  def for_dataset(cls, data_dir: str, info: dict, vocab_dir: str | None = None) -> VocabInfo:
    """The vocabulary of a shard directory.

    `vocab_dir` if given; else the vocabulary `find_vocab_dir` finds (the one the shards were
    encoded with); else the size and special ids recorded in dataset_info.json (no word starts).
    """
    if vocab_dir:
      return cls.from_dir(vocab_dir)
    found = find_vocab_dir(data_dir, info)
    if found:
      return cls.from_dir(found, vocab_id=vocab_files.VocabId.of_record(info["vocab"]))
    return cls.from_dataset_info(info)


def find_vocab_dir(data_dir: str, info: dict) -> str | None:
  """The directory holding the vocabulary the shards in `data_dir` were encoded with, or None.

  Looks beside the shards (data_prep copies vocab.json + merges.txt, or tokenizer.json, there),
  then in the vocab_dir data_prep recorded (as given, or relative to `data_dir`); a candidate
  counts only when its files are the vocabulary dataset_info.json records (VocabId.same: its
  vocab.json and merges.txt, or vocab.json alone in a record written before merges.txt was;
  its tokenizer.json).
  """
  recorded = (info.get("source") or {}).get("vocab_dir") or ""
  shards = vocab_files.VocabId.of_record(info["vocab"])
  for candidate in (data_dir, recorded, files.join(data_dir, recorded) if recorded else ""):
    if candidate and vocabulary.is_vocab_dir(candidate):
      found = vocab_files.VocabId.of_dir(candidate)
      if found is not None and found.same(shards):
        return candidate
  return None


def shards_vocabulary(data_dir: str, info: dict) -> tuple[vocab_files.VocabId, str | None]:
  """(the vocabulary the shards in `data_dir` were encoded with, as dataset_info.json records
  it; the directory holding its files, `find_vocab_dir`, or None)."""
  return vocab_files.VocabId.of_record(info["vocab"]), find_vocab_dir(data_dir, info)
