"""A grown vocabulary: which new ids exist and the old pieces that spell each; and the one
decision of whether a model's vocabulary may meet another (shards, a vocabulary directory).

Continued pretraining on shards encoded with a grown vocabulary (`data_prep.train_tokenizer
--extend_from`, data_prep/vocab_extension.py) keeps every old id, so the model's token
embedding, its tied MLM decoder and the decoder's bias keep their rows and gain one per new id
(models/growth.py grows the weights). `plan(old_dir, new_dir)` checks that the new vocab.json
extends the model's (every old token at its old id, the new ids right after, the old merges
first in the new merges.txt) and finds, for each new token, the OLD pieces that spell it: the
old merges applied to the token's bytes by rank (byte-level BPE of the token as one word, as
the old tokenizer encodes it). models/growth.py starts a new row from them (`mean`) or afresh.

`check(model, shards, ...)` is what every place where a model meets shards or a vocabulary asks
(vocabularies by content: vocab_files.VocabId): the same vocabulary always passes; one that
extends the model's passes only where the model may grow (`train --init_from`), with its plan;
anything else is refused in one line naming both sides.
"""

from __future__ import annotations

import dataclasses

from roberta_tf.common import files
from roberta_tf.tokenization import vocab_files
from roberta_tf.tokenization.tokenizer import bytes_to_unicode
from roberta_tf.tokenization.vocab_files import VocabId


class VocabGrowthError(ValueError):
  """Two vocabularies that may not meet (another vocabulary, or one that does not extend the
  model's); the one-line message names both sides (flag and directory or file)."""


@dataclasses.dataclass(frozen=True)
class VocabGrowth:
  """A model vocabulary of `old_size` ids grown to `new_size`.

  Attributes:
    old_size, new_size: ids before and after (new ids: old_size .. new_size - 1).
    tokens: the new tokens (byte-level strings), by id.
    pieces: per new token, the old ids that spell it (the old merges applied to its bytes).
  """
  old_size: int
  new_size: int
  tokens: tuple[str, ...]
  pieces: tuple[tuple[int, ...], ...]


def bpe(symbols: list[str], ranks: dict[tuple[str, str], int]) -> list[str]:
  """Byte-level BPE of one word given as its byte symbols: the lowest-ranked adjacent pair is
  merged (every occurrence, left to right) until no pair has a rank (GPT-2's `bpe`, which
  gives HF `tokenizers`' pieces for a merge list where every token is made before it is used)."""
  word = list(symbols)
  while len(word) > 1:
    best = min(zip(word, word[1:]), key=lambda p: ranks.get(p, float("inf")))
    if best not in ranks:
      break
    merged, i = [], 0
    while i < len(word):
      if i + 1 < len(word) and (word[i], word[i + 1]) == best:
        merged.append(word[i] + word[i + 1])
        i += 2
      else:
        merged.append(word[i])
        i += 1
    word = merged
  return word


def _byte_symbols(token: str) -> list[str]:
  """A token's byte symbols (GPT-2's alphabet); a token outside that alphabet (an added
  special-style token) is spelled by the symbols of its UTF-8 bytes."""
  alphabet = bytes_to_unicode()
  known = set(alphabet.values())
  if all(c in known for c in token):
    return list(token)
  return [alphabet[b] for b in token.encode("utf-8")]


def plan(old_dir: str, new_dir: str, *, old_flag: str = "--init_from",
         new_flag: str = "--train_data") -> VocabGrowth | None:
  """How the vocabulary in `old_dir` (the model's) grows to the one in `new_dir` (the shards').

  Returns None when both are the same vocabulary (token -> id and merges: nothing to grow).

  Raises:
    VocabGrowthError, one line naming both flags and files: a vocab.json is missing, or the
      new one does not extend the old (smaller, an old token missing or at another id, or the
      old merges not first in the new merges.txt).
  """
  old_paths, new_paths = vocab_files.paths(old_dir), vocab_files.paths(new_dir)
  for path, flag, value in ((old_paths[0], old_flag, old_dir), (new_paths[0], new_flag, new_dir)):
    if not files.isfile(path):
      raise VocabGrowthError(
          f"{flag}={value!r} has no {vocab_files.VOCAB_FILE}: growing the model's vocabulary "
          "needs the model's and the shards' vocab.json, to tell which ids are the model's")
  old, old_merges = _read(*old_paths)
  new, new_merges = _read(*new_paths)
  problem = extension_problem(old, old_merges, new, new_merges, old_flag, new_flag)
  if problem:
    raise VocabGrowthError(
        f"the vocabulary of {new_flag}={new_dir!r} ({new_paths[0]}, {len(new)} tokens) does "
        f"not extend that of {old_flag}={old_dir!r} ({old_paths[0]}, {len(old)} tokens): "
        f"{problem}; a "
        "grown vocabulary keeps every old token at its id and the old merges first "
        "(data_prep.train_tokenizer --extend_from writes one)")
  if len(new) == len(old):
    return None
  ranks = {pair: r for r, pair in enumerate(old_merges or [])}
  by_id = {i: t for t, i in new.items()}
  tokens = tuple(by_id[i] for i in range(len(old), len(new)))
  pieces = []
  for token in tokens:
    spelled = bpe(_byte_symbols(token), ranks)
    ids = tuple(old[p] for p in spelled if p in old)
    if len(ids) != len(spelled):  # a merge list that skips a token: fall back to its bytes
      ids = tuple(old[s] for s in _byte_symbols(token))
    pieces.append(ids)
  return VocabGrowth(len(old), len(new), tokens, tuple(pieces))


