"""Each task's metric computed through a reloaded SavedModel's own signature (benchmarks/
bf16_accuracy.py compares a float32 export with its bfloat16 twin).

Every function takes the export's directory, loads it with tf.saved_model.load in this
process and feeds raw strings to the task's signature, as a client would; it returns the
metric and the per-example predictions, so the caller can also count agreement.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.finetuning.embedding import embed_data, embed_scores
from roberta_tf.finetuning.squad import eval as squad_eval
from roberta_tf.finetuning.tagging import tag_scores
from roberta_tf.serving import held_out_ranks
from roberta_tf.tokenization import tokenizer, vocab_files

BATCH = 32


def _signature(export_dir: str, name: str):
  return tf.saved_model.load(export_dir).signatures[name]


def _batches(items: Sequence, size: int = BATCH):
  for start in range(0, len(items), size):
    yield items[start:start + size]


@dataclasses.dataclass(frozen=True)
class MaskedWord:
  """A held-out sentence with one whole word replaced by <mask>, and that word's id."""
  text: str
  target: int


def masked_words(export_dir: str, vocab_dir: str, sentences: Sequence[str],
                 max_seq_len: int) -> list[MaskedWord]:
  """One MaskedWord per sentence that has one: the export's `tokenize` ids, then the rule of
  held_out_ranks.pick_example (the whole-word token nearest the middle, within the middle
  half); the text is the sentence's bytes before it + " <mask>" (the mask absorbs the space)
  + the bytes after it, so it tokenizes to the same ids with the word masked. Sentences that
  fill max_seq_len (maybe cut) are left out."""
  tokenize = _signature(export_dir, "tokenize")
  vocab_json, _ = vocab_files.paths(vocab_dir)
  vocab = vocab_files.read_vocab(vocab_json)
  table = tokenizer.token_bytes_table(vocab)
  is_word = held_out_ranks.whole_word_ids(table)
  continues = held_out_ranks.continuing_ids(table)
  is_special = np.zeros(len(table), bool)
  is_special[[vocab[t] for t in vocab_files.SPECIAL_TOKENS.values()]] = True
  decode = lambda ids: b"".join(table[i] for i in ids).decode("utf-8")
  out = []
  for batch in _batches(list(sentences), 64):
    ids = tokenize(text=tf.constant(batch))
    lengths = ids["padding_mask"].numpy().sum(axis=1)
    for row, length in zip(ids["input_ids"].numpy(), lengths):
      if length >= max_seq_len:
        continue
      example = held_out_ranks.pick_example(row[:length], is_word, is_special,
                                            continues_word=continues)
      if example is not None:
        text = decode(example.left) + " <mask>" + decode(example.right)
        out.append(MaskedWord(text, example.target))
  return out


def fill_mask_top(export_dir: str, words: Sequence[MaskedWord]) -> np.ndarray:
  """int [N, k]: the export's guesses (fill_mask's top_ids[:, 0], best first) for each masked
  word (k: the export's --top_k)."""
  fill_mask = _signature(export_dir, "fill_mask")
  top = []
  for batch in _batches(list(words)):
    out = fill_mask(text=tf.constant([w.text for w in batch]))
    if not np.all(out["num_masks"].numpy() == 1):
      raise ValueError("a masked text did not tokenize to exactly one <mask>")
    top.append(out["top_ids"].numpy()[:, 0])
  return np.concatenate(top)


def encode_error(float32_dir: str, bfloat16_dir: str, texts: Sequence[str]) -> dict:
  """How far the bfloat16 export's `encode` vectors are from float32's, over the texts' real
  tokens: the mean and the 99th percentile of ||bf16 - fp32|| / ||fp32|| per token vector, and
  the mean cosine similarity."""
  fns = [_signature(d, "encode") for d in (float32_dir, bfloat16_dir)]
  errors, cosines = [], []
  for batch in _batches(list(texts)):
    outs = [fn(text=tf.constant(batch)) for fn in fns]
    real = outs[0]["padding_mask"].numpy() > 0
    a, b = (o["sequence_output"].numpy()[real].astype(np.float64) for o in outs)
    norm_a, norm_b = np.linalg.norm(a, axis=1), np.linalg.norm(b, axis=1)
    errors.append(np.linalg.norm(b - a, axis=1) / norm_a)
    cosines.append((a * b).sum(axis=1) / (norm_a * norm_b))
  errors, cosines = np.concatenate(errors), np.concatenate(cosines)
  return {"relative_error_mean": float(errors.mean()),
          "relative_error_p99": float(np.percentile(errors, 99)),
          "cosine_mean": float(cosines.mean()), "tokens": int(errors.size)}


