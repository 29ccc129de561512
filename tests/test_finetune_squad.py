"""SQuAD features and decoding: token offsets, doc-stride windows, labels, n-best, TF parity."""

import json
import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import files
from roberta_tf.finetuning.squad import decode as squad_decode
from roberta_tf.finetuning.squad import features as squad_features
from roberta_tf.finetuning.squad import read as squad_read
from roberta_tf.finetuning.squad import tf_ops as squad_tf_ops
from roberta_tf.finetuning.squad import write as squad_write
from roberta_tf.tokenization.tokenizer import BytePairTokenizer, token_byte_lengths
from tests import finetune_fixtures as fx


@pytest.fixture(scope="module")
def tok(hf_tiny_dir):
  return BytePairTokenizer.from_dir(hf_tiny_dir)


@pytest.fixture(scope="module")
def byte_lengths(tok):
  return token_byte_lengths(tok.get_vocabulary())


@pytest.mark.parametrize("text", [
    "Plain words, and punctuation!",
    "  leading  and trailing spaces\tand\ttabs \n\nnewlines  ",
    "Zoë paid 5 € for 日本語 text 🙂.",
    "Literal specials: <s> then <mask> and  <mask> too </s>.",
    "",
])
def test_tokens_map_to_their_bytes(tok, byte_lengths, text):
  ids = tok(tf.constant([text]))[0].numpy()
  ctx = squad_features.align_tokens(text, ids, byte_lengths, tok.mask_id)
  raw = text.encode("utf-8")
  assert list(ctx.byte_starts[1:]) == list(ctx.byte_ends[:-1]) or "<mask>" in text
  for i, start, end in zip(ids, ctx.byte_starts, ctx.byte_ends, strict=True):
    want = tok.detokenize(tf.constant([[i]]))[0].numpy()
    if i in (tok.mask_id, tok.bos_id, tok.eos_id):
      assert raw[start:end] == want
    else:
      assert raw[start:end].decode("utf-8", "replace") == want.decode("utf-8", "replace")
  # Every token's character span (whole characters, stripped) is inside the text.
  for k in range(len(ids)):
    s, e = ctx.char_span(k, k, text)
    assert text[s:e] == text[s:e].strip(squad_features.STRIP) and 0 <= s <= e <= len(text)


def test_window_starts():
  assert squad_features.window_starts(10, 4, 2) == [0, 2, 4, 6]
  assert squad_features.window_starts(4, 4, 2) == [0]
  assert squad_features.window_starts(0, 4, 2) == [0]
  assert squad_features.window_starts(10, 4, 8) == [0, 4, 8]  # stride clamped to the window


def test_max_context_by_hand():
  starts, lengths = [0, 2, 4, 6], [4, 4, 4, 4]
  # token 2: window 0 has 1 token of context on its short side, window 1 none -> window 0.
  assert squad_features.max_context_mask(starts, lengths, 0).tolist() == [True, True, True, False]
  assert squad_features.max_context_mask(starts, lengths, 1).tolist() == [False, True, True, False]
  assert squad_features.max_context_mask(starts, lengths, 3).tolist() == [False, True, True, True]


def test_features_label_the_answer_in_every_window_holding_it(tok, tmp_path):
  path = fx.write_squad(str(tmp_path / "v2.json"), paragraphs=6, seed=3, version_2=True)
  examples, v2 = squad_read.read_squad(path)
  assert v2 and any(e.is_impossible for e in examples)
  feats, contexts, unlocated = squad_features.featurize(examples, tok, max_seq_len=32,
                                                        max_query_len=10, doc_stride=6)
  assert unlocated == 0
  windows = np.bincount(feats.example_index)
  assert windows.max() > 2  # long contexts are split
  labelled = set()
  for f, ids in enumerate(feats.input_ids):
    example = examples[feats.example_index[f]]
    assert len(ids) <= 32 and ids[0] == tok.bos_id and ids[-1] == tok.eos_id
    offset = feats.context_offset[f]
    assert list(ids[offset - 2:offset]) == [tok.eos_id, tok.eos_id]
    start, end = feats.start_positions[f], feats.end_positions[f]
    if example.is_impossible:
      assert (start, end) == (0, 0)
    if start:
      base = feats.window_start[f] - offset
      s, e = contexts[feats.example_index[f]].char_span(base + start, base + end,
                                                        example.context)
      assert example.context[s:e] == example.answers[0][0]
      labelled.add(example.id)
  assert labelled == {e.id for e in examples if not e.is_impossible}


