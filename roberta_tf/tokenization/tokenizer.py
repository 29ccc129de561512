"""RoBERTa's byte-level BPE tokenizer in TF ops: the one tokenizer of the project.

`BytePairTokenizer` reads GPT-2/RoBERTa `vocab.json` + `merges.txt` (roberta-base's or the
ones `data_prep.train_tokenizer` writes) and gives the same ids as Hugging Face `tokenizers`
(what `RobertaTokenizerFast` runs, without the added <s> ... </s>). It is a `tf.Module` of TF
ops only (plus tensorflow-text), so it runs eagerly, in `tf.function`, in `tf.data` maps with
parallel calls, and inside a SavedModel (its tables are tracked and saved).

Pipeline of `tokenizer(texts)`:
1. Special tokens: the strings `<s>`, `<pad>`, `</s>`, `<unk>`, `<mask>` written in the text
   become their ids, as HF's AddedVocabulary does. `<mask>` absorbs the whitespace before it
   (lstrip, as in roberta-base); the others do not. The text between them ("segments") is
   pre-tokenized independently.
2. Pre-tokenization with GPT-2's regex semantics (`roberta_tf.tokenization.pretokenize`).
3. Each word's bytes -> ids: a table holds the BPE of every vocabulary entry (computed at load
   time, keyed by raw bytes); other words go through the vectorized merge loop
   (`roberta_tf.tokenization.bpe_merge`).

Bad input: invalid UTF-8 becomes U+FFFD, one per maximal invalid subsequence (Python's
`errors="replace"`), so the ids are HF's ids of `raw.decode("utf-8", "replace")`. NUL is an
ordinary character. An empty string gives an empty row.

Round trip: `detokenize(tokenizer(x)) == x` for valid UTF-8, except that whitespace before a
`<mask>` string is absorbed into the mask and does not come back.

Speed and bounds (benchmarks/data/tokenizer.py): the tables and the word cache are built at
construction, and `tokenize` traces once (autograph off: it converts nothing and traced 5x
slower). A call costs ~1 ms on top of the work, so pass batches of hundreds of lines or more.
The tokenizer holds no mutable state (no runtime cache): safe in parallel tf.data. Words longer
than `long_word_cap` bytes (256, or twice the longest token) are merged in pieces with their
seams re-merged (`long_words`): linear in their length, so one 1 MB "word" of random letters
takes ~1 s (HF ~0.6 s; it took 35 s before), and the ids stay HF's except where a token longer
than a seam window would cross a cut (documented in `long_words`).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping, Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.tokenization import bpe_merge, long_words, pretokenize, vocab_files, vocabulary
from roberta_tf.tokenization.vocab_files import MASK, read_merges, read_vocab

# vocab.json / merges.txt (names, reading, hashing, copying) belong to vocab_files.
SPECIAL_TOKENS = tuple(vocab_files.SPECIAL_TOKENS.values())  # (<s>, <pad>, </s>, <unk>, <mask>)

# As in roberta-base's tokenizer: only <mask> absorbs the whitespace before it.
_SPECIALS = tuple(pretokenize.Special(t.encode("ascii"), lstrip=(t == MASK))
                  for t in SPECIAL_TOKENS)


_SLOT_BITS = 20  # a cached word has < 2**20 ids (it has at most as many as it has bytes)
_CACHE_CHUNK = 4096  # vocabulary entries merged at once when the word cache is built


TokenizerFileError = vocab_files.VocabFileError


@functools.cache
def bytes_to_unicode() -> dict[int, str]:
  """GPT-2's reversible byte -> printable character map (byte-level BPE alphabet)."""
  printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) +
               list(range(ord("®"), ord("ÿ") + 1)))
  chars = printable[:]
  extra = 0
  for b in range(256):
    if b not in printable:
      printable.append(b)
      chars.append(256 + extra)
      extra += 1
  return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def _token_bytes(token: str, unicode_to_byte: Mapping[str, int]) -> bytes | None:
  """The raw bytes a byte-level token stands for, or None if it is not a byte-level token."""
  try:
    return bytes(unicode_to_byte[c] for c in token)
  except KeyError:
    return None


def token_bytes_table(vocab: Mapping[str, int]) -> list[bytes]:
  """id -> the raw bytes it decodes to, for ids 0..max id (gaps: b"").

  Byte-level tokens give the bytes they stand for; the special tokens and any token outside
  the byte-level alphabet give their own UTF-8 text (so `<mask>` reads as "<mask>").
  """
  unicode_to_byte = {c: b for b, c in bytes_to_unicode().items()}
  table = [b""] * (max(vocab.values()) + 1)
  for token, i in vocab.items():
    raw = None if token in SPECIAL_TOKENS else _token_bytes(token, unicode_to_byte)
    table[i] = raw if raw is not None else token.encode("utf-8")
  return table


