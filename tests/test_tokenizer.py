"""roberta_tf.tokenization.tokenizer: exact parity with HF `tokenizers`, round trips, TF contexts,
bad input."""

import gzip
import hashlib
import json
import os
import random
import time

import numpy as np
import pytest
import tensorflow as tf
import tokenizers
from tokenizers import models, pre_tokenizers

from roberta_tf.tokenization import pretokenize
from roberta_tf.tokenization.tokenizer import (
  BytePairTokenizer,
  TokenizerFileError,
  bytes_to_unicode,
)
from tests.conftest import HF_TINY, REPO, TESTDATA
from tests.harness import module_env, run_script

# The whole corpus, when ../shared sits beside the repository (the test is skipped elsewhere).
FULL_CORPUS = os.path.join(os.path.dirname(REPO), "shared", "corpora", "python-docs.jsonl.gz")


def hf_tokenizer(vocab_json, merges_txt):
  """The peer: what RobertaTokenizerFast runs (no post-processor: no <s> ... </s> added)."""
  tok = tokenizers.Tokenizer(models.BPE.from_file(vocab_json, merges_txt))
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
  tok.add_special_tokens([tokenizers.AddedToken(t, lstrip=(t == "<mask>"), special=True)
                          for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")])
  return tok


def hf_ids(hf, texts):
  return [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]


def corpus_lines(path):
  lines = []
  with gzip.open(path, "rt", encoding="utf-8") as f:
    for line in f:
      lines.extend(json.loads(line)["text"].split("\n"))
  return lines


@pytest.fixture(scope="module")
def tok():
  return BytePairTokenizer.from_dir(HF_TINY)


@pytest.fixture(scope="module")
def hf():
  return hf_tokenizer(os.path.join(HF_TINY, "vocab.json"), os.path.join(HF_TINY, "merges.txt"))


# Strings that exercise every rule of the pre-tokenizer and the special-token split.
PIECES = ["a", "b", "s", "t", "'", " ", "  ", "\t", "\n", "\u00a0", "<s>", "</s>", "<mask>",
          "<pad>", "<unk>", "<", ">", "1", "é", "日", "\u0301", "\x00", "re", "ll", "!",
          "\u2028", "\U0001F600", "६", "<mas", "k>", "ve", "d", "m", "\r\n", "the", " the",
          "\u3000", "\x85", "\x1c"]


def random_texts(n, seed=0):
  rng = random.Random(seed)
  return ["".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14))) for _ in range(n)]


def test_attributes(tok):
  assert (tok.bos_id, tok.pad_id, tok.eos_id, tok.unk_id, tok.mask_id) == (0, 1, 2, 3, 4)
  assert tok.vocab_size == 8000
  with open(os.path.join(HF_TINY, "vocab.json"), "rb") as f:
    assert tok.vocab_sha256 == hashlib.sha256(f.read()).hexdigest()
  assert tok.token_to_id("<mask>") == 4 and tok.id_to_token(4) == "<mask>"
  assert tok.id_to_token(tok.token_to_id("Ġis")) == "Ġis"
  assert isinstance(tok, tf.Module)
  assert tok.all_occurrences  # the trainer's merges are consistent: the fast merge loop applies


def test_fixture_cases(tok):
  with open(os.path.join(HF_TINY, "tokenizer_cases.jsonl"), encoding="utf-8") as f:
    cases = [json.loads(line) for line in f]
  got = tok([c["text"] for c in cases]).to_list()
  for case, ids in zip(cases, got, strict=True):
    assert ids == case["ids"], case["text"]


def test_small_corpus_parity(tok, hf):
  lines = corpus_lines(os.path.join(TESTDATA, "python_docs_small.jsonl.gz"))
  assert len(lines) > 1000
  assert tok(lines).to_list() == hf_ids(hf, lines)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(FULL_CORPUS), reason="shared corpus not present")
def test_full_corpus_parity(tok, hf):
  lines = corpus_lines(FULL_CORPUS)
  got = tok(lines)
  expected = hf_ids(hf, lines)
  assert got.row_lengths().numpy().tolist() == [len(e) for e in expected]
  assert np.array_equal(got.flat_values.numpy(), np.concatenate([np.array(e, np.int32)
                                                                 for e in expected]))


def test_random_text_parity(tok, hf):
  """Whitespace runs, contractions, special strings, marks, NUL, Devanagari digits."""
  texts = random_texts(3000)
  assert tok(texts).to_list() == hf_ids(hf, texts)


def test_long_random_words_parity(tok, hf):
  """Long words exercise the merge loop's early merges (bpe_merge._untouchable)."""
  rng = random.Random(5)
  alphabets = ["abcdefghijklmnopqrstuvwxyz", "etaoinshrdlu", "ab", "-=_", "0123456789"]
  texts = ["".join(rng.choice(rng.choice(alphabets)) for _ in range(rng.randint(1, 400)))
           for _ in range(300)]
  texts += ["".join(rng.choice(alphabets[0]) for _ in range(5000))]
  assert tok(texts).to_list() == hf_ids(hf, texts)