def _one_example(tok, context, question="Which?"):
  example = squad_read.SquadExample("q", question, context, (), False)
  feats, contexts, _ = squad_features.featurize([example], tok, max_seq_len=64, max_query_len=8,
                                                doc_stride=16)
  return example, feats, contexts


def test_decode_best_valid_span_nbest_and_null(tok):
  example, feats, contexts = _one_example(tok, "The function returns a new list object.")
  n = len(feats.input_ids[0])
  offset = feats.context_offset[0]
  tokens = [tok.id_to_token(i) for i in feats.input_ids[0][offset:-1]]
  assert tokens == ["The", "Ġfunction", "Ġreturns", "Ġa", "Ġnew", "Ġlist", "Ġobject", "."]
  at = {t: offset + k for k, t in enumerate(tokens)}
  start, end = np.zeros(n, np.float32), np.zeros(n, np.float32)
  start[at["Ġnew"]], end[at["Ġlist"]] = 5.0, 5.0
  end[at["Ġreturns"]] = 9.0  # before the best start: only valid with a start at or before it
  preds, nbest, nulls = squad_decode.decode([example], feats, contexts, [start], [end],
                                            version_2=False, max_answer_len=3)
  assert preds["q"] == "new list"
  texts = [c.text for c in nbest["q"]]
  assert len(texts) == len(set(texts)) and nbest["q"][0].score == pytest.approx(10.0)
  # the end at "beta" pairs with starts up to it: best such span scores 9 + 0 < 10
  assert all(a.score >= b.score for a, b in zip(nbest["q"], nbest["q"][1:], strict=False))
  # max_answer_len=1: new..list (2 tokens) is too long.
  preds, _, _ = squad_decode.decode([example], feats, contexts, [start], [end], version_2=False,
                                    max_answer_len=1)
  assert preds["q"] != "new list"
  # v2: a null score (start[0] + end[0] = 12) above the best span's 10 predicts no answer.
  start[0], end[0] = 6.0, 6.0
  preds, _, nulls = squad_decode.decode([example], feats, contexts, [start], [end], version_2=True,
                                        max_answer_len=3)
  assert preds["q"] == "" and nulls["q"] == pytest.approx(12.0)
  preds, _, _ = squad_decode.decode([example], feats, contexts, [start], [end], version_2=True,
                                    max_answer_len=3, null_score_threshold=5.0)
  assert preds["q"] == "new list"


class _LogitsModel:
  """Stands in for the model: the given per-window logits (windows come in the same order)."""

  def __init__(self, start, end):
    self.start, self.end = tf.constant(start), tf.constant(end)

  def __call__(self, inputs, training=False):
    length = tf.shape(inputs["input_ids"])[1]
    pad = (1.0 - tf.cast(inputs["padding_mask"], tf.float32)) * -1e9
    return {"start_logits": self.start[:, :length] + pad, "end_logits": self.end[:, :length] + pad}


