"""A fine-tuned model as a SavedModel that takes raw strings (the tokenizer is inside).

Signatures, by task (B = batch; every input is tf.string [B]):
- classification: `classify(text_a[, text_b])` -> probabilities float32 [B, K], label_id int32
  [B], label string [B] (the class name). text_b exists for pair tasks only.
- regression: `classify(text_a[, text_b])` -> value float32 [B].
- multiple_choice: `choose(context, question, options: string [B, C])` -> probabilities float32
  [B, C], choice int32 [B].
- extractive_qa: `answer(question, context)` -> answer string [B] ("" for no answer), score
  float32 [B] (start + end logit of the span; -inf when none is valid), null_score float32 [B].
- token_classification: `tag(text)` (tag_tf.py: words are the whitespace-separated runs,
  tagged at their first piece; entities grouped as transformers' token-classification pipeline
  with aggregation_strategy="first"; padded, E, W, P >= 1):
    entity_type string [B, E] (""), entity_start, entity_end int32 [B, E] (-1: character
    offsets, Python str indices), entity_score float32 [B, E] (0), num_entities int32 [B];
    word_tags string [B, W] (""), word_start, word_end int32 [B, W] (-1), num_words int32 [B];
    token_logits float32 [B, P, K] (0), token_ids int32 [B, P] (-1), num_pieces int32 [B];
    truncated bool [B] (words past the bounds were not tagged).
  And `tag_info()` (no inputs) -> labels string [K], tag_scheme string [], max_seq_len,
  doc_stride, max_chars, max_pieces int32 [].
- embedding: `embed(text)` -> embeddings float32 [B, H] (pooled as fine-tuned: the mean over
  the tokens or the <s> vector, heads.pool; L2-normalized, so a dot product is the cosine),
  num_tokens int32 [B] (the tokens the model read: `<s>`, the text's first max_seq_len - 2
  tokens, `</s>`; num_tokens == max_seq_len means the text may have been cut). "" is `<s></s>`.
The task's signature is also `serving_default`. Inputs are featurized by the training code's TF
ops (featurize.py, squad/tf_ops.py), so the export sees what fine-tuning saw; inputs longer than the
model's max_seq_len are truncated (QA: windowed) the same way. Reloading needs only
`tensorflow` (core ops only), in `tf.saved_model.load` or TF Serving.
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.common import files
from roberta_tf.finetuning import featurize, finetuned_dir, heads, problem_types
from roberta_tf.finetuning.squad import tf_ops as squad_tf_ops
from roberta_tf.finetuning.tagging import tag_tf
from roberta_tf.models import registry
from roberta_tf.serving import saved_model_writer, serving_precision, serving_precision_probe
from roberta_tf.tokenization.tokenizer import BytePairTokenizer, token_byte_lengths

_TEXT = lambda name: tf.TensorSpec([None], tf.string, name=name)


class FinetunedModule(tf.Module):
  """Tokenizer + fine-tuned model (float32 or bfloat16: serving_precision.py) + task info;
  `signatures()` lists what to save (outputs float32 in every precision: the heads cast)."""

  def __init__(self, model: heads.FinetuneModel, tokenizer: BytePairTokenizer, info):
    super().__init__(name="roberta_finetuned")
    self.model = model
    self.tokenizer = tokenizer
    self.info = info
    self.labels = tf.constant(list(info.labels) or [""], tf.string)
    self.byte_lengths = tf.constant(token_byte_lengths(tokenizer.get_vocabulary()))
    self._template, self._pad = tokenizer.template, tokenizer.pad_id  # the vocabulary's
    self.tag_tables = (tag_tf.LabelTables(info.labels)
                       if info.task_type == problem_types.TOKEN_CLASSIFICATION else None)

  def _sequence_outputs(self, text_a, text_b):
    ids = featurize.build_inputs(self.tokenizer(text_a),
                                None if text_b is None else self.tokenizer(text_b),
                                self.info.max_seq_len, self._template)
    logits = self.model(featurize.to_dense(ids, self._pad), training=False)["logits"]
    if self.info.task_type == problem_types.REGRESSION:
      return {"value": logits}
    label_id = tf.argmax(logits, axis=-1, output_type=tf.int32)
    return {"probabilities": tf.nn.softmax(logits, axis=-1), "label_id": label_id,
            "label": tf.gather(self.labels, label_id)}

  def _classify_single(self, text_a):
    return self._sequence_outputs(text_a, None)

  def _classify_pair(self, text_a, text_b):
    return self._sequence_outputs(text_a, text_b)

  def _choose(self, context, question, options):
    shape = tf.shape(options)
    count = shape[1]
    flat_context = tf.repeat(context, count)
    # problem_data.option_text in TF: a cloze question gets the option in every blank "_" (a
    # literal replacement), any other question is followed by " " and the option.
    flat_question = tf.repeat(question, count)
    flat_options = tf.reshape(options, [-1])
    parts = tf.strings.split(flat_question, "_")                    # ragged [B*C, blanks + 1]
    rows = parts.value_rowids()
    is_last = (tf.ragged.range(parts.row_lengths()).flat_values ==
               tf.gather(parts.row_lengths() - 1, rows))
    filler = tf.where(is_last, "", tf.gather(flat_options, rows))
    filled = tf.strings.reduce_join(
        parts.with_flat_values(tf.strings.join([parts.flat_values, filler])), axis=1)
    second = tf.where(parts.row_lengths() > 1, filled,
                      tf.strings.join([flat_question, flat_options], " "))
    ids = featurize.build_inputs(self.tokenizer(flat_context), self.tokenizer(second),
                                self.info.max_seq_len, self._template)
    dense = featurize.to_dense(ids, self._pad)
    dense = {k: tf.reshape(v, [shape[0], count, -1]) for k, v in dense.items()}
    logits = self.model(dense, training=False)["logits"]
    return {"probabilities": tf.nn.softmax(logits, axis=-1),
            "choice": tf.argmax(logits, axis=-1, output_type=tf.int32)}

  def _answer(self, question, context):
    info = self.info
    return squad_tf_ops.answer(self.model, self.tokenizer, self.byte_lengths, question, context,
                               max_seq_len=info.max_seq_len, max_query_len=info.max_query_len,
                               doc_stride=info.doc_stride, max_answer_len=info.max_answer_len,
                               version_2=info.version_2,
                               null_score_threshold=info.null_score_threshold)

  def _embed(self, text):
    ids = featurize.build_inputs(self.tokenizer(text), None, self.info.max_seq_len,
                                 self._template)
    embeddings = self.model(featurize.to_dense(ids, self._pad), training=False)["embeddings"]
    return {"embeddings": embeddings, "num_tokens": tf.cast(ids.row_lengths(), tf.int32)}

  def _tag(self, text):
    return tag_tf.tag(self.model, self.tokenizer, self.tag_tables, text,
                      max_seq_len=self.info.max_seq_len, doc_stride=self.info.doc_stride)

  def _tag_info(self):
    info = self.info
    number = lambda value: tf.constant(value, tf.int32)
    return {"labels": self.labels, "tag_scheme": tf.constant(info.tag_scheme),
            "max_seq_len": number(info.max_seq_len), "doc_stride": number(info.doc_stride),
            "max_chars": number(tag_tf.DEFAULT_MAX_CHARS),
            "max_pieces": number(tag_tf.DEFAULT_MAX_PIECES)}

  def signatures(self) -> dict:
    """{name: tf.function} of the task's signature (and serving_default). Only the task's
    function is created: saving traces every tf.function a module holds."""
    kind = self.info.task_type
    if kind in (problem_types.CLASSIFICATION, problem_types.REGRESSION):
      if len(self.info.text_fields) == 2:
        name, fn, spec = "classify", self._classify_pair, [_TEXT("text_a"), _TEXT("text_b")]
      else:
        name, fn, spec = "classify", self._classify_single, [_TEXT("text_a")]
    elif kind == problem_types.TOKEN_CLASSIFICATION:
      name, fn, spec = "tag", self._tag, [_TEXT("text")]
    elif kind == problem_types.EMBEDDING:
      name, fn, spec = "embed", self._embed, [_TEXT("text")]
    elif kind == problem_types.MULTIPLE_CHOICE:
      name, fn = "choose", self._choose
      spec = [_TEXT("context"), _TEXT("question"),
              tf.TensorSpec([None, None], tf.string, name="options")]
    else:
      name, fn, spec = "answer", self._answer, [_TEXT("question"), _TEXT("context")]
    functions = {name: (fn, spec)}
    if kind == problem_types.TOKEN_CLASSIFICATION:
      functions["tag_info"] = (self._tag_info, [])
    for key, (function, inputs) in functions.items():
      if not hasattr(self, key):
        setattr(self, key, tf.function(function, input_signature=inputs))
    out = {key: getattr(self, key) for key in functions}
    out["serving_default"] = out[name]
    return out


def export_saved_model(model_dir: str, export_dir: str, overwrite: bool = False,
                       precision: str = "float32") -> str:
  """Writes the SavedModel of fine-tuned `model_dir` to export_dir; returns it.

  `precision`: "float32", "bfloat16" or "auto" (serving_precision.py). Written under a
  temporary name and renamed when complete.
  """
  serving_precision.check(precision)
  if files.exists(export_dir) and not files.isdir(export_dir):
    raise ValueError(f"--export_dir={export_dir!r} exists and is not a directory")
  if files.isdir(export_dir) and files.listdir(export_dir) and not overwrite:
    raise ValueError(f"--export_dir={export_dir!r} exists and is not empty; pass --overwrite")
  model, model_config, info = finetuned_dir.load(model_dir, dtype="float32")
  build = lambda dtype: finetuned_dir.model_on(  # noqa: E731
      registry.build_encoder(model_config, dtype=dtype, serving=True), model_config, info,
      dtype=dtype)
  precision = serving_precision_probe.resolve(precision, model, build, model_config)
  module = FinetunedModule(serving_precision.rebuilt(model, build, precision),
                           finetuned_dir.load_tokenizer(model_dir), info)
  return saved_model_writer.save_atomically(
      module, export_dir, extra_files=saved_model_writer.vocabulary_files(model_dir))