def classify(export_dir: str, rows: Sequence[dict], text_field: str = "text",
             label_field: str = "label") -> dict:
  """{"accuracy" (percent), "predictions"} of `classify(text_a)` on rows {text, label}."""
  fn = _signature(export_dir, "classify")
  predicted = []
  for batch in _batches(list(rows)):
    labels = fn(text_a=tf.constant([r[text_field] for r in batch]))["label"].numpy()
    predicted += [label.decode("utf-8") for label in labels]
  right = sum(p == str(r[label_field]) for p, r in zip(predicted, rows))
  return {"accuracy": 100.0 * right / len(rows), "predictions": predicted}


def squad_questions(path: str) -> list[tuple[str, str, str, list[str]]]:
  """(id, question, context, gold answer texts) of a SQuAD v1.1 file."""
  with open(path, encoding="utf-8") as f:
    data = json.load(f)["data"]
  return [(qa["id"], qa["question"], p["context"], [a["text"] for a in qa["answers"]])
          for article in data for p in article["paragraphs"] for qa in p["qas"]]


def answer(export_dir: str, squad_file: str) -> dict:
  """{"exact_match", "f1" (percent, squad_eval's v1.1 rules), "predictions"} of
  `answer(question, context)` on every question of the file."""
  fn = _signature(export_dir, "answer")
  questions = squad_questions(squad_file)
  predictions = {}
  for batch in _batches(questions):
    out = fn(question=tf.constant([q[1] for q in batch]),
             context=tf.constant([q[2] for q in batch]))["answer"].numpy()
    predictions.update((q[0], a.decode("utf-8")) for q, a in zip(batch, out))
  scores = squad_eval.evaluate({q[0]: q[3] for q in questions}, predictions, version_2=False)
  return {"exact_match": scores["exact_match"], "f1": scores["f1"],
          "predictions": [predictions[q[0]] for q in questions]}


def tag(export_dir: str, sentences: Sequence[tuple[list[str], list[str]]]) -> dict:
  """{"f1" (percent, seqeval default mode), "predictions"} of `tag(text)` on (words, tags)
  sentences, each sent as its words joined by one space (the signature's words are the
  whitespace-separated runs, so they line up; a word it did not tag counts as "O")."""
  loaded = tf.saved_model.load(export_dir)
  info = loaded.signatures["tag_info"]()
  labels = [label.decode("utf-8") for label in info["labels"].numpy()]
  scheme = info["tag_scheme"].numpy().decode("utf-8")
  fn = loaded.signatures["tag"]
  predicted = []
  for batch in _batches(list(sentences)):
    out = fn(text=tf.constant([" ".join(words) for words, _ in batch]))
    for (words, _), tags, count in zip(batch, out["word_tags"].numpy(),
                                       out["num_words"].numpy()):
      row = [t.decode("utf-8") for t in tags[:count]][:len(words)]
      predicted.append(row + [tag_scores.OUTSIDE] * (len(words) - len(row)))
  scores = tag_scores.score([tags for _, tags in sentences], predicted, labels, scheme)
  return {"f1": 100.0 * scores["f1"], "predictions": predicted}


def embed(export_dir: str, beir_dir: str) -> dict:
  """{"ndcg_at_10" (percent), "predictions" (each query's top document id)} of `embed(text)`
  vectors ranking a BEIR split's corpus for its queries (cosine; embed_scores)."""
  fn = _signature(export_dir, "embed")
  retrieval = embed_data.read_beir(beir_dir)

  def vectors(texts):
    return np.concatenate([fn(text=tf.constant(b))["embeddings"].numpy()
                           for b in _batches(texts, 64)])
  docs, queries = vectors(retrieval.docs), vectors(retrieval.queries)
  ranked = embed_scores.ranking(queries, docs, retrieval.query_ids, retrieval.doc_ids)
  scores = embed_scores.retrieval_scores(retrieval.qrels, ranked)
  top = [max(ranked[q].items(), key=lambda kv: (kv[1], kv[0]))[0] for q in retrieval.query_ids]
  return {"ndcg_at_10": 100.0 * scores["ndcg_at_10"], "predictions": top}
