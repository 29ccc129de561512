"""An HF tokenizer.json's byte-level BPE pipeline (ModernBERT's) in TF ops.

`PipelineTokenizer` runs what `tokenizer_json` reads, in graph (eager, tf.function, tf.data,
SavedModel), with HF `tokenizers`' ids:
1. invalid UTF-8 -> U+FFFD (one per maximal invalid subsequence, Python's errors="replace");
2. added tokens with `normalized: false` split out of the raw text (`added_tokens`);
3. each remaining piece NFC-normalized on its own (`nfc`, core TF ops: an export needs no
   tensorflow_text), as HF normalizes the pieces the first split leaves; then the
   `normalized: true` added tokens (their contents NFC'd) split out of the pieces;
4. the rest: `BytePairTokenizer` without in-text specials (GPT-2's regex, one piece a segment,
   then BPE, its word cache and long-word handling);
5. `apply_template` (one text or a pair: `[CLS] A [SEP]`, `[CLS] A [SEP] B [SEP]`, the
   post-processor's ids) and `model_inputs` (one text in the template, truncated, padded).
`detokenize` joins the tokens' bytes (added tokens read as their text), as HF's ByteLevel
decoder does with skip_special_tokens=False.
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.tokenization import (
    added_tokens,
    nfc,
    pretokenize,
    tokenizer_json,
    vocab_files,
    vocabulary,
)
from roberta_tf.tokenization.added_tokens import Pattern
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from roberta_tf.tokenization.tokenizer_json import TokenizerSpec


def _splice(item_ids: tf.Tensor, sub_splits: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """Where each item's values are, when text items (id < 0) expand into sub-results.

  Args:
    item_ids: int32 [P]: a token id, or -1 for a text item.
    sub_splits: int64 [T + 1]: row splits of the text items' sub-results (T: text items).
  Returns:
    (index int64 [N], splits int64 [P + 1]): item p's values are
    concat([sub values, token ids of the items])[index[splits[p]:splits[p + 1]]].
  """
  is_text = item_ids < 0
  text_rank = tf.cumsum(tf.cast(is_text, tf.int64)) - 1
  token_rank = tf.cumsum(tf.cast(~is_text, tf.int64)) - 1
  zero = tf.zeros([1], tf.int64)
  sub_start = tf.concat([sub_splits[:-1], zero], 0)
  sub_len = tf.concat([sub_splits[1:] - sub_splits[:-1], zero], 0)
  safe = tf.maximum(text_rank, 0)
  begin = tf.where(is_text, tf.gather(sub_start, safe), sub_splits[-1] + token_rank)
  size = tf.where(is_text, tf.gather(sub_len, safe), 1)
  index = tf.ragged.range(begin, begin + size).flat_values
  return index, tf.concat([zero, tf.cumsum(size)], 0)


def _expand(strings: tf.RaggedTensor, ids: tf.RaggedTensor, sub_values, sub_ids, sub_splits):
  """Replaces the text items of `strings`/`ids` ([B, None]) by their sub-items."""
  index, splits = _splice(ids.flat_values, sub_splits)
  tokens = tf.boolean_mask(ids.flat_values, ids.flat_values >= 0)
  new_ids = tf.gather(tf.concat([sub_ids, tokens], 0), index)
  new_strings = tf.gather(tf.concat([sub_values, tf.fill(tf.shape(tokens), "")], 0), index)
  rows = tf.gather(splits, ids.row_splits)
  return (tf.RaggedTensor.from_row_splits(new_strings, rows, validate=False),
          tf.RaggedTensor.from_row_splits(new_ids, rows, validate=False))


class PipelineTokenizer(tf.Module):
  """A tokenizer.json's pipeline: tf.string [B] -> int32 ids tf.RaggedTensor [B, None].

  Attributes:
    vocab_size: one more than the largest id.
    template: tokenizer_json.Template, the post-processor's ids.
    cls_id / sep_id: the template's first / last id (bos_id / eos_id: the same), or None.
    pad_id, mask_id, unk_id: by the tokens' names ([PAD]/<pad>, ...), or None.
    vocab_sha256: sha256 of the tokenizer.json's bytes (None when built from a spec).
  """

  def __init__(self, spec: TokenizerSpec, special_ids: dict[str, int] | None = None,
               vocab_sha256: str | None = None, name: str | None = "pipeline_tokenizer"):
    """Builds the tables.

    Args:
      spec: what the tokenizer.json says.
      special_ids: role -> id (`vocabulary.Vocabulary.special_ids`); None: from the spec
        (`vocabulary.roles_of`).
      vocab_sha256: recorded as `vocab_sha256`.
      name: the tf.Module name.
    """
    super().__init__(name=name)
    self.spec = spec
    self.template = spec.template
    self.vocab_sha256 = vocab_sha256
    self._bpe = BytePairTokenizer(spec.vocab, spec.merges, vocab_path=spec.path,
                                  merges_path=spec.path, roberta_specials=False)
    self.vocab_size = self._bpe.vocab_size
    self._nfc = nfc.NFC() if spec.nfc else None
    raw = [t for t in spec.added if not t.normalized]
    normed = [t for t in spec.added if t.normalized]
    self._raw = added_tokens.AddedTokenSplitter(
        [Pattern(t.content.encode(), t.id, t.lstrip, t.rstrip) for t in raw])
    self._normed = added_tokens.AddedTokenSplitter(
        [Pattern(spec.pattern(t).encode(), t.id, t.lstrip, t.rstrip) for t in normed])
    ids = dict(special_ids or vocabulary.roles_of(spec))
    self.cls_id = self.bos_id = ids["bos"]
    self.sep_id = self.eos_id = ids["eos"]
    self.pad_id, self.mask_id, self.unk_id = ids["pad"], ids["mask"], ids.get("unk")

  @classmethod
  def from_file(cls, path: str) -> PipelineTokenizer:
    """Reads a tokenizer.json (VocabFileError naming it and the part it cannot run)."""
    return cls(tokenizer_json.read(path), vocab_sha256=vocab_files.file_sha256(path))

  @classmethod
  def from_dir(cls, directory: str) -> PipelineTokenizer:
    """Reads `directory`/tokenizer.json, the roles as `vocabulary.Vocabulary.of_dir` has them
    (an HF folder's tokenizer_config.json / special_tokens_map.json included)."""
    path = tokenizer_json.path_in(directory)
    vocab = vocabulary.Vocabulary.of_dir(directory)
    if vocab.kind != vocabulary.TOKENIZER_JSON:
      raise vocab_files.VocabFileError(f"{directory}: its vocabulary is {vocab.kind}")
    return cls(tokenizer_json.read(path), vocab.special_ids, vocab_files.file_sha256(path))

  def __call__(self, texts) -> tf.RaggedTensor:
    """Tokenizes text (no template): tf.string [B] -> int32 [B, None]; a scalar -> [None]."""
    texts = tf.convert_to_tensor(texts, tf.string)
    if texts.shape.rank == 0:
      return self.tokenize(texts[None]).flat_values
    return self.tokenize(texts)

  def id_to_token(self, i: int) -> str:
    return self._bpe.id_to_token(i)

  def token_to_id(self, token: str) -> int:
    return self._bpe.token_to_id(token)

  def get_vocabulary(self) -> dict[str, int]:
    return self._bpe.get_vocabulary()

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def tokenize(self, texts: tf.Tensor) -> tf.RaggedTensor:
    """tf.string [B] -> int32 tf.RaggedTensor [B, None]; see the module docstring."""
    texts = pretokenize.repair_utf8(texts)
    first = self._raw(texts)
    text_at = tf.where(first.ids.flat_values < 0)[:, 0]
    pieces = tf.gather(first.strings.flat_values, text_at)
    if self._nfc is not None:
      pieces = self._nfc(pieces)
    second = self._normed(pieces)
    strings, ids = _expand(first.strings, first.ids, second.strings.flat_values,
                           second.ids.flat_values, second.ids.row_splits)
    text_at = tf.where(ids.flat_values < 0)[:, 0]
    words = self._bpe.tokenize(tf.gather(strings.flat_values, text_at))
    _, token_ids = _expand(strings, ids, tf.fill(tf.shape(words.flat_values), ""),
                           words.flat_values, words.row_splits)
    return token_ids

  def apply_template(self, a: tf.RaggedTensor, b: tf.RaggedTensor | None = None):
    """Ids -> the template's ids: [B, None] (and [B, None] for pairs) -> [B, None]."""
    rows = a.nrows()
    fill = lambda ids: tf.tile(  # noqa: E731
        tf.constant(list(ids), tf.int32, shape=[1, len(ids)]), tf.stack([rows, 1]))
    parts = [fill(self.template.prefix), a]
    if b is not None:
      if self.template.middle is None:
        raise ValueError(f"{self.spec.path} has no pair template")
      parts += [fill(self.template.middle), b]
    return tf.concat(parts + [fill(self.template.suffix)], axis=1)

  def model_inputs(self, texts: tf.Tensor, max_seq_len: int) -> tuple[tf.Tensor, tf.Tensor]:
    """tf.string [B] -> (input_ids, padding_mask) int32 [B, S]: each text's first tokens in
    the single template, at most max_seq_len ids, right-padded with pad_id."""
    room = max_seq_len - len(self.template.prefix) - len(self.template.suffix)
    ids = self.apply_template(self.tokenize(texts)[:, :room])
    return ids.to_tensor(default_value=self.pad_id), tf.ones_like(ids).to_tensor(0)

  def detokenize(self, ids) -> tf.Tensor:
    """Ids -> text (see BytePairTokenizer.detokenize)."""
    return self._bpe.detokenize(ids)


def load_tokenizer(directory: str) -> BytePairTokenizer | PipelineTokenizer:
  """The TF tokenizer of a vocabulary folder of either kind (`vocabulary.Vocabulary.of_dir`):
  both give ids, bos_id / eos_id / pad_id / mask_id, model_inputs and detokenize."""
  if vocabulary.Vocabulary.of_dir(directory).kind == vocabulary.TOKENIZER_JSON:
    return PipelineTokenizer.from_dir(directory)
  return BytePairTokenizer.from_dir(directory)