def token_byte_lengths(vocab: Mapping[str, int]) -> np.ndarray:
  """int32 [max id + 1]: how many bytes of text each id stands for (`token_bytes_table`'s
  lengths; 0 for ids the vocabulary skips). Spans of ids map back to the text with it."""
  return np.array([len(b) for b in token_bytes_table(vocab)], np.int32)


def _byte_symbol_ids(vocab: Mapping[str, int], vocab_path: str) -> np.ndarray:
  """int32 [256]: the id of each byte's symbol; TokenizerFileError if one is missing."""
  byte_to_unicode = bytes_to_unicode()
  absent = [b for b, c in byte_to_unicode.items() if c not in vocab]
  if absent:
    raise TokenizerFileError(f"{vocab_path}: not a byte-level BPE vocabulary: "
                             f"{len(absent)} of the 256 byte symbols are missing")
  return np.array([vocab[byte_to_unicode[b]] for b in range(256)], np.int32)


def _merge_table(vocab: Mapping[str, int], merges: Sequence[tuple[str, str]], vocab_path: str,
                 merges_path: str) -> tuple[dict[tuple[int, int], int], np.ndarray]:
  """(pair_rank, merged): (left id, right id) -> rank, and int32 [M] the id each rank makes.

  A later duplicate of a pair overrides an earlier one, as in HF's merge map.
  Raises TokenizerFileError when a merge names a token that is not in the vocabulary.
  """
  pair_rank: dict[tuple[int, int], int] = {}
  merged = np.zeros(len(merges), np.int32)
  for rank, (left, right) in enumerate(merges):
    for token in (left, right, left + right):
      if token not in vocab:
        raise TokenizerFileError(f"{merges_path}: merge {rank + 1} ({left!r} {right!r}) uses "
                                 f"{token!r}, which is not in {vocab_path}")
    pair_rank[(vocab[left], vocab[right])] = rank
    merged[rank] = vocab[left + right]
  return pair_rank, merged


def _pair_rank_table(pair_rank: Mapping[tuple[int, int], int],
                     vocab_size: int) -> tf.lookup.StaticHashTable:
  """left id * vocab_size + right id -> the merge's rank (-1: no such merge)."""
  keys = np.array([a * vocab_size + b for a, b in pair_rank], np.int64)
  ranks = np.array(list(pair_rank.values()), np.int32)
  return tf.lookup.StaticHashTable(
      tf.lookup.KeyValueTensorInitializer(
          tf.constant(keys, tf.int64), tf.constant(ranks, tf.int32)), default_value=-1)


