"""Grows a byte-level BPE vocabulary for a new domain: `train_tokenizer --extend_from=VOCAB_DIR
--add_tokens=N` (data_prep/train_tokenizer.py calls `extend`).

The contract (what continued pretraining relies on, roberta_tf/tokenization/vocab_growth.py):
- every old token keeps its id and every old merge its rank; the new tokens take the ids after
  the old ones (V, V+1, ...: `<mask>`, last in a RoBERTa vocabulary, stays where it is), and
  the new merges rank after every old one, one new merge per new token (merge V_merges + k
  makes token V + k);
- so a word is encoded by the grown files exactly as by the old ones, and then the new merges
  apply on top of that: byte-level BPE applies merges by rank, a pair of old tokens made by a
  new merge is only considered once no old merge applies, and a merge only ever makes pairs
  that hold its own (new) token, which no old merge names. A word whose old encoding holds no
  pair of a new merge is encoded as before, id for id.

How the merges are learned: the domain corpus is pre-tokenized as training does (GPT-2's
byte-level split, HF `tokenizers`), each distinct word is encoded with the OLD vocabulary, and
BPE's pair counting runs over those old pieces (weighted by the words' counts): the most
frequent adjacent pair becomes the next merge, ties broken by the pair's text, until
`add_tokens` new tokens exist or no pair is seen `min_frequency` times. A pair whose
concatenation is already a token (an old one, spelled differently by the old merges) is never
made a merge: every new merge adds exactly one token, and no token is made twice.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable

from roberta_tf.common import files as files_lib
from roberta_tf.tokenization import vocab_files


class VocabExtensionError(ValueError):
  """The vocabulary to extend cannot be used; the message names the file."""


def read_old(vocab_dir: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
  """The vocabulary to extend: (token -> id, merges by rank), checked dense (ids 0..V-1)."""
  vocab_path, merges_path = vocab_files.paths(vocab_dir)
  for path in (vocab_path, merges_path):
    if not files_lib.isfile(path):
      raise VocabExtensionError(f"--extend_from={vocab_dir!r}: {path} not found (expected a "
                                "vocabulary directory: vocab.json and merges.txt)")
  return vocab_files.read_vocab(vocab_path, dense=True), vocab_files.read_merges(merges_path)


def count_words(sentences: Iterable[str]) -> Counter:
  """Byte-level words (GPT-2's split, as `tokenizers`' ByteLevel pre-tokenizer gives them, e.g.
  'Ġthou') -> how often each occurs in `sentences`."""
  from tokenizers import pre_tokenizers  # pylint: disable=import-outside-toplevel
  split = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True).pre_tokenize_str
  counts: Counter = Counter()
  for sentence in sentences:
    counts.update(word for word, _ in split(sentence))
  return counts


def old_pieces(words: Iterable[str], vocab: dict[str, int],
               merges: list[tuple[str, str]]) -> dict[str, list[str]]:
  """Each byte-level word's tokens under the old vocabulary (HF `tokenizers`' BPE model)."""
  from tokenizers import models  # pylint: disable=import-outside-toplevel
  model = models.BPE(vocab=dict(vocab), merges=list(merges))
  return {w: [t.value for t in model.tokenize(w)] for w in words}


def learn_merges(word_pieces: dict[str, list[str]], word_counts: dict[str, int],
                 known_tokens: Iterable[str], add_tokens: int,
                 min_frequency: int = 2) -> list[tuple[str, str]]:
  """BPE's pair counting over the words' old pieces: up to `add_tokens` new merges, by rank.

  Args:
    word_pieces: word -> its tokens under the old vocabulary.
    word_counts: word -> occurrences (the pair counts' weights).
    known_tokens: the old vocabulary's tokens (a pair spelling one of them is never merged).
    add_tokens: the most merges (= new tokens) to learn.
    min_frequency: a pair seen fewer times is never merged (>= 1).

  Returns:
    [(left, right)] in rank order; merge k makes the token left + right, new and unique.
  """
  min_frequency = max(1, min_frequency)
  words = [list(word_pieces[w]) for w in sorted(word_pieces)]
  counts = [word_counts[w] for w in sorted(word_pieces)]
  pair_count: Counter = Counter()
  where: dict[tuple[str, str], set[int]] = {}
  for i, symbols in enumerate(words):
    for pair in zip(symbols, symbols[1:]):
      pair_count[pair] += counts[i]
      where.setdefault(pair, set()).add(i)
  known = set(known_tokens)
  # A max-heap by count, ties by the pair's text; stale entries are skipped when popped.
  heap = [(-c, pair) for pair, c in pair_count.items()]
  heapq.heapify(heap)
  merges: list[tuple[str, str]] = []
  while heap and len(merges) < add_tokens:
    negative, pair = heapq.heappop(heap)
    if pair_count.get(pair, 0) != -negative:
      continue  # stale: the count changed since this entry was pushed
    if -negative < min_frequency:
      break
    token = pair[0] + pair[1]
    if token in known:
      continue  # already a token, spelled otherwise by the old merges: never merged
    known.add(token)
    merges.append(pair)
    touched = _merge_everywhere(pair, words, counts, pair_count, where)
    pair_count.pop(pair, None)
    for p in touched:
      c = pair_count.get(p, 0)
      if c <= 0:
        pair_count.pop(p, None)
        where.pop(p, None)
      elif p != pair:
        heapq.heappush(heap, (-c, p))
  return merges


def _merge_everywhere(pair: tuple[str, str], words: list[list[str]], counts: list[int],
                      pair_count: Counter, where: dict[tuple[str, str], set[int]]
                      ) -> set[tuple[str, str]]:
  """Applies the merge `pair` to every word holding it (`words` in place) and moves the pair
  counts (weighted by `counts`) and `where` along; returns the pairs whose count changed."""
  touched: set[tuple[str, str]] = set()
  for i in where.pop(pair, ()):
    symbols = words[i]
    for old in zip(symbols, symbols[1:]):
      pair_count[old] -= counts[i]
      touched.add(old)
    merged = _merge_symbols(symbols, pair)
    words[i] = merged
    for new in zip(merged, merged[1:]):
      pair_count[new] += counts[i]
      where.setdefault(new, set()).add(i)
      touched.add(new)
  return touched


def _merge_symbols(symbols: list[str], pair: tuple[str, str]) -> list[str]:
  """`symbols` with each occurrence of `pair` merged, left to right, non-overlapping: as BPE
  applies a merge."""
  token = pair[0] + pair[1]
  merged, j = [], 0
  while j < len(symbols):
    if j + 1 < len(symbols) and (symbols[j], symbols[j + 1]) == pair:
      merged.append(token)
      j += 2
    else:
      merged.append(symbols[j])
      j += 1
  return merged


def extend(vocab: dict[str, int], merges: list[tuple[str, str]], sentences: Iterable[str],
           add_tokens: int, min_frequency: int = 2
           ) -> tuple[dict[str, int], list[tuple[str, str]], dict[str, int]]:
  """The grown vocabulary: (token -> id, merges by rank, counters).

  The old tokens keep their ids and the old merges their ranks; the new tokens get ids
  max(old id) + 1, ... in the order of their merges. Counters: words (distinct words seen),
  added (new tokens), old_tokens_per_word and new_tokens_per_word (on the corpus read).
  """
  words = count_words(sentences)
  pieces = old_pieces(words, vocab, merges)
  new_merges = learn_merges(pieces, words, vocab, add_tokens, min_frequency)
  grown = dict(sorted(vocab.items(), key=lambda kv: kv[1]))
  next_id = max(vocab.values()) + 1
  for left, right in new_merges:
    grown[left + right] = next_id
    next_id += 1
  total = sum(words.values()) or 1
  new_pieces = old_pieces(words, grown, merges + new_merges)
  return grown, merges + new_merges, {
      "words": len(words), "added": len(new_merges),
      "old_tokens_per_word": sum(len(pieces[w]) * c for w, c in words.items()) / total,
      "new_tokens_per_word": sum(len(new_pieces[w]) * c for w, c in words.items()) / total}


def report(counts: dict, extend_from: str, output_dir: str, add_tokens: int,
           min_frequency: int) -> str:
  """What `train_tokenizer --extend_from` prints: the grown files' line; a warning instead when
  the corpus gave no new token (the files written are then the old vocabulary's copy)."""
  read = (f"from {counts['documents']} documents, {counts['sentences']} sentences")
  replaced = (f", {counts['invalid_utf8']} invalid UTF-8 sequences replaced"
              if counts["invalid_utf8"] else "")
  if not counts["added"]:
    return (f"warning: --add_tokens={add_tokens} added nothing: no pair of --extend_from="
            f"{extend_from}'s tokens that is not already a token occurs --min_frequency="
            f"{min_frequency} times in --input ({counts['documents']} documents, "
            f"{counts['sentences']} sentences{replaced}); {output_dir}/vocab.json and merges.txt "
            f"are the same {counts['old_vocab_size']} tokens as --extend_from's")
  return (f"wrote {output_dir}/vocab.json ({counts['vocab_size']} tokens: "
          f"{counts['old_vocab_size']} of {extend_from} with their ids, {counts['added']} new at "
          f"ids {counts['old_vocab_size']}..{counts['vocab_size'] - 1}) and merges.txt "
          f"({counts['num_merges']} merges) {read}; tokens per word on them "
          f"{counts['old_tokens_per_word']:.3f} -> {counts['new_tokens_per_word']:.3f}{replaced}")