def test_keras_hub_pitfalls(tok, hf):
  texts = ["trailing   ", "a  \t\n  ", "   ", "६ and ६६ digits", "x६y", "is <mask>.",
           "a<s>b</s>c<pad><unk>", "  <mask>  <mask>", "it's  'sup  'll", "\n'd"]
  assert tok(texts).to_list() == hf_ids(hf, texts)


def test_special_tokens(tok):
  ids = tok(["is <mask>.", "is <s>.", "<mask><mask>", "\u00a0\t<mask>"]).to_list()
  is_, dot, space = tok.token_to_id("is"), tok.token_to_id("."), tok.token_to_id("Ġ")
  assert ids[0] == [is_, tok.mask_id, dot]          # <mask> absorbs the space before it
  assert ids[1] == [is_, space, tok.bos_id, dot]    # <s> does not
  assert ids[2] == [tok.mask_id, tok.mask_id]
  assert ids[3] == [tok.mask_id]


def test_round_trip(tok):
  lines = corpus_lines(os.path.join(TESTDATA, "python_docs_small.jsonl.gz"))
  texts = lines + [t for t in random_texts(2000, seed=1) if "<mask>" not in t]
  back = tok.detokenize(tok(texts)).numpy()
  assert [b.decode("utf-8") for b in back] == texts
  # Whitespace before <mask> is absorbed (documented): it does not come back.
  assert tok.detokenize(tok(["a \t<mask> b"])).numpy()[0] == b"a<mask> b"


def test_detokenize_forms(tok):
  ids = tok(["Hello world"])
  assert tok.detokenize(ids.to_tensor()).numpy().tolist() == [b"Hello world"]
  assert tok.detokenize(ids.flat_values).numpy() == b"Hello world"
  # A multi-byte character cut in half decodes to U+FFFD, as HF's ByteLevel decoder does.
  cut = tok("日")[:1]  # the first of its three byte tokens
  assert tok.detokenize(cut).numpy().decode("utf-8") == "\ufffd"


def test_invalid_utf8(tok, hf):
  """Invalid UTF-8 = Python's decode(errors="replace"): one U+FFFD per maximal bad subpart."""
  raw = [b"a\xffb", b"\xe2\x82", b"\xe2\x82x", b"\xf0\x9f\x98 ok", b"\xc0\xaf", b"\xed\xa0\x80",
         b"\xf4\x90\x80\x80", b"\x80\x80", b"<s>\xff<mask>", b"\xff \xfe", b"ok\xe2"]
  rng = random.Random(2)
  alphabet = [0x41, 0x20, 0x27, 0x73, 0x3C, 0x3E, 0x80, 0xBF, 0xC0, 0xC2, 0xE0, 0xED, 0xA0,
              0xF0, 0xF4, 0x90, 0x8F, 0xFF, 0xE2, 0x82, 0xAC, 0x00]
  raw += [bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)]
  decoded = [r.decode("utf-8", errors="replace") for r in raw]
  assert tok(raw).to_list() == hf_ids(hf, decoded)
  assert tok([b"a\xffb"]).to_list() == tok(["a\ufffdb"]).to_list()
  assert tok.detokenize(tok([b"\xe2\x82x"])).numpy()[0].decode("utf-8") == "\ufffdx"


def test_nul_and_empty(tok, hf):
  got = tok(["", "a\x00b", "\x00", "", " "])
  assert got.to_list() == hf_ids(hf, ["", "a\x00b", "\x00", "", " "])
  assert got.row_lengths().numpy().tolist()[0] == 0
  empty = tok(tf.constant([], tf.string))
  assert empty.shape.as_list() == [0, None] and empty.dtype == tf.int32
  assert tok("Hello world").numpy().tolist() == [4416, 4378]  # a scalar gives one row


def test_long_line_without_whitespace(tok, hf):
  text = ("abcdefghij" * 2000 + "0123456789" * 500 + "().,;" * 400)  # 27 KB, no whitespace
  start = time.time()
  got = tok([text]).to_list()[0]
  assert time.time() - start < 30
  assert got == hf_ids(hf, [text])[0]


def test_graph_contexts(tok):
  texts = random_texts(64, seed=3) + ["Hello world", "is <mask>."]
  eager = tok(texts).to_list()
  graph = tf.function(lambda x: tok(x).to_tensor(-1))(tf.constant(texts)).numpy().tolist()
  assert [[i for i in row if i != -1] for row in graph] == eager
  ds = tf.data.Dataset.from_tensor_slices(texts).batch(5).map(
      tok, num_parallel_calls=2, deterministic=True)
  assert [row for batch in ds for row in batch.to_list()] == eager


