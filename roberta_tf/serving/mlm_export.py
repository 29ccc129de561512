"""The SavedModel's serving module: raw strings in (the TF-native tokenizer is inside).

Signatures (B texts; S = the batch's longest tokenized text, at most max_seq_len; V the vocab):

- ``tokenize(text: string [B])`` → ``input_ids`` int32 [B,S] (the vocabulary's single
  template: ``<s> … </s>``, or ``[CLS] … [SEP]`` for a tokenizer.json; right-padded with its
  pad id), ``padding_mask`` int32 [B,S].
- ``encode(text: string [B])`` → ``sequence_output`` float32 [B,S,H], ``pooled_output``
  float32 [B,H] (the ``<s>`` vector), ``padding_mask`` int32 [B,S].
- ``mlm_logits(input_ids: int32 [B,S], padding_mask: int32 [B,S])`` → ``logits`` float32 [B,S,V].
- ``score(text: string [B])`` → ``pll`` float32 [B], the pseudo-log-likelihood (Salazar et al.
  2020: each token masked in turn, its log-probability summed; models/pseudo_log_likelihood.py),
  and ``num_tokens`` int32 [B] it sums over (one forward pass per token: cost grows as S^2).
- ``fill_mask(text: string [B])`` → for each ``<mask>`` (M = the most masks in one text, at
  least 1): ``mask_positions`` int32 [B,M] (token positions, -1 for an empty slot),
  ``top_ids`` int32 [B,M,k], ``top_probs`` float32 [B,M,k], ``top_tokens`` string [B,M,k] (the
  decoded token, e.g. " Paris"), ``num_masks`` int32 [B]. Texts without ``<mask>`` have
  num_masks 0 and only empty slots.

Truncation: a text longer than max_seq_len - 2 tokens (the template's specials) keeps its first
max_seq_len - 2 tokens, then ``</s>`` (a ``<mask>`` cut off this way is not predicted).

Beside the graph, ``assets.extra/vocab.json`` and ``merges.txt`` (or ``tokenizer.json`` and its
HF role files): the vocabulary the tokenizer was built from, so the export's vocabulary is known
by its content (`fill_mask --held_out` refuses shards of another).
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.models import pseudo_log_likelihood
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.models.roberta.encoder import encoder_inputs
from roberta_tf.serving import saved_model_writer, serving_precision, serving_precision_probe
from roberta_tf.tokenization import pipeline_tokenizer, vocab_files
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from roberta_tf.tokenization.tokenizer import BytePairTokenizer

_TEXT = tf.TensorSpec([None], tf.string, name="text")
_IDS = tf.TensorSpec([None, None], tf.int32, name="input_ids")
_MASK = tf.TensorSpec([None, None], tf.int32, name="padding_mask")


class ServingModule(tf.Module):
  """Holds the pretrainer and the tokenizer; its tf.functions become the signatures.

  Args:
    pretrainer: a RobertaPretrainer (float32 or bfloat16 policy: serving_precision.py).
    tokenizer: a BytePairTokenizer or PipelineTokenizer (a tf.Module: its tables are saved
      with the model; `model_inputs` puts a text in the vocabulary's single template).
    max_seq_len: the longest tokenized input, ``<s>`` and ``</s>`` included.
    top_k: predictions per ``<mask>`` in ``fill_mask``.
  """

  def __init__(self, pretrainer, tokenizer, max_seq_len: int, top_k: int = 5):
    super().__init__(name="roberta_serving")
    self.pretrainer = pretrainer
    self.tokenizer = tokenizer
    self.max_seq_len = int(max_seq_len)
    self.top_k = int(top_k)
    self._mask = tokenizer.mask_id

  def _ids(self, text):
    return self.tokenizer.model_inputs(text, self.max_seq_len)

  @tf.function(input_signature=[_TEXT])
  def tokenize(self, text):
    input_ids, padding_mask = self._ids(text)
    return {"input_ids": input_ids, "padding_mask": padding_mask}

  @tf.function(input_signature=[_TEXT])
  def encode(self, text):
    input_ids, padding_mask = self._ids(text)
    out = self.pretrainer.encoder(
        encoder_inputs(self.pretrainer.encoder, input_ids, padding_mask), training=False)
    return {"sequence_output": tf.cast(out["sequence_output"], tf.float32),
            "pooled_output": tf.cast(out["pooled_output"], tf.float32),
            "padding_mask": padding_mask}

  @tf.function(input_signature=[_IDS, _MASK])
  def mlm_logits(self, input_ids, padding_mask):
    return {"logits": self.pretrainer.full_logits(input_ids, padding_mask)}

  @tf.function(input_signature=[_TEXT])
  def fill_mask(self, text):
    input_ids, padding_mask = self._ids(text)
    is_mask = tf.logical_and(tf.equal(input_ids, self._mask), padding_mask > 0)
    where = tf.cast(tf.where(is_mask), tf.int32)              # [N, 2] (row, position)
    batch = tf.shape(input_ids)[0]
    counts = tf.math.bincount(where[:, 0], minlength=batch, maxlength=batch, dtype=tf.int32)
    positions = tf.RaggedTensor.from_value_rowids(where[:, 1], where[:, 0], nrows=batch)
    slots = positions.to_tensor(default_value=-1)                         # [B, M] (M may be 0)
    slots = tf.pad(slots, [[0, 0], [0, tf.maximum(1 - tf.shape(slots)[1], 0)]],
                   constant_values=-1)                                    # M >= 1
    logits = self.pretrainer({"input_ids": input_ids, "padding_mask": padding_mask,
                              "mask_positions": tf.maximum(slots, 0)}, training=False)
    probs = tf.nn.softmax(logits, axis=-1)
    top_probs, top_ids = tf.math.top_k(probs, k=self.top_k)
    empty = tf.less(slots, 0)[:, :, None]
    top_ids = tf.where(empty, -1, top_ids)
    top_probs = tf.where(empty, 0.0, top_probs)
    flat = tf.reshape(tf.maximum(top_ids, 0), [-1, 1])
    tokens = tf.reshape(self.tokenizer.detokenize(flat), tf.shape(top_ids))
    tokens = tf.where(empty, "", tokens)
    return {"mask_positions": slots, "top_ids": top_ids, "top_probs": top_probs,
            "top_tokens": tokens, "num_masks": counts}

  @tf.function(input_signature=[_TEXT])
  def score(self, text):
    input_ids, padding_mask = self._ids(text)
    pll, num_tokens = pseudo_log_likelihood.pll_scores(self.pretrainer, input_ids, padding_mask,
                                                       self._mask)
    return {"pll": pll, "num_tokens": num_tokens}

  def signatures(self) -> dict:
    return {"fill_mask": self.fill_mask, "encode": self.encode, "mlm_logits": self.mlm_logits,
            "tokenize": self.tokenize, "score": self.score, "serving_default": self.fill_mask}


class ExportError(ValueError):
  """The model dir cannot be exported (no vocab files, vocab does not fit the model, ...)."""


def _tokenizer(model_dir: str, vocab_dir: str, config: models.RobertaConfig
               ) -> BytePairTokenizer | PipelineTokenizer:
  """The tokenizer of `vocab_dir` (the model dir's or --vocab_dir; vocab.json + merges.txt or a
  tokenizer.json), once it is known to be of the model's vocabulary (by content where the
  model dir knows its own; else by size and special ids)."""
  if not vocab_files.vocabulary_files(vocab_dir):  # neither kind (half of one: the loader says)
    raise ExportError(f"no {vocab_files.VOCAB_FILE} + {vocab_files.MERGES_FILE} or "
                      f"{vocab_files.TOKENIZER_FILE} in {vocab_dir!r}: pass --vocab_dir (the "
                      "directory data_prep.train_tokenizer wrote)")
  if vocab_dir != model_dir:  # the model's own vocabulary (files or training record) decides
    ModelDir(model_dir).check_vocabulary(
        vocab_files.VocabId.of_dir(vocab_dir), ("--vocab_dir", vocab_dir), vocab_dir,
        hint="export with the vocabulary the model was trained on (without --vocab_dir when "
        "the model dir holds it)")
  try:
    tokenizer = pipeline_tokenizer.load_tokenizer(vocab_dir)
  except vocab_files.VocabFileError as e:
    raise ExportError(f"cannot load the tokenizer in {vocab_dir!r}: {e}") from e
  if tokenizer.vocab_size != config.vocab_size:
    raise ExportError(f"vocab in {vocab_dir!r} has {tokenizer.vocab_size} ids, the model "
                      f"{config.vocab_size}: wrong --vocab_dir?")
  # The model's position ids count from pad_id: the vocabulary must use the config's ids.
  for name in ("bos_id", "pad_id", "eos_id"):
    if getattr(tokenizer, name) != getattr(config, name):
      raise ExportError(f"vocab in {vocab_dir!r} has {name}={getattr(tokenizer, name)}, the "
                        f"model {getattr(config, name)}: wrong --vocab_dir?")
  return tokenizer


def export_saved_model(model_dir: str, export_dir: str, *, checkpoint: str | None = None,
                       vocab_dir: str | None = None, top_k: int = 5,
                       max_seq_len: int | None = None, overwrite: bool = False,
                       precision: str = "float32") -> str:
  """Restores a model dir's checkpoint and writes the serving SavedModel in `precision`.

  Args:
    model_dir: config.json + checkpoints (+ vocab.json/merges.txt, which training and the
      converter copy there).
    export_dir: the SavedModel directory to create (written under a temporary name, renamed
      when complete).
    checkpoint: a checkpoint prefix instead of the latest.
    vocab_dir: where vocab.json/merges.txt are, when not in model_dir.
    top_k: predictions per <mask> in fill_mask, in [1, vocab_size].
    max_seq_len: truncation length, in [3, the model's max_seq_len] (default: the latter).
    overwrite: replace an existing export_dir.
    precision: "float32", "bfloat16" or "auto" (serving_precision.py).
  Returns:
    export_dir.
  Raises:
    ExportError, ModelDirError: naming the flag, directory or file at fault;
    vocab_growth.VocabGrowthError: --vocab_dir is of another vocabulary than the model dir's
      (one line naming both).
  """
  if files.exists(export_dir) and not files.isdir(export_dir):
    raise ExportError(f"--export_dir {export_dir!r} exists and is not a directory")
  if files.isdir(export_dir) and files.listdir(export_dir) and not overwrite:
    raise ExportError(f"{export_dir!r} exists and is not empty; pass --overwrite to replace it")
  config = models.read_config(model_dir)
  max_seq_len = max_seq_len or config.max_seq_len
  if not 3 <= max_seq_len <= config.max_seq_len:  # <s>, at least one token, </s>
    raise ExportError(f"--max_seq_len={max_seq_len}: must be in [3, {config.max_seq_len}] "
                      "(the model's max_seq_len)")
  if not 1 <= top_k <= config.vocab_size:
    raise ExportError(f"--top_k={top_k}: must be in [1, {config.vocab_size}] (the vocab size)")
  vocab_dir = vocab_dir or model_dir
  tokenizer = _tokenizer(model_dir, vocab_dir, config)
  serving_precision.check(precision)
  pretrainer = models.load(model_dir, dtype="float32", checkpoint=checkpoint)
  build = lambda dtype: models.build_pretrainer(config, dtype=dtype, serving=True)  # noqa: E731
  precision = serving_precision_probe.resolve(precision, pretrainer, build, config)
  module = ServingModule(serving_precision.rebuilt(pretrainer, build, precision), tokenizer,
                         max_seq_len=max_seq_len, top_k=top_k)
  return saved_model_writer.save_atomically(
      module, export_dir, extra_files=saved_model_writer.vocabulary_files(vocab_dir))

