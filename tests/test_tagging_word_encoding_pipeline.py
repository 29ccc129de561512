"""Pre-split words on a tokenizer.json vocabulary (ModernBERT's pipeline, the fixture in
tests/testdata/modernbert_tiny): token tagging's word encoding (tag_features.encode_words, and
the export's word_texts_tf) against what transformers gives `tokenizer(words,
is_split_into_words=True)` with that file: the ids of every word, and the [CLS] ... [SEP]
input with its word_ids() alignment. word_cases.jsonl holds transformers' answers on hostile
words (make_word_cases.py); the last test recomputes them where transformers is installed.
RoBERTa's vocab.json + merges.txt encoding (" " + word) is tests/test_tagging_word_encoding.py's.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.finetuning.tagging import tag_features
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from tests.conftest import TESTDATA

FIXTURE = os.path.join(TESTDATA, "modernbert_tiny")
with open(os.path.join(FIXTURE, "word_cases.jsonl"), encoding="utf-8") as _f:
  CASES = [json.loads(line) for line in _f]


@pytest.fixture(scope="module")
def tokenizer():
  return PipelineTokenizer.from_dir(FIXTURE)


def test_words_are_encoded_as_transformers_does(tokenizer):
  assert not tag_features.adds_prefix_space(tokenizer)
  pieces = tag_features.encode_words(tokenizer, [c["words"] for c in CASES])
  cls, sep = tokenizer.template.prefix, tokenizer.template.suffix
  for case, words in zip(CASES, pieces, strict=True):
    assert [p.tolist() for p in words] == case["ids"], case["words"]
    # The model's input and its word alignment: [CLS] pieces [SEP], as transformers'.
    flat = [i for p in words for i in p.tolist()]
    assert [*cls, *flat, *sep] == case["input_ids"], case["words"]
    alignment = [None] * len(cls) + [w for w, p in enumerate(words) for _ in p] + [None] * len(
        sep)
    assert alignment == case["word_ids"], case["words"]


def test_the_export_encodes_words_as_training(tokenizer):
  words = [w for case in CASES for w in case["words"]]
  texts = tag_features.word_texts_tf(tf.constant(words), tag_features.adds_prefix_space(
      tokenizer))
  ragged = tokenizer(texts)
  want = [i for case in CASES for p in case["ids"] for i in p]
  np.testing.assert_array_equal(ragged.flat_values.numpy(), want)


def test_transformers_recomputes_the_stored_cases():
  transformers = pytest.importorskip("transformers")
  hf = transformers.AutoTokenizer.from_pretrained(FIXTURE)
  for case in CASES:
    enc = hf(case["words"], is_split_into_words=True)
    assert enc["input_ids"] == case["input_ids"] and enc.word_ids() == case["word_ids"]
