"""serving/held_out_ranks.py: the fixed rule that picks held-out masked words, and the ranks."""

import numpy as np

from roberta_tf.serving import held_out_ranks as hr

# ids: 0 <s>, 1 <pad>, 2 </s>, 3 <unk>, 4 <mask>; 5.. ordinary tokens.
TABLE = [b"<s>", b"<pad>", b"</s>", b"<unk>", b"<mask>", b" the", b" cat", b"s", b" (", b" sat",
         b" on", b" mat", b".", b" caf\xc3\xa9", b" x2"]
SPECIAL = {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 4}
IS_SPECIAL = np.array([i < 5 for i in range(len(TABLE))])


def test_whole_words_are_a_space_then_letters_only():
  is_word = hr.whole_word_ids(TABLE)
  assert [TABLE[i] for i in np.flatnonzero(is_word)] == [
      b" the", b" cat", b" sat", b" on", b" mat", b" caf\xc3\xa9"]


def test_the_word_nearest_the_middle_of_the_middle_half_is_masked():
  is_word = hr.whole_word_ids(TABLE)
  #      0  1  2   3  4  5  6  7   8  9
  ids = [0, 5, 6, 12, 8, 9, 10, 11, 12, 2]  # middle half: positions 2..7; middle: 5
  assert hr.pick_example(ids, is_word, IS_SPECIAL) == hr.Example((5, 6, 12, 8), 9, (10, 11, 12))
  assert hr.pick_example(ids, is_word, IS_SPECIAL, context=2) == hr.Example((12, 8), 9, (10, 11))
  # No whole word in the middle half: no example.
  assert hr.pick_example([0, 5, 12, 12, 12, 12, 12, 12, 5, 2], is_word, IS_SPECIAL) is None


def test_a_word_that_goes_on_in_the_next_token_is_not_whole():
  is_word = hr.whole_word_ids(TABLE)
  continues = hr.continuing_ids(TABLE)
  assert [TABLE[i] for i in np.flatnonzero(continues)] == [b"s"]
  #      0  1  2   3  4  5  6  7   8  9
  ids = [0, 5, 6, 12, 8, 6, 7, 11, 12, 2]  # " cat" + "s" at 5-6: not a whole word
  assert hr.pick_example(ids, is_word, IS_SPECIAL, continues_word=continues) == hr.Example(
      (5, 6, 12, 8, 6, 7), 11, (12,))


def test_context_stops_at_a_document_boundary():
  is_word = hr.whole_word_ids(TABLE)
  ids = [0, 5, 6, 2, 0, 9, 10, 2, 11, 12, 2]  # two documents packed in one sequence
  assert hr.pick_example(ids, is_word, IS_SPECIAL) == hr.Example((), 9, (10,))


def test_ranks_count_ordinary_ids_scored_higher():
  ordinary = ~IS_SPECIAL
  scores = np.arange(len(TABLE), dtype=float)[::-1]  # id 0 highest ... id 14 lowest
  assert hr.rank_of(scores, 5, ordinary) == 1  # the specials above it do not count
  assert hr.rank_of(scores, 14, ordinary) == 10
  tied = np.zeros(len(TABLE))
  assert hr.rank_of(tied, 9, ordinary) == 1


def test_model_inputs_put_the_mask_between_its_context():
  examples = [hr.Example((5, 6), 9, (10,)), hr.Example((), 11, ())]
  ids, mask, positions = hr.model_inputs(examples, bos=0, eos=2, mask=4, pad=1)
  np.testing.assert_array_equal(ids, [[0, 5, 6, 4, 10, 2], [0, 4, 2, 1, 1, 1]])
  np.testing.assert_array_equal(mask, [[1, 1, 1, 1, 1, 1], [1, 1, 1, 0, 0, 0]])
  np.testing.assert_array_equal(positions, [3, 1])


def test_rank_examples_against_the_scores_it_was_given():
  vocab = len(TABLE)
  preferred = {0: 9, 1: 11}  # the model puts these ids first, at each example's mask

  def mlm_logits(input_ids, padding_mask):
    logits = np.tile(-np.arange(vocab, dtype=np.float32), (*input_ids.shape, 1))
    for row, position in enumerate(np.argmax(input_ids == 4, axis=1)):
      logits[row, position, preferred[row]] = 100.0
    return logits
  counts = np.array([0, 0, 0, 0, 0, 50, 40, 30, 20, 10, 9, 8, 7, 6, 5])
  examples = [hr.Example((5, 6), 9, (10,)), hr.Example((), 5, ())]
  ranked = hr.rank_examples(examples, mlm_logits, counts, SPECIAL, top_k=2)
  assert [(r.model_rank, r.unigram_rank) for r in ranked] == [(1, 5), (2, 1)]
  assert [t for t, _ in ranked[0].top] == [9, 5] and ranked[0].top[0][1] > 0.99
  assert hr.median_ranks(ranked) == (1.5, 3.0)
  text = hr.format_ranked(ranked, lambda ids: b"".join(TABLE[i] for i in ids).decode(), 1)
  assert text.splitlines()[0] == " 1. ...the cat <mask> on..."
  assert "answer ' sat': rank 1 under the model" in text
  assert text.splitlines()[-1].startswith(
      "median rank of the masked word over 2 held-out examples: model 1.5, unigram baseline 3")