class BytePairTokenizer(tf.Module):
  """GPT-2/RoBERTa byte-level BPE: tf.string [B] -> int32 ids tf.RaggedTensor [B, None].

  Attributes:
    vocab_size: one more than the largest id.
    bos_id, pad_id, eos_id, unk_id, mask_id: ids of <s>, <pad>, </s>, <unk>, <mask>.
    vocab_sha256: sha256 (hex) of vocab.json's bytes (None when built from a dict).
  """

  def __init__(self, vocab: Mapping[str, int], merges: Sequence[tuple[str, str]],
               vocab_sha256: str | None = None, vocab_path: str = "vocab",
               merges_path: str = "merges", name: str | None = "byte_pair_tokenizer",
               roberta_specials: bool = True):
    """Builds the tables.

    Args:
      vocab: token -> id (byte-level tokens, GPT-2 alphabet, plus the five special tokens).
      merges: (left, right) pairs in rank order.
      vocab_sha256: recorded as `vocab_sha256`.
      vocab_path, merges_path: names used in error messages.
      name: the tf.Module name.
      roberta_specials: False: no special tokens (ids None, no string in the text matched;
        `pipeline_tokenizer` splits a tokenizer.json's added tokens out before).
    Raises:
      TokenizerFileError: a special token or a byte is missing, or a merge names a token
        that is not in the vocabulary.
    """
    super().__init__(name=name)
    specials, self._specials = (SPECIAL_TOKENS, _SPECIALS) if roberta_specials else ((), ())
    missing = [t for t in specials if t not in vocab]
    if missing:
      raise TokenizerFileError(f"{vocab_path}: special token(s) {missing} missing "
                               "(a RoBERTa vocabulary has <s>, <pad>, </s>, <unk>, <mask>)")
    # Read-only mappings: tf.Module would wrap (and track, slowly) a plain dict.
    self._vocab = types.MappingProxyType(dict(vocab))
    self._inverse = types.MappingProxyType({i: t for t, i in vocab.items()})
    self.vocab_size = max(self._vocab.values()) + 1
    self.vocab_sha256 = vocab_sha256
    self.bos_id, self.pad_id, self.eos_id, self.unk_id, self.mask_id = (
        (self._vocab[t] for t in SPECIAL_TOKENS) if roberta_specials else (None,) * 5)
    self.template = (vocabulary.roberta_template(self.bos_id, self.eos_id)  # RoBERTa's pair
                     if roberta_specials else None)  # template: <s> A </s></s> B </s>
    byte_ids = _byte_symbol_ids(self._vocab, vocab_path)
    pair_rank, merged = _merge_table(self._vocab, merges, vocab_path, merges_path)
    self.all_occurrences = self._consistent(pair_rank, merged)
    left_min, right_min = bpe_merge.first_use_ranks(
        np.array(list(pair_rank), np.int64).reshape(-1, 2),
        np.array(list(pair_rank.values()), np.int32), self.vocab_size)

    # init_scope: the tables are built eagerly even when the tokenizer is made inside a
    # tf.function (a SavedModel then saves them once, as constants).
    with tf.init_scope():
      self._byte_ids = tf.constant(byte_ids)
      self._merged_ids = tf.constant(merged)
      self._left_min = tf.constant(left_min)
      self._right_min = tf.constant(right_min)
      self._class_table = tf.constant(pretokenize.codepoint_classes())
      self._pair_ranks = _pair_rank_table(pair_rank, self.vocab_size)
      self._special_id_list = tf.constant([self._vocab[t] for t in specials], tf.int32)
      id_bytes = token_bytes_table(self._vocab)
      self._id_bytes = tf.constant(id_bytes, tf.string)
      self._id_lengths = tf.constant([len(b) for b in id_bytes], tf.int64)
      self.long_word_cap = long_words.cap_bytes(max(len(b) for b in id_bytes))
      # Held outside tf.Module's tracking: SavedModel saves them inside `tokenize`, not apart.
      self._untracked = self._traced_functions()
      self._cache_ids, self._cache_slots, self._cache_index = self._word_cache(byte_ids)

  def _traced_functions(self) -> types.SimpleNamespace:
    """`merge` (the merge loop) and `stitch` (`_stitch`), each traced once."""
    # One traced merge loop, used to build the word cache and (nested) by `tokenize`.
    merge = tf.function(
        functools.partial(
            bpe_merge.merge_words, pair_ranks=self._pair_ranks, merged_ids=self._merged_ids,
            vocab_size=self.vocab_size, left_min=self._left_min, right_min=self._right_min,
            all_occurrences=self.all_occurrences),
        input_signature=[tf.TensorSpec([None], tf.int32), tf.TensorSpec([None], tf.int64)],
        autograph=False)
    # Not inlined: instantiated (and optimized) only when a batch has a word over the cap.
    stitch = tf.function(
        self._stitch, autograph=False, experimental_attributes={"_noinline": True},
        input_signature=[tf.TensorSpec([], tf.string), tf.TensorSpec([None], tf.uint8),
                         tf.TensorSpec([None], tf.int32)] + [tf.TensorSpec([None], tf.int64)] * 5)
    return types.SimpleNamespace(merge=merge, stitch=stitch)

  def _word_cache(self, byte_ids: np.ndarray):
    """The BPE of every byte-level vocabulary entry, keyed by its raw bytes.

    The merge loop computes it: an entry's BPE need not be the entry itself.

    Returns:
      (ids, slots, index): ids int32 [N] (every cached word's ids, end to end); slots int64
      [words] ((where a word's ids start in ids) << _SLOT_BITS | (how many): one gather per
      word); index, a table raw bytes -> row of slots (-1 when not cached).
    """
    unicode_to_byte = {c: b for b, c in bytes_to_unicode().items()}
    words = sorted({_token_bytes(t, unicode_to_byte) for t in self._vocab
                    if t not in SPECIAL_TOKENS} - {None})
    parts = []
    for i in range(0, len(words), _CACHE_CHUNK):  # in chunks: a lower peak of memory
      chunk = words[i:i + _CACHE_CHUNK]
      splits = np.concatenate([[0], np.cumsum([len(w) for w in chunk])]).astype(np.int64)
      symbols = byte_ids[np.frombuffer(b"".join(chunk), np.uint8)]
      parts.append(self._untracked.merge(tf.constant(symbols), tf.constant(splits)))
    cache = tf.concat(parts, axis=0)
    slots = tf.bitwise.left_shift(cache.row_starts(), _SLOT_BITS) | cache.row_lengths()
    index = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(
            tf.constant(words, tf.string), tf.range(len(words), dtype=tf.int64)),
        default_value=-1)
    return cache.flat_values, slots, index

  @staticmethod
  def _consistent(pair_rank: Mapping[tuple[int, int], int], merged: np.ndarray) -> bool:
    """Whether every token is produced (by any merge) before it is used (by any merge)."""
    produced_last: dict[int, int] = {}
    used_first: dict[int, int] = {}
    for (a, b), rank in pair_rank.items():
      t = int(merged[rank])
      produced_last[t] = max(produced_last.get(t, -1), rank)
      for part in (a, b):
        used_first[part] = min(used_first.get(part, rank), rank)
    return all(produced_last.get(t, -1) < r for t, r in used_first.items())

  @classmethod
  def from_files(cls, vocab_json: str, merges_txt: str) -> BytePairTokenizer:
    """Loads GPT-2/RoBERTa format files (roberta-base's load as they are)."""
    vocab = read_vocab(vocab_json)
    merges = read_merges(merges_txt)
    return cls(vocab, merges, vocab_sha256=vocab_files.file_sha256(vocab_json),
               vocab_path=vocab_json, merges_path=merges_txt)

  @classmethod
  def from_dir(cls, directory: str) -> BytePairTokenizer:
    """Loads `directory`/vocab.json and `directory`/merges.txt."""
    return cls.from_files(*vocab_files.paths(directory))

  def id_to_token(self, i: int) -> str:
    """The vocabulary string of id `i` (byte-level alphabet, e.g. 'Ġhello'); KeyError if none."""
    return self._inverse[int(i)]

  def token_to_id(self, token: str) -> int:
    """The id of a vocabulary string (e.g. 'Ġhello', '<mask>'); KeyError if absent."""
    return self._vocab[token]

  def get_vocabulary(self) -> dict[str, int]:
    """A copy of token -> id."""
    return dict(self._vocab)

  def __call__(self, texts) -> tf.RaggedTensor:
    """Tokenizes text (no special tokens added).

    Args:
      texts: tf.string [B] (or a scalar, or anything `tf.convert_to_tensor` takes).
    Returns:
      tf.RaggedTensor int32 [B, None] (a scalar input gives an int32 [None] tensor).
    """
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank == 0:
      return self.tokenize(texts[None]).flat_values
    return self.tokenize(texts)

  def model_inputs(self, texts: tf.Tensor, max_seq_len: int) -> tuple[tf.Tensor, tf.Tensor]:
    """tf.string [B] -> (input_ids, padding_mask) int32 [B, S]: each text's first
    max_seq_len - 2 tokens between <s> and </s>, right-padded with <pad> (S: the longest)."""
    ids = self.tokenize(texts)[:, : max_seq_len - 2]
    ids = tf.concat([tf.fill([ids.nrows(), 1], self.bos_id), ids,
                     tf.fill([ids.nrows(), 1], self.eos_id)], axis=1)
    return ids.to_tensor(default_value=self.pad_id), tf.ones_like(ids).to_tensor(default_value=0)

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """tf.string [B] -> int32 tf.RaggedTensor [B, None]; see `__call__`."""
    words = pretokenize.split_words(texts, self._class_table, self._specials)
    strings = tf.strings.substr(words.buffer, words.starts, words.lengths)
    # Every word's ids are a slice of [cache ids | miss ids | special ids]: (begin, size).
    row = self._cache_index.lookup(strings)
    slot = tf.gather(self._cache_slots, tf.maximum(row, 0))
    begin = tf.where(row >= 0, tf.bitwise.right_shift(slot, _SLOT_BITS), 0)
    size = tf.where(row >= 0, slot & (2**_SLOT_BITS - 1), 0)
    # Words the cache does not hold (BPE once per distinct word or piece: `_merge_ranges`).
    miss_at = tf.where((row < 0) & (words.special < 0))[:, 0]
    miss_ids = self._merge_long(words.buffer, words.data, tf.gather(words.starts, miss_at),
                                tf.gather(words.lengths, miss_at))
    num_cached = tf.size(self._cache_ids, out_type=tf.int64)
    begin = tf.tensor_scatter_nd_update(begin, miss_at[:, None],
                                        num_cached + miss_ids.row_starts())
    size = tf.tensor_scatter_nd_update(size, miss_at[:, None], miss_ids.row_lengths())
    special_at = tf.where(words.special >= 0)[:, 0]
    special_ids = tf.gather(self._special_id_list, tf.gather(words.special, special_at))
    first_special = num_cached + tf.size(miss_ids.flat_values, out_type=tf.int64)
    begin = tf.tensor_scatter_nd_update(
        begin, special_at[:, None],
        first_special + tf.range(tf.size(special_at, out_type=tf.int64)))
    size = tf.tensor_scatter_nd_update(size, special_at[:, None], tf.ones_like(special_at))
    values = tf.concat([self._cache_ids, miss_ids.flat_values, special_ids], axis=0)
    ids = tf.gather(values, tf.ragged.range(begin, begin + size).flat_values)
    id_splits = tf.concat([[0], tf.cumsum(size)], axis=0)
    return tf.RaggedTensor.from_row_splits(ids, tf.gather(id_splits, words.row_splits),
                                           validate=False)

  def _merge_ranges(self, buffer: tf.Tensor, data: tf.Tensor, starts: tf.Tensor,
                    lengths: tf.Tensor) -> tf.RaggedTensor:
    """BPE of byte ranges of `buffer` (data: its bytes), once per distinct range content.

    Args:
      starts, lengths: int64 [N] (lengths > 0).
    Returns:
      int32 RaggedTensor [N, None].
    """
    starts, lengths = tf.reshape(starts, [-1]), tf.reshape(lengths, [-1])
    unique, inverse = tf.unique(tf.strings.substr(buffer, starts, lengths), out_idx=tf.int64)
    first = tf.math.unsorted_segment_min(tf.range(tf.size(inverse, out_type=tf.int64)),
                                         inverse, tf.size(unique, out_type=tf.int64))
    start = tf.gather(starts, first)
    positions = tf.ragged.range(start, start + tf.gather(lengths, first))
    symbols = tf.gather(self._byte_ids, tf.cast(tf.gather(data, positions.flat_values), tf.int32))
    merged = self._untracked.merge(symbols, positions.row_splits)
    return tf.gather(merged, inverse)

  def _merge_long(self, buffer: tf.Tensor, data: tf.Tensor, starts: tf.Tensor,
                  lengths: tf.Tensor) -> tf.RaggedTensor:
    """BPE of words (byte ranges, repeats allowed); words over `long_word_cap` bytes go
    through `long_words`. Returns int32 RaggedTensor [N, None]."""
    pieces = long_words.cut(data, starts, lengths, self.long_word_cap)
    piece_ids = self._merge_ranges(buffer, data, pieces[0], pieces[1])

    values, splits = tf.cond(
        tf.reduce_any(pieces[4] > 1),
        lambda: self._untracked.stitch(buffer, data, piece_ids.flat_values,
                                       piece_ids.row_splits, pieces[0], *pieces[2:]),
        lambda: (piece_ids.flat_values, piece_ids.row_splits))
    return tf.RaggedTensor.from_row_splits(values, splits, validate=False)

  def _stitch(self, buffer, data, piece_values, piece_splits, piece_starts, piece_word,
              piece_index, num_pieces):
    """`long_words.stitch` as a function of tensors: (values, row_splits) of the words."""
    out = long_words.stitch(
        tf.RaggedTensor.from_row_splits(piece_values, piece_splits, validate=False),
        piece_starts, piece_word, piece_index, num_pieces, self._id_lengths,
        lambda s, n: self._merge_ranges(buffer, data, s, n))
    return out.flat_values, out.row_splits

  def detokenize(self, ids) -> tf.Tensor:
    """Ids -> text.

    Args:
      ids: int RaggedTensor [B, None] or dense [B, L] (every entry is used: strip padding
        first), or a 1-D sequence for one text.
    Returns:
      tf.string [B] (a scalar for 1-D input). Byte sequences that are not valid UTF-8 (ids
      cut in the middle of a character) become U+FFFD, as HF's ByteLevel decoder does.
    """
    if not isinstance(ids, tf.RaggedTensor):
      ids = tf.convert_to_tensor(ids)
    pieces = tf.gather(self._id_bytes, tf.cast(ids, tf.int32))
    return pretokenize.repair_utf8(tf.strings.reduce_join(pieces, axis=-1))
