"""A grown vocabulary for a model: which new ids exist, and what their rows start as.

Continued pretraining on shards encoded with a grown vocabulary (`data_prep.train_tokenizer
--extend_from`, data_prep/vocab_extension.py) keeps every old id, so the model's token
embedding, its tied MLM decoder and the decoder's bias keep their rows and gain one per new id.
`plan(old_dir, new_dir)` checks that the new vocab.json extends the model's (every old token
at its old id, the new ids right after) and finds, for each new token, the OLD pieces that
spell it: the old merges applied to the token's bytes by rank (byte-level BPE of the token as
one word, as the old tokenizer encodes it). A new row then starts as

- `mean` (the default; the usual initialisation of a token spelled by existing pieces): the
  mean of its pieces' embedding rows, and its decoder bias the mean of its pieces' biases, so
  the new token starts where the model already puts its spelling;
- `normal`: N(0, initializer_range) (the model's own init) and bias 0.

The old rows are copied unchanged, so on inputs made of old ids the logits over the old ids are
the source model's exactly (the softmax over the grown vocabulary is not: the new tokens take a
share of the probability).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from roberta_tf.common import files
from roberta_tf.tokenization import vocab_files
from roberta_tf.tokenization.tokenizer import bytes_to_unicode

NEW_TOKEN_INITS = ("mean", "normal")


class VocabGrowthError(ValueError):
  """The grown vocabulary does not extend the model's; the message names the files."""


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

  Returns None when both have the same size (nothing to grow).

  Raises:
    VocabGrowthError: a vocab.json is missing, the new one is smaller, or an old token is
      missing from the new one or has another id there (names the first).
  """
  old_vocab_path, old_merges_path = vocab_files.paths(old_dir)
  new_vocab_path = vocab_files.paths(new_dir)[0]
  for path, flag, value in ((old_vocab_path, old_flag, old_dir),
                            (new_vocab_path, new_flag, new_dir)):
    if not files.isfile(path):
      raise VocabGrowthError(
          f"{flag}={value!r} has no {vocab_files.VOCAB_FILE}: growing the model's vocabulary "
          "needs the model's and the shards' vocab.json, to tell which ids are the model's")
  old = vocab_files.read_vocab(old_vocab_path, dense=True)
  new = vocab_files.read_vocab(new_vocab_path, dense=True)
  if len(new) == len(old) and new == old:
    return None
  moved = [(t, i, new.get(t)) for t, i in sorted(old.items(), key=lambda kv: kv[1])
           if new.get(t) != i]
  if len(new) < len(old) or moved:
    first = (f"; e.g. {moved[0][0]!r} is id {moved[0][1]} in the model's and "
             f"{'absent' if moved[0][2] is None else f'id {moved[0][2]}'} in the shards'"
             if moved else "")
    raise VocabGrowthError(
        f"the shards' vocabulary ({new_vocab_path}, {len(new)} tokens) does not extend the "
        f"model's ({old_vocab_path}, {len(old)} tokens){first}: a grown vocabulary keeps every "
        "old token at its id (data_prep.train_tokenizer --extend_from writes one)")
  ranks = {pair: r for r, pair in enumerate(vocab_files.read_merges(old_merges_path))
           } if files.isfile(old_merges_path) else {}
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


def grown_rows(old: np.ndarray, growth: VocabGrowth, init: str, stddev: float,
               rng: np.random.Generator) -> np.ndarray:
  """A token table [old_size, H] -> [new_size, H]: old rows kept, new rows by `init`."""
  _check_init(init)
  if init == "mean":
    new = np.stack([old[list(p)].mean(axis=0) for p in growth.pieces])
  else:
    new = rng.normal(0.0, stddev, size=(len(growth.tokens), old.shape[1]))
  return np.concatenate([old, new.astype(old.dtype)], axis=0)


def grown_bias(old: np.ndarray, growth: VocabGrowth, init: str) -> np.ndarray:
  """The decoder bias [old_size] -> [new_size]: mean of the pieces' biases, or 0 (normal)."""
  _check_init(init)
  if init == "mean":
    new = np.array([old[list(p)].mean() for p in growth.pieces], old.dtype)
  else:
    new = np.zeros(len(growth.tokens), old.dtype)
  return np.concatenate([old, new])


def _check_init(init: str) -> None:
  if init not in NEW_TOKEN_INITS:
    raise ValueError(f"--new_token_init={init!r}: must be one of {', '.join(NEW_TOKEN_INITS)}")
