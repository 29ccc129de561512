"""roberta_tf.tokenization.pipeline_tokenizer: a tokenizer.json's pipeline (ModernBERT's) in TF
ops, with HF `tokenizers`' ids; tokenizer_json's refusals."""

import copy
import gzip
import json
import os
import random

import pytest
import tensorflow as tf
import tokenizers

from roberta_tf.tokenization import tokenizer_json
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from roberta_tf.tokenization.vocab_files import VocabFileError
from tests import serving_loaders
from tests.conftest import REPO, TESTDATA

MB_TINY = os.path.join(TESTDATA, "modernbert_tiny")
TOKENIZER_JSON = os.path.join(MB_TINY, "tokenizer.json")
# The whole corpus, when ../shared sits beside the repository (the test is skipped elsewhere).
FULL_CORPUS = os.path.join(os.path.dirname(REPO), "shared", "corpora", "python-docs.jsonl.gz")


def _cases():
  with open(os.path.join(MB_TINY, "tokenizer_cases.jsonl"), encoding="utf-8") as f:
    return [json.loads(line) for line in f]


def _text(case):
  return bytes.fromhex(case["bytes_hex"]) if "bytes_hex" in case else case["text"].encode()


def _spec_json():
  with open(TOKENIZER_JSON, encoding="utf-8") as f:
    return json.load(f)


def _both(spec: dict, tmp_path, name="tokenizer.json"):
  """Ours and HF's tokenizer of one tokenizer.json dict."""
  path = os.path.join(tmp_path, name)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(spec, f)
  return PipelineTokenizer.from_file(path), tokenizers.Tokenizer.from_file(path)


def hf_ids(hf, texts, template=False):
  return [e.ids for e in hf.encode_batch(texts, add_special_tokens=template)]


@pytest.fixture(scope="module")
def tok():
  return PipelineTokenizer.from_dir(MB_TINY)


@pytest.fixture(scope="module")
def hf():
  return tokenizers.Tokenizer.from_file(TOKENIZER_JSON)


# Pieces of hostile text: every added token and near misses, whitespace of every kind, marks
# that NFC composes or reorders, Hangul jamo, contractions, digits.
PIECES = ["a", "b", "s", "'", " ", "  ", "   ", " " * 7, " " * 25, "\t", "\n", "\u00a0", "[MASK]",
          "[CLS]", "[SEP]", "[PAD]", "[UNK]", "<|endoftext|>", "<|padding|>", "|||IP_ADDRESS|||",
          "|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||", "|||", "[MAS", "K]", "[", "]", "|", "1",
          "é", "e", "\u0301", "\u0327", "\u0323", "A", "\u030a", "\u212b", "日", "\x00", "re",
          "ll", "!", "\u2028", "\U0001F600", "६", "\r\n", "the", " the", "\u3000", "\x85",
          "\u1100", "\u1161", "\u11a8", "\ufb01", "<s>", "\ud7a3"]


def random_texts(n, seed=0):
  rng = random.Random(seed)
  return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def test_attributes(tok):
  assert (tok.cls_id, tok.sep_id, tok.pad_id, tok.mask_id, tok.unk_id) == (
      1020, 1021, 1022, 1023, 1019)
  assert (tok.bos_id, tok.eos_id, tok.vocab_size) == (1020, 1021, 1024)
  assert tok.template.single([5]) == [1020, 5, 1021]
  assert tok.template.pair([5], [6]) == [1020, 5, 1021, 6, 1021]
  assert tok.token_to_id("  ") == 1015 and tok.id_to_token(0) == "|||IP_ADDRESS|||"


def test_fixture_cases(tok):
  """The committed HF ids (runs without `tokenizers`): no template, template, pairs."""
  cases = _cases()
  single = [c for c in cases if "pair" not in c]
  ids = tok(tf.constant([_text(c) for c in single]))
  assert ids.to_list() == [c["ids"] for c in single]
  assert tok.apply_template(ids).to_list() == [c["template_ids"] for c in single]
  pairs = [c for c in cases if "pair" in c]
  a = tok([c["text"] for c in pairs])
  b = tok([c["pair"] for c in pairs])
  assert tok.apply_template(a, b).to_list() == [c["template_ids"] for c in pairs]


