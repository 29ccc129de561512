"""Token classification's prediction files: CoNLL with the gold and the predicted tag.

    word gold predicted      (one word a line, single spaces; a blank line ends a sentence)

conlleval's layout (its last two columns), so seqeval, conlleval or a reader of
`tag_read` (which takes the LAST column as the tag: the predictions) score them again.
"""

from __future__ import annotations

from collections.abc import Sequence

from roberta_tf.common import atomic_write, files

DEV_FILE = "predictions.conll"
TEST_FILE = "test_predictions.conll"


def write_predictions(path: str, sentences: Sequence, predicted: Sequence[Sequence[str]]) -> None:
  """Writes `path` (atomically): every sentence's words with their gold and predicted tags."""
  lines = []
  for sentence, tags in zip(sentences, predicted, strict=True):
    lines += [f"{w} {g} {p}" for w, g, p in zip(sentence.words, sentence.tags, tags, strict=True)]
    lines.append("")
  atomic_write.write_text(path, "\n".join(lines))


def read_predictions(path: str) -> tuple[list[list[str]], list[list[str]]]:
  """(gold, predicted) tag sequences of a predictions file."""
  gold, predicted, sentence_gold, sentence_predicted = [], [], [], []
  for line in files.read_text(path).split("\n") + [""]:
    columns = line.split()
    if columns:
      sentence_gold.append(columns[-2])
      sentence_predicted.append(columns[-1])
    elif sentence_gold:
      gold.append(sentence_gold)
      predicted.append(sentence_predicted)
      sentence_gold, sentence_predicted = [], []
  return gold, predicted