def _read(vocab_path: str, merges_path: str):
  """(token -> id, dense; merges by rank, or None without merges.txt)."""
  merges = vocab_files.read_merges(merges_path) if files.isfile(merges_path) else None
  return vocab_files.read_vocab(vocab_path, dense=True), merges


def extension_problem(old: dict[str, int], old_merges, new: dict[str, int], new_merges,
                      old_flag: str, new_flag: str) -> str:
  """Why `new` does not extend `old` (vocab.json maps, merges lists or None), or ""."""
  moved = [(t, i, new.get(t)) for t, i in sorted(old.items(), key=lambda kv: kv[1])
           if new.get(t) != i]
  if moved:
    token, i, there = moved[0]
    return (f"{len(moved)} of the {len(old)} ids of {old_flag}'s hold other tokens in "
            f"{new_flag}'s, e.g. {token!r} is id {i} in {old_flag}'s and "
            f"{'absent' if there is None else f'id {there}'} in {new_flag}'s")
  if len(new) < len(old):
    return f"it is smaller ({len(new)} < {len(old)} tokens)"
  if old_merges is not None and new_merges is not None and (
      new_merges[:len(old_merges)] != old_merges):
    rank = next((r for r, (a, b) in enumerate(zip(old_merges, new_merges)) if a != b),
                len(new_merges))
    return (f"the tokens match but merges.txt differs from rank {rank} on: it encodes text "
            "differently")
  return ""


def _print(line: str) -> None:
  print(line, flush=True)


def check(model: VocabId | None, other: VocabId, *, model_side: tuple[str, str],
          other_side: tuple[str, str], model_dir: str | None, other_dir: str | None,
          grow: bool, hint: str, warn=None) -> VocabGrowth | None:
  """Whether a model's vocabulary (`model`, by content) may meet `other` (shards' or a
  vocabulary directory's); the growth plan when it extends the model's and `grow`.

  Args:
    model / other: the two vocabularies; `model` None (a model dir that records none) passes.
    model_side / other_side: (flag, value) naming each side in the message.
    model_dir / other_dir: directories holding each side's vocab.json + merges.txt, or None:
      with both, vocabularies of equal content but other bytes pass, the message counts the
      ids that differ, and a growth can be planned.
    grow: the model may grow to a vocabulary that extends its own (`train --init_from`).
    hint: what to do instead, ending the refusal.
    warn: takes the one warning line (default: printed) when the two are the same by what both
      record but one records a file the other does not (vocab_files.unchecked_warning: an
      older record).
  Returns:
    None (the same vocabulary), or the growth plan (`grow` only).
  Raises:
    VocabGrowthError: one line naming both sides.
  """
  (model_flag, model_value), (other_flag, other_value) = model_side, other_side
  if model is None:
    return None
  if model.same(other):
    line = vocab_files.unchecked_warning(model, f"{model_flag}={model_value!r}", other,
                                         f"{other_flag}={other_value!r}")
    if line:
      (warn or _print)(line)
    return None
  both = bool(model_dir and other_dir and vocab_files.present(model_dir)
              and vocab_files.present(other_dir))
  if grow:
    if not both:
      raise VocabGrowthError(
          f"{other_flag}={other_value!r} ({other.describe()}) is not of the vocabulary of "
          f"{model_flag}={model_value!r} ({model.describe()}), and growing the model needs both "
          "vocab.json files (the shards' beside them, as build_shards copies it) to check that "
          "it extends the model's")
    return plan(model_dir, other_dir, old_flag=model_flag, new_flag=other_flag)
  detail = ""
  if both:
    old, old_merges = _read(*vocab_files.paths(model_dir))
    new, new_merges = _read(*vocab_files.paths(other_dir))
    if old == new and old_merges == new_merges:
      return None  # the same content in other bytes (e.g. vocab.json re-indented)
    detail = "; " + (extension_problem(old, old_merges, new, new_merges, model_flag, other_flag)
                     or f"{other_flag}'s extends it with {len(new) - len(old)} tokens")
  raise VocabGrowthError(
      f"{other_flag}={other_value!r} is of another vocabulary ({other.describe()}) than "
      f"{model_flag}={model_value!r} ({model.describe()}){detail}: {hint}")