def test_corpus_parity(tok, hf):
  """Every line, and every whole document (indented code: space-run tokens), of the fixture."""
  with gzip.open(os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), "rt") as f:
    docs = [json.loads(line)["text"] for line in f]
  lines = [line for d in docs for line in d.split("\n")]
  assert len(lines) > 3000
  assert tok(lines).to_list() == hf_ids(hf, lines)
  assert tok(docs).to_list() == hf_ids(hf, docs)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(FULL_CORPUS), reason="shared corpus not present")
def test_full_corpus_parity(tok, hf):
  """The 11 MB of the shared corpus: 288,789 lines and 497 documents."""
  with gzip.open(FULL_CORPUS, "rt") as f:
    docs = [json.loads(line)["text"] for line in f]
  lines = [line for d in docs for line in d.split("\n")]
  assert tok(lines).to_list() == hf_ids(hf, lines)
  assert tok(docs).to_list() == hf_ids(hf, docs)


def test_hostile_runs_parity(tok, hf):
  """Long runs: spaces (space-run tokens back to back), pipes (a candidate at every byte),
  [MASK] after spaces, decomposed accents, Hangul jamo, marks on one letter."""
  texts = [" " * 5000, "|" * 5000, " [MASK]" * 700, "e\u0301" * 2000, "\u1100\u1161\u11a8" * 900,
           "a" + "\u0301\u0316" * 300, "ab  \t[MASK] |||IP_ADDRESS||| Cafe\u0301 " * 200]
  assert tok(texts).to_list() == hf_ids(hf, texts)


def test_random_text_parity(tok, hf):
  texts = random_texts(3000)
  assert tok(texts).to_list() == hf_ids(hf, texts)
  assert tok.apply_template(tok(texts[:200])).to_list() == hf_ids(hf, texts[:200], True)


def test_invalid_utf8_parity(tok, hf):
  rng = random.Random(3)
  raw = [bytes(rng.randrange(256) for _ in range(rng.randint(0, 40))) for _ in range(300)]
  raw += [b"[MASK]\xff [MASK]", b"  \xe6\x97  ", b"e\xcc"]
  assert tok(tf.constant(raw)).to_list() == hf_ids(
      hf, [r.decode("utf-8", "replace") for r in raw])


def test_flag_variants_parity(tmp_path):
  """rstrip, lstrip on a normalized token, a token whose content NFC changes, a normalized
  special, no normalizer, RoBERTa's post-processor: each as HF runs it."""
  spec = _spec_json()
  for t in spec["added_tokens"]:
    if t["content"] == "[SEP]":
      t["rstrip"] = True
    if t["content"] == "|||IP_ADDRESS|||":
      t["lstrip"] = True
    if t["content"] == "[UNK]":
      t["normalized"] = True
  spec["added_tokens"].append({"id": 1024, "content": "Cafe\u0301", "single_word": False,
                               "lstrip": False, "rstrip": True, "normalized": True,
                               "special": False})
  # ModernBERT's [unused0].. after [MASK]: normalized, non-special, sharing "[" with the specials.
  spec["added_tokens"] += [{"id": 1025 + i, "content": f"[unused{i}]", "single_word": False,
                            "lstrip": False, "rstrip": False, "normalized": True,
                            "special": False} for i in range(12)]
  texts = random_texts(1500, seed=1) + ["a [SEP]   b", "x  |||IP_ADDRESS|||", "Café  x",
                                        "Cafe\u0301", "[SEP]  [SEP]", "[SEP]   |||IP_ADDRESS|||",
                                        "[unused1][unused11] [unused1 [MASK][unused10]"]
  ours, theirs = _both(spec, tmp_path)
  assert ours(texts).to_list() == hf_ids(theirs, texts)
  plain = copy.deepcopy(spec)
  plain["normalizer"] = None
  plain["post_processor"] = {"type": "RobertaProcessing", "sep": ["[SEP]", 1021],
                             "cls": ["[CLS]", 1020], "trim_offsets": True,
                             "add_prefix_space": False}
  ours, theirs = _both(plain, tmp_path, "plain.json")
  assert ours(texts).to_list() == hf_ids(theirs, texts)
  pairs = [e.ids for e in theirs.encode_batch(list(zip(texts[:50], texts[50:100])))]
  assert ours.apply_template(ours(texts[:50]), ours(texts[50:100])).to_list() == pairs


