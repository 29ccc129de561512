"""Token classification features: the word encoding, windows over long sentences (every word
predicted exactly once, from the window where it has the most context), which pieces carry
labels, and reading each word's tag back from the window logits."""

import numpy as np
import pytest

from roberta_tf.finetuning.finetuned_dir import load_tokenizer
from roberta_tf.finetuning.tagging import tag_features as tf_lib
from roberta_tf.tokenization.vocabulary import roberta_template

BOS, EOS = 0, 2
TEMPLATE = roberta_template(BOS, EOS)


def _pieces(counts):
  """Words of `counts` pieces each, piece ids 10, 11, ... in order."""
  out, next_id = [], 10
  for n in counts:
    out.append(np.arange(next_id, next_id + n, dtype=np.int32))
    next_id += n
  return out


def test_each_word_is_encoded_after_a_space(hf_tiny_dir):
  tokenizer = load_tokenizer(hf_tiny_dir)
  words = ["New", "York", "naïve", "<mask>", "."]
  pieces = tf_lib.encode_words(tokenizer, [words, ["a"]])
  assert [len(s) for s in pieces] == [5, 1]
  for word, ids in zip(words, pieces[0], strict=True):
    assert ids.tolist() == tokenizer(np.asarray([" " + word])).to_list()[0]
  assert tokenizer.detokenize(np.concatenate(pieces[0])[None]).numpy()[0].decode() == (
      " New York naïve<mask> .")  # <mask> absorbs the space before it, as in HF


def test_a_short_sentence_is_one_window_labelled_on_first_pieces():
  features = tf_lib.featurize_sentences([_pieces([1, 3, 2])], [[4, 5, 6]], max_seq_len=16,
                                        doc_stride=4, template=TEMPLATE)
  assert [x.tolist() for x in features.input_ids] == [[0, 10, 11, 12, 13, 14, 15, 2]]
  assert features.labels[0].tolist() == [-1, 4, 5, -1, -1, 6, -1, -1]
  assert features.word_window[0].tolist() == [0, 0, 0]
  assert features.word_position[0].tolist() == [1, 2, 5]


def test_label_all_pieces_continues_b_tags_as_i_tags():
  labels = ["O", "B-PER", "I-PER", "B-MISC"]
  continuation = tf_lib.continuation_ids(labels)
  assert continuation.tolist() == [0, 2, 2, 3]  # no I-MISC: B-MISC continues as itself
  features = tf_lib.featurize_sentences([_pieces([2, 3, 2])], [[1, 0, 3]], max_seq_len=16,
                                        doc_stride=4, template=TEMPLATE,
                                        continuation=continuation)
  assert features.labels[0].tolist() == [-1, 1, 2, 0, 0, 0, 3, 3, -1]


@pytest.mark.parametrize("counts, max_seq_len, stride", [
    ([1] * 30, 10, 3), ([2, 1, 3, 1, 1, 4, 1, 2, 2, 1, 1, 3], 8, 2), ([9, 1, 1], 6, 4),
    ([1] * 7, 9, 5)])
def test_long_sentences_are_windowed_and_every_word_read_once(counts, max_seq_len, stride):
  pieces = _pieces(counts)
  tags = [list(range(len(counts)))]
  features = tf_lib.featurize_sentences([pieces], tags, max_seq_len=max_seq_len,
                                        doc_stride=stride, template=TEMPLATE)
  width = max_seq_len - 2
  total = sum(counts)
  starts = tf_lib.window_starts(total, width, stride)
  assert len(features.input_ids) == len(starts)
  assert starts[-1] + width >= total and all(len(x) <= max_seq_len for x in features.input_ids)
  first = np.cumsum(counts) - counts
  for word, (window, position) in enumerate(zip(features.word_window[0],
                                                features.word_position[0], strict=True)):
    # The word's first piece is where it is read, and carries its tag in that window.
    assert features.input_ids[window][position] == 10 + first[word]
    assert features.labels[window][position] == word
    # The max-context rule: no other window gives the first piece more context.
    def context(k, piece=first[word]):
      return min(piece - starts[k], starts[k] + min(width, total - starts[k]) - 1 - piece)
    holding = [k for k in range(len(starts))
               if starts[k] <= first[word] < starts[k] + min(width, total - starts[k])]
    assert context(window) == max(context(k) for k in holding)
    assert window == min(k for k in holding if context(k) == context(window))


def test_word_predictions_read_the_first_piece_of_each_word():
  features = tf_lib.featurize_sentences([_pieces([1, 2]), _pieces([1] * 6)], None, max_seq_len=5,
                                        doc_stride=2, template=TEMPLATE)
  assert all((x == -1).all() for x in features.labels)  # unlabeled: nothing trained
  logits = [np.zeros((8, 3)) for _ in features.input_ids]
  for window, positions, tags in zip(features.word_window, features.word_position,
                                     ([2, 1], [0, 1, 2, 0, 1, 2]), strict=True):
    for w, p, t in zip(window, positions, tags, strict=True):
      logits[w][p, t] = 5.0
  tags, probs = tf_lib.word_predictions(logits, features)
  assert [t.tolist() for t in tags] == [[2, 1], [0, 1, 2, 0, 1, 2]]
  assert np.allclose(np.concatenate(probs), np.exp(5) / (np.exp(5) + 2))
