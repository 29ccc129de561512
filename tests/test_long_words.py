"""roberta_tf.tokenization.long_words: words over the cap are cut at character starts and their
seams re-merged; the ids stay HF's on hostile and real long words, in every TF context."""

import gzip
import json
import random

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.tokenization import long_words
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from tests.conftest import HF_TINY, TESTDATA
from tests.test_tokenizer import hf_ids, hf_tokenizer


@pytest.fixture(scope="module")
def tok():
  return BytePairTokenizer.from_dir(HF_TINY)


@pytest.fixture(scope="module")
def hf():
  return hf_tokenizer(f"{HF_TINY}/vocab.json", f"{HF_TINY}/merges.txt")


def test_cap_follows_the_longest_token(tok):
  assert long_words.cap_bytes(10) == long_words.MIN_CAP_BYTES
  assert long_words.cap_bytes(300) == 600
  # The fixture's longest token is a 123-byte table rule: words up to 256 bytes stay whole.
  assert tok.long_word_cap == 256


def test_cut_covers_each_word_at_character_starts():
  words = ["short", "é" * 100, "x" * 64 + "日本" * 30, "a" * 129, "€" * 22]
  buffer = "".join(words).encode("utf-8")
  lengths = np.array([len(w.encode("utf-8")) for w in words], np.int64)
  starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
  begin, size, word, index, num = (t.numpy() for t in long_words.cut(
      tf.constant(np.frombuffer(buffer, np.uint8)), tf.constant(starts), tf.constant(lengths),
      cap=64))
  assert long_words.PIECE_BYTES == 32  # the counts below are for 32-byte pieces
  # "€" * 22 is 66 bytes: its cut at 64 moves to the end of the word, leaving one piece.
  assert num.tolist() == [1, 7, 8, 5, 2]
  for w in range(len(words)):
    mine = word == w
    assert index[mine].tolist() == list(range(num[w]))
    # Pieces tile the word exactly, each starting at a character's first byte.
    assert begin[mine][0] == starts[w]
    assert (begin[mine] + size[mine])[-1] == starts[w] + lengths[w]
    assert np.array_equal(begin[mine][1:], (begin[mine] + size[mine])[:-1])
    for b in begin[mine]:
      assert buffer[b] & 0xC0 != 0x80
    pieces = [buffer[b:b + n].decode("utf-8") for b, n in zip(begin[mine], size[mine],
                                                             strict=True)]
    assert "".join(pieces) == words[w]
    assert max(size[mine]) <= long_words.PIECE_BYTES + 3 or num[w] == 1


def hostile_texts(size, seed=0):
  rng = random.Random(seed)
  zwj = "\U0001F469\u200D\U0001F469\u200D\U0001F467\u200D\U0001F466\U0001F3F3\uFE0F\u200D\U0001F308"
  return [
      "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(size)),
      "".join(rng.choice("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
              for _ in range(size)),
      "a" * size, "=" * (size + 1), " " * size,
      "".join(rng.choice("0123456789") for _ in range(size)),
      zwj * (size // 40),
      "".join(chr(rng.randrange(0x4E00, 0x9FFF)) for _ in range(size // 3)),
      "é" * (size // 2),
      " ".join(rng.choice("abc") for _ in range(size // 2)),
  ]


def test_hostile_inputs_equal_hf(tok, hf):
  texts = hostile_texts(20_000)
  got = tok(texts)
  assert got.to_list() == hf_ids(hf, texts)
  assert [t.decode("utf-8") for t in tok.detokenize(got).numpy()] == texts


def test_real_text_without_whitespace_equals_hf(tok, hf):
  """Long words of real text: seams fall inside ordinary words, where merges reach furthest."""
  with gzip.open(f"{TESTDATA}/python_docs_small.jsonl.gz", "rt", encoding="utf-8") as f:
    text = "".join("".join(json.loads(line)["text"].split()) for line in f)
  rng = random.Random(1)
  texts = [text[i:i + rng.randint(257, 5000)] for i in range(0, 200_000, 5000)]
  assert tok(texts).to_list() == hf_ids(hf, texts)


def test_runs_of_a_long_token_stay_valid_and_bounded(tok, hf):
  """The documented divergence: the fixture has dash tokens longer than a seam window, so a
  20 KB run of '-' is split into shorter dash tokens than HF's; it still decodes exactly."""
  text = "-" * 20_000
  got = tok([text])
  want = hf_ids(hf, [text])[0]
  assert tok.detokenize(got).numpy()[0].decode("utf-8") == text
  assert len(want) <= got.row_lengths().numpy()[0] <= 2 * len(want) + 2


def test_long_words_in_graph_and_tf_data(tok, hf):
  texts = [t[:3000] for t in hostile_texts(3000, seed=2)] + ["short words here", ""]
  want = hf_ids(hf, texts)
  graph = tf.function(lambda x: tok.tokenize(x), autograph=False)
  assert graph(tf.constant(texts)).to_list() == want
  ds = tf.data.Dataset.from_tensor_slices(texts).batch(4).map(
      tok.tokenize, num_parallel_calls=2, deterministic=True)
  assert [row for batch in ds for row in batch.to_list()] == want


class _Module(tf.Module):
  def __init__(self, tok):
    super().__init__()
    self.tok = tok

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)], autograph=False)
  def ids(self, texts):
    return self.tok.tokenize(texts).to_tensor(-1)


@pytest.mark.slow
def test_long_words_through_a_saved_model(tok, hf, tmp_path):
  texts = [t[:3000] for t in hostile_texts(3000, seed=3)] + ["short"]
  tf.saved_model.save(_Module(tok), str(tmp_path))
  got = tf.saved_model.load(str(tmp_path)).ids(tf.constant(texts)).numpy().tolist()
  assert [[i for i in row if i != -1] for row in got] == hf_ids(hf, texts)