def test_graph_contexts(tok, tmp_path):
  """tf.data (parallel map), and a SavedModel in a fresh process that has no tensorflow_text
  (TF2 and TF1-session loaders: the pipeline is core TF ops): the same ids as eager."""
  texts = ["is  [MASK].", "a  b\tc", "Cafe\u0301 |||IP_ADDRESS|||", "\u1100\u1161\u11a8"]
  want = tok(texts).to_list()
  ds = tf.data.Dataset.from_tensor_slices(texts).batch(2).map(
      tok.tokenize, num_parallel_calls=2)
  assert [r for batch in ds for r in batch.to_list()] == want

  class Encoder(tf.Module):
    def __init__(self, tokenizer):
      super().__init__()
      self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(self, texts):
      return {"input_ids": self.tokenizer.model_inputs(texts, 8)[0]}

  path = str(tmp_path / "saved")
  encoder = Encoder(tok)
  tf.saved_model.save(encoder, path, signatures={"encode": encoder.encode})
  expected = tok.model_inputs(tf.constant(texts), 8)[0].numpy().tolist()
  assert expected[0] == [1020] + want[0] + [1021] + [1022] * (6 - len(want[0]))
  assert max(len(r) for r in expected) <= 8
  loaded = serving_loaders.loader_runs({path: [("a", "encode", {"texts": texts})]},
                                       str(tmp_path / "out.npz"))
  for loader in ("tf2", "tf1"):
    assert loaded[loader][path]["a/input_ids"].tolist() == expected, loader


def test_detokenize(tok, hf):
  """HF's decode (ByteLevel decoder, special tokens kept) of the same ids."""
  texts = ["Cafe\u0301  x\n", "[CLS] a [MASK]", "日本 \U0001F600"] + random_texts(300, seed=4)
  ids = tok(texts)
  want = [hf.decode(i, skip_special_tokens=False).encode() for i in ids.to_list()]
  assert tok.detokenize(ids).numpy().tolist() == want
  assert want[:2] == ["Caf\u00e9  x\n".encode(), b"[CLS] a[MASK]"]


@pytest.mark.parametrize("change,part", [
    (lambda s: s["model"].update(type="WordPiece"), "model type 'WordPiece'"),
    (lambda s: s.update(model={"type": "Unigram", "vocab": []}), "model type 'Unigram'"),
    (lambda s: s["model"].update(byte_fallback=True), "byte_fallback"),
    (lambda s: s.update(normalizer={"type": "NFKC"}), "normalizer"),
    (lambda s: s.update(pre_tokenizer={"type": "Metaspace"}), "pre_tokenizer"),
    (lambda s: s["pre_tokenizer"].update(add_prefix_space=True), "add_prefix_space"),
    (lambda s: s["added_tokens"][3].update(single_word=True), "single_word"),
    (lambda s: s.update(decoder={"type": "WordPiece"}), "decoder"),
    (lambda s: s["post_processor"]["pair"].reverse(), "template"),
])
def test_refusals(change, part, tmp_path):
  spec = _spec_json()
  change(spec)
  path = str(tmp_path / "tokenizer.json")
  with open(path, "w", encoding="utf-8") as f:
    json.dump(spec, f)
  with pytest.raises(VocabFileError, match="unsupported tokenizer.json") as e:
    tokenizer_json.read(path)
  assert path in str(e.value) and part in str(e.value)


def test_auto_tokenizer_agrees(tok):
  """transformers' AutoTokenizer loads the fixture folder and gives our template ids."""
  transformers = pytest.importorskip("transformers")
  auto = transformers.AutoTokenizer.from_pretrained(MB_TINY)
  texts = random_texts(200, seed=2)
  assert auto(texts)["input_ids"] == tok.apply_template(tok(texts)).to_list()
  assert auto(texts[:20], texts[20:40])["input_ids"] == tok.apply_template(
      tok(texts[:20]), tok(texts[20:40])).to_list()
  assert (auto.cls_token_id, auto.sep_token_id, auto.pad_token_id, auto.mask_token_id) == (
      tok.cls_id, tok.sep_id, tok.pad_id, tok.mask_id)
