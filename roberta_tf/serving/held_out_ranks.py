"""Masked words from the held-out split, ranked by the model and by the unigram baseline.

Whether a masked LM uses context shows in where it ranks the right word: the unigram baseline
ranks every word by its corpus frequency wherever it stands, so a model that learned nothing
about context ranks words like the baseline does. `fill_mask --held_out` prints examples and
the median ranks; the quickstart ends with them.

The examples are chosen by a fixed rule, never by hand:
- the held-out ("validation") sequences in shard order, the first `sample` of them;
- in each, the masked word is the whole-word token (a space, then letters only, and not followed
  by a token that goes on with the word: " function", not " func" + "tion" or " (") nearest the
  middle of the sequence, within its middle half; a sequence without one gives no example;
- its context is up to `context` tokens on each side, stopping at a special token (a document
  boundary inside a FULL-SENTENCES sequence); the printed example shows SHOWN_CONTEXT of them.
A rank is 1 + the number of ordinary (non-special) ids scored above the right one: 1 is the
first guess. The model's scores are the SavedModel's `mlm_logits` on `<s> left <mask> right
</s>`; the baseline's are the train split's token counts (data/unigram.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.data import dataset_info, example_spec, unigram
from roberta_tf.tokenization import tokenizer, vocab_files

DEFAULT_CONTEXT = 64  # the model sees up to this many tokens each side (a 128-token sequence)
SHOWN_CONTEXT = 16  # the printed example shows this many
DEFAULT_SAMPLE = 200


@dataclasses.dataclass(frozen=True)
class Example:
  """One masked word: its ids of context on each side and the id to predict."""
  left: tuple[int, ...]
  target: int
  right: tuple[int, ...]


@dataclasses.dataclass(frozen=True)
class Ranked:
  """An example with the model's rank of its target, the baseline's, and the model's top ids
  with their probabilities (float, summing to at most 1)."""
  example: Example
  model_rank: int
  unigram_rank: int
  top: tuple[tuple[int, float], ...]


def continuing_ids(token_bytes: Sequence[bytes | None]) -> np.ndarray:
  """bool [V]: the ids whose bytes start with a letter or digit (they go on with a word)."""
  def goes_on(b):
    text = (b or b"")[:4].decode("utf-8", "ignore")
    return bool(text) and text[0].isalnum()
  return np.array([goes_on(b) for b in token_bytes], dtype=bool)


def whole_word_ids(token_bytes: Sequence[bytes | None]) -> np.ndarray:
  """bool [V]: the ids whose bytes are a space then one or more letters (a whole word)."""
  def is_word(b):
    if not b or not b.startswith(b" "):
      return False
    try:
      return b[1:].decode("utf-8").isalpha()  # "".isalpha() is False
    except UnicodeDecodeError:  # a piece of a multi-byte character
      return False
  return np.array([is_word(b) for b in token_bytes], dtype=bool)


def pick_example(ids: Sequence[int], is_word: np.ndarray, is_special: np.ndarray,
                 context: int = DEFAULT_CONTEXT,
                 continues_word: np.ndarray | None = None) -> Example | None:
  """The rule's example in one stored sequence (`<s> ... </s>`), or None.

  `continues_word` (bool [V]): the ids that go on with a word (a letter or digit first); a
  candidate followed by one is not a whole word. None: no id does.
  """
  if continues_word is None:
    continues_word = np.zeros(len(is_word), bool)
  ids = np.asarray(ids, np.int64)
  n = len(ids)
  lo, hi = n // 4, (3 * n) // 4
  inside = (ids >= 0) & (ids < len(is_word))
  # A whole word: its token is a space then letters, and the next token does not go on with
  # the word (" que" + "ued" is not one). p + 1 < n: p stops before the last token.
  words = [p for p in range(max(lo, 1), min(hi + 1, n - 1))
           if inside[p] and is_word[ids[p]] and not is_special[ids[p]]
           and not (inside[p + 1] and continues_word[ids[p + 1]])]
  if not words:
    return None
  p = min(words, key=lambda q: (abs(2 * q - n), q))
  left, right = [], []
  for q in range(p - 1, max(p - 1 - context, -1), -1):
    if not inside[q] or is_special[ids[q]]:
      break
    left.append(int(ids[q]))
  for q in range(p + 1, min(p + 1 + context, n)):
    if not inside[q] or is_special[ids[q]]:
      break
    right.append(int(ids[q]))
  return Example(tuple(reversed(left)), int(ids[p]), tuple(right))


def rank_of(scores: np.ndarray, target: int, ordinary: np.ndarray) -> int:
  """1 + the number of ordinary ids whose score is above `target`'s."""
  return 1 + int(np.count_nonzero(ordinary & (scores > scores[target])))


