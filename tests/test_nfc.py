"""roberta_tf.tokenization.nfc: NFC in core TF ops, equal to HF `tokenizers`' NFC normalizer on
every composing pair, every mark and every character the tables hold."""

import random

import pytest
import tensorflow as tf
from tokenizers import normalizers

from roberta_tf.tokenization import nfc


@pytest.fixture(scope="module")
def ours():
  return nfc.NFC()


def _check(ours, texts):
  hf = normalizers.NFC()
  got = [t.decode("utf-8") for t in ours(tf.constant([t.encode() for t in texts])).numpy()]
  bad = [(t, g) for t, g, e in zip(texts, got, (hf.normalize_str(t) for t in texts), strict=True)
         if g != e]
  assert not bad, [([hex(ord(c)) for c in t], [hex(ord(c)) for c in g]) for t, g in bad[:5]]


def test_pairs_and_marks(ours):
  """Every composing pair alone, followed by two marks, after a mark; random runs of marks
  (reordering, blocking); Hangul L V T; ASCII and empty texts untouched."""
  t = nfc.tables()
  rng = random.Random(0)
  pairs = [chr(k >> 21) + chr(k & (2**21 - 1)) for k in t["pair_keys"].tolist()]
  marks = [chr(c) for c in t["info_keys"].tolist()]
  texts = pairs + [p + rng.choice(marks) + rng.choice(marks) for p in pairs]
  texts += [rng.choice(marks) + p for p in rng.sample(pairs, 2000)]
  texts += ["".join(rng.choice(marks + ["a", "e\u0301", "\u1100", "\u1161", "\u11a8", " "])
                    for _ in range(rng.randint(0, 10))) for _ in range(5000)]
  texts += ["", "plain ascii", "\u1100\u1161\u11a8 \u1100\u1161 \uac00\u11a8"]
  _check(ours, texts)


def test_every_table_character(ours):
  """Each character with a decomposition, a combining class or a quick-check flag, and the
  ones HF's tables lack (`_HF_UNKNOWN`) after a base and before a mark."""
  t = nfc.tables()
  chars = sorted(set(t["dec_keys"].tolist()) | set(t["info_keys"].tolist())
                 | {c for lo, hi in nfc._HF_UNKNOWN for c in range(lo, hi + 1)})  # pylint: disable=protected-access
  _check(ours, [chr(c) for c in chars] + ["a" + chr(c) + "\u0316\u0301" for c in chars])