@pytest.mark.slow
def test_saved_model_in_fresh_process(tok, tmp_path):
  class Holder(tf.Module):

    def __init__(self, tokenizer):
      super().__init__()
      self.tokenizer = tokenizer

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def encode(self, texts):
      ids = self.tokenizer(texts)
      return {"values": ids.flat_values, "row_splits": ids.row_splits}

  texts = ["Hello world", "it's <mask> ६", "", "a\x00b"]
  path = str(tmp_path / "saved")
  tf.saved_model.save(Holder(tok), path)
  code = ("import sys, json, tensorflow as tf, tensorflow_text\n"
          f"m = tf.saved_model.load({path!r})\n"
          f"out = m.encode(tf.constant({texts!r}))\n"
          "rt = tf.RaggedTensor.from_row_splits(out['values'], out['row_splits'])\n"
          "print(json.dumps(rt.to_list()))\n")
  result = run_script(code, env=module_env(CUDA_VISIBLE_DEVICES=""), timeout=120)
  assert result.returncode == 0, result.stderr[-2000:]
  assert json.loads(result.stdout.strip().splitlines()[-1]) == tok(texts).to_list()


def test_codepoint_classes_match_hf():
  """The class table agrees with HF's Oniguruma (Unicode 16) on a sample of all codepoints."""
  pre = pre_tokenizers.ByteLevel(add_prefix_space=False)

  def hf_class(cp):
    c = chr(cp)
    if len(pre.pre_tokenize_str("x" + c)) == 1:
      return pretokenize.CLASS_LETTER
    if len(pre.pre_tokenize_str("1" + c)) == 1:
      return pretokenize.CLASS_NUMBER
    if len(pre.pre_tokenize_str("!" + c)) == 1:
      return pretokenize.CLASS_OTHER
    return pretokenize.CLASS_SPACE

  table = pretokenize.codepoint_classes()
  sample = set(range(0, 0x3000)) | set(range(0, 0x110000, 97))
  for lo, hi, _ in pretokenize._UNICODE_16_ADDITIONS:  # pylint: disable=protected-access
    sample |= {lo, hi}
  sample -= set(range(0xD800, 0xE000))  # surrogates never reach the table (repaired to U+FFFD)
  wrong = [hex(cp) for cp in sorted(sample) if table[cp] != hf_class(cp)]
  assert not wrong, wrong[:20]


def _write_tokenizer_files(directory, vocab, merges):
  with open(os.path.join(directory, "vocab.json"), "w", encoding="utf-8") as f:
    json.dump(vocab, f, ensure_ascii=False)
  with open(os.path.join(directory, "merges.txt"), "w", encoding="utf-8") as f:
    f.write("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))


def test_inconsistent_merges_exact(tmp_path):
  """Merges using a token before it is made: the one-merge-per-step loop stays exact."""
  symbols = list(bytes_to_unicode().values())
  merges = [("ab", "c"), ("a", "b"), ("c", "c"), ("b", "c"), ("a", "a"), ("aa", "a")]
  vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"] + symbols)}
  for a, b in merges:
    vocab.setdefault(a + b, len(vocab))
  vocab["<mask>"] = len(vocab)
  _write_tokenizer_files(str(tmp_path), vocab, merges)
  tok = BytePairTokenizer.from_dir(str(tmp_path))
  assert not tok.all_occurrences
  hf = hf_tokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
  rng = random.Random(4)
  texts = ["".join(rng.choice("abc") for _ in range(rng.randint(1, 12))) for _ in range(500)]
  assert tok(texts).to_list() == hf_ids(hf, texts)


def test_file_errors(tmp_path):
  symbols = list(bytes_to_unicode().values())
  vocab = {t: i for i, t in enumerate(["<s>", "<pad>", "</s>", "<unk>"] + symbols)}
  _write_tokenizer_files(str(tmp_path), vocab, [])
  with pytest.raises(TokenizerFileError, match="<mask>"):
    BytePairTokenizer.from_dir(str(tmp_path))
  vocab["<mask>"] = len(vocab)
  _write_tokenizer_files(str(tmp_path), vocab, [("a", "b")])
  with pytest.raises(TokenizerFileError, match="merges.txt.*'ab'"):
    BytePairTokenizer.from_dir(str(tmp_path))
  (tmp_path / "merges.txt").write_text("#version: 0.2\na b c\n", encoding="utf-8")
  with pytest.raises(TokenizerFileError, match="merges.txt:2"):
    BytePairTokenizer.from_dir(str(tmp_path))
  (tmp_path / "vocab.json").write_text("[1, 2]", encoding="utf-8")
  with pytest.raises(TokenizerFileError, match="vocab.json"):
    BytePairTokenizer.from_dir(str(tmp_path))
  with pytest.raises(TokenizerFileError, match="missing"):
    BytePairTokenizer.from_files(str(tmp_path / "missing.json"), str(tmp_path / "merges.txt"))