@pytest.mark.parametrize("version_2", [False, True])
def test_tf_answer_matches_python_decode(tok, byte_lengths, tmp_path, version_2):
  path = fx.write_squad(str(tmp_path / "d.json"), paragraphs=5, seed=7, version_2=version_2)
  examples, _ = squad_read.read_squad(path)
  examples.append(squad_read.SquadExample("empty", "What?", "", (), True))
  examples.append(squad_read.SquadExample("odd", "Où?", "  Zoë   à  Paris,\n\n日本  ", (), True))
  kw = dict(max_seq_len=30, max_query_len=9, doc_stride=5)
  feats, contexts, _ = squad_features.featurize(examples, tok, **kw)
  rng = np.random.default_rng(0)
  width = max(len(x) for x in feats.input_ids)
  start = rng.normal(size=(len(feats.input_ids), width)).astype(np.float32)
  end = rng.normal(size=(len(feats.input_ids), width)).astype(np.float32)
  preds, nbest, nulls = squad_decode.decode(examples, feats, contexts, list(start), list(end),
                                            version_2=version_2, max_answer_len=4)
  out = squad_tf_ops.answer(_LogitsModel(start, end), tok, tf.constant(byte_lengths),
                        tf.constant([e.question for e in examples]),
                        tf.constant([e.context for e in examples]), max_answer_len=4,
                        version_2=version_2, null_score_threshold=0.0, **kw)
  answers = [a.decode("utf-8") for a in out["answer"].numpy()]
  assert answers == [preds[e.id] for e in examples]
  assert sum(bool(a) for a in answers) > len(examples) // 2
  for i, e in enumerate(examples):
    if nbest[e.id]:
      assert out["score"][i].numpy() == pytest.approx(nbest[e.id][0].score, abs=1e-4)
    assert out["null_score"][i].numpy() == pytest.approx(nulls[e.id], abs=1e-5)


def test_read_squad_rejects_bad_answers(tmp_path):
  bad = {"data": [{"paragraphs": [{"context": "short", "qas": [
      {"id": "x", "question": "?", "answers": [{"text": "much too long", "answer_start": 2}]}]}]}]}
  path = tmp_path / "bad.json"
  path.write_text(json.dumps(bad))
  with pytest.raises(squad_read.SquadError, match="question x"):
    squad_read.read_squad(str(path))
  path.write_text("[1, 2]")
  with pytest.raises(squad_read.SquadError, match="layout"):
    squad_read.read_squad(str(path))


def test_write_predictions(tmp_path):
  squad_write.write_predictions(str(tmp_path), {"q": "x"},
                                {"q": [squad_decode.Candidate("x", 1.5, 0, 1)]}, {"q": -2.0})
  assert json.loads((tmp_path / "predictions.json").read_text()) == {"q": "x"}
  nbest = json.loads((tmp_path / "nbest_predictions.json").read_text())
  assert nbest["q"][0] == {"text": "x", "score": 1.5, "start_char": 0, "end_char": 1,
                           "null_score": -2.0}


def test_read_and_write_on_a_url(tmp_path):
  """SQuAD JSON read from ram:// (TF's in-memory file system, standing for gs://) as from local
  disk; the predictions written there; errors name the URL."""
  root = f"ram://squad_{uuid.uuid4().hex[:8]}"
  local = fx.write_squad(str(tmp_path / "dev.json"), paragraphs=2, seed=0, version_2=True)
  files.makedirs(root)
  files.copy(local, files.join(root, "dev.json"))
  assert squad_read.read_squad(files.join(root, "dev.json")) == squad_read.read_squad(local)
  with pytest.raises(squad_read.SquadError, match=f"^{root}/none.json: cannot read SQuAD JSON"):
    squad_read.read_squad(files.join(root, "none.json"))
  squad_write.write_predictions(files.join(root, "out"), {"q": "x"},
                                {"q": [squad_decode.Candidate("x", 1.5, 0, 1)]}, {"q": -2.0})
  assert files.read_json(files.join(root, "out", "predictions.json")) == {"q": "x"}
  assert files.read_json(files.join(root, "out", "nbest_predictions.json"))["q"][0]["score"] == 1.5
  assert not os.path.exists("ram:")
  files.rmtree(root)