def model_inputs(examples: Sequence[Example], bos: int, eos: int, mask: int, pad: int
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(input_ids int32 [N, L], padding_mask int32 [N, L], mask position int [N]) of
  `<s> left <mask> right </s>`, padded to the longest."""
  rows = [(bos, *e.left, mask, *e.right, eos) for e in examples]
  width = max(len(r) for r in rows)
  input_ids = np.full((len(rows), width), pad, np.int32)
  padding_mask = np.zeros((len(rows), width), np.int32)
  for i, row in enumerate(rows):
    input_ids[i, :len(row)] = row
    padding_mask[i, :len(row)] = 1
  positions = np.array([1 + len(e.left) for e in examples])
  return input_ids, padding_mask, positions


def rank_examples(examples: Sequence[Example], mlm_logits: Callable, unigram_counts: np.ndarray,
                  special_ids: dict[str, int], top_k: int = 3,
                  batch_size: int = 8) -> list[Ranked]:
  """Ranks each example's target under the model and the unigram counts.

  Args:
    mlm_logits: (input_ids int32 [N, L], padding_mask int32 [N, L]) -> logits [N, L, V]
      (numpy or tensors; the SavedModel's `mlm_logits` signature, wrapped).
    unigram_counts: int [V], the train split's count of each id.
    special_ids: {"bos", "eos", "mask", "pad", ...} -> id; special ids are never ranked.
  """
  vocab_size = len(unigram_counts)
  ordinary = np.ones(vocab_size, bool)
  ordinary[[i for i in special_ids.values() if 0 <= i < vocab_size]] = False
  counts = np.asarray(unigram_counts, np.float64)
  ranked = []
  for start in range(0, len(examples), batch_size):
    batch = examples[start:start + batch_size]
    input_ids, padding_mask, positions = model_inputs(
        batch, special_ids["bos"], special_ids["eos"], special_ids["mask"], special_ids["pad"])
    # Only the masked rows in float64: [N, L, V] logits of a 50K vocab are large.
    logits = np.asarray(mlm_logits(input_ids, padding_mask))
    at_mask = logits[np.arange(len(batch)), positions].astype(np.float64)  # [N, V]
    for i, example in enumerate(batch):
      scores = np.where(ordinary, at_mask[i], -np.inf)
      probs = np.exp(scores - scores.max())
      probs /= probs.sum()
      top = np.argsort(-scores, kind="stable")[:top_k]
      ranked.append(Ranked(example, rank_of(scores, example.target, ordinary),
                           rank_of(counts, example.target, ordinary),
                           tuple((int(t), float(probs[t])) for t in top)))
  return ranked


def median_ranks(ranked: Sequence[Ranked]) -> tuple[float, float]:
  """(the model's median rank, the baseline's) over `ranked`."""
  return (float(np.median([r.model_rank for r in ranked])),
          float(np.median([r.unigram_rank for r in ranked])))


def format_ranked(ranked: Sequence[Ranked], decode: Callable[[Sequence[int]], str],
                  shown: int) -> str:
  """The first `shown` examples as text (two lines each), then the medians over all."""
  lines = []
  for n, r in enumerate(ranked[:shown], 1):
    e = r.example
    text = (decode(e.left[-SHOWN_CONTEXT:]) + " <mask>" + decode(e.right[:SHOWN_CONTEXT])).strip()
    guesses = ", ".join(f"{decode([t])!r} {p:.2f}" for t, p in r.top)
    lines.append(f"{n:2d}. ...{text}...")
    lines.append(f"    answer {decode([e.target])!r}: rank {r.model_rank} under the model "
                 f"(its top: {guesses}), {r.unigram_rank} under the unigram baseline")
  model, unigram = median_ranks(ranked)
  lines.append(f"median rank of the masked word over {len(ranked)} held-out examples: "
               f"model {model:g}, unigram baseline {unigram:g} (1 = the first guess; the "
               "baseline ranks words by corpus frequency, ignoring context)")
  return "\n".join(lines)


def read_held_out(data_dir: str, vocab_dir: str, sample: int = DEFAULT_SAMPLE,
                  context: int = DEFAULT_CONTEXT, split: str = "validation", warn=print):
  """(examples, the train split's unigram counts int64 [V], special ids, decode) of a shard dir.

  `decode(ids) -> str` turns ids back into text with `vocab_dir`'s vocab.json, which must be
  of the vocabulary the shards were encoded with (vocab_files.VocabId, checked against
  dataset_info.json; `warn` takes the line saying an older record was compared in part).
  Raises DatasetInfoError / VocabFileError / DamagedShardError naming the file at fault.
  """
  info = dataset_info.read(data_dir)
  vocab_json, _ = vocab_files.paths(vocab_dir)
  dataset_info.check_compatible(info, vocab=vocab_files.VocabId.of_dir(vocab_dir),
                                vocab_side=f"--vocab_dir={vocab_dir!r}", where=data_dir,
                                warn=warn)
  table = tokenizer.token_bytes_table(vocab_files.read_vocab(vocab_json))
  vocab_size = int(info["vocab"]["size"])
  special = {k: int(v) for k, v in info["special_ids"].items()}
  is_special = np.zeros(vocab_size, bool)
  is_special[[i for i in special.values() if 0 <= i < vocab_size]] = True
  is_word = whole_word_ids(table[:vocab_size])
  continues_word = continuing_ids(table[:vocab_size])
  compression = dataset_info.COMPRESSIONS[info.get("compression", "none")]
  records = tf.data.TFRecordDataset(dataset_info.split_files(data_dir, info, split),
                                    compression_type=compression).take(sample).batch(256)
  examples = []
  for batch in records:
    for ids in example_spec.parse_batch(batch).to_list():
      example = pick_example(ids, is_word, is_special, context, continues_word)
      if example is not None:
        examples.append(example)
  counts = unigram.token_counts(data_dir, vocab_size, sorted(special.values()))

  def decode(ids):
    return b"".join(table[i] for i in ids).decode("utf-8", "replace")
  return examples, counts, special, decode
