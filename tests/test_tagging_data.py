"""Token classification's data and scores: CoNLL and JSON-lines readers (their refusals with
file:line), the label set, the tag scheme, seqeval's metrics, and the prediction files."""

import gzip
import json

import pytest

from roberta_tf.finetuning.problem_data import ProblemDataError
from roberta_tf.finetuning.tagging import tag_read, tag_scores, tag_write


def _write(path, text):
  path.write_text(text, encoding="utf-8")
  return str(path)


def test_conll_2003_and_two_column_files_load(tmp_path):
  conll = _write(tmp_path / "a.conll", "-DOCSTART- -X- -X- O\n\nEU NNP B-NP B-ORG\nrejects VBZ "
                 "B-VP O\n\n\nPeter NNP B-NP B-PER\nBlackburn NNP I-NP I-PER\n")
  sentences = tag_read.read_tagged(conll)
  assert [(s.words, s.tags) for s in sentences] == [
      (("EU", "rejects"), ("B-ORG", "O")), (("Peter", "Blackburn"), ("B-PER", "I-PER"))]
  assert sentences[1].where == f"{conll}:7"
  ud = tmp_path / "ud.txt.gz"
  with gzip.open(ud, "wt", encoding="utf-8") as f:
    f.write("The\tDET\ndog\tNOUN\n\nRuns\tVERB\n")
  assert [s.tags for s in tag_read.read_tagged(str(ud))] == [("DET", "NOUN"), ("VERB",)]


def test_json_lines_with_string_or_integer_tags(tmp_path):
  path = _write(tmp_path / "a.jsonl", json.dumps({"tokens": ["Paris", "!"], "tags": ["B-LOC", "O"]})
                + "\n\n" + json.dumps({"tokens": ["Bob"], "ner_tags": [1]}) + "\n")
  with pytest.raises(ProblemDataError, match=r"a.jsonl:3: integer tags in 'ner_tags' need "
                     "--labels"):
    tag_read.read_tagged(path)
  sentences = tag_read.read_tagged(path, labels=("O", "B-PER", "B-LOC"))
  assert [s.tags for s in sentences] == [("B-LOC", "O"), ("B-PER",)]
  assert tag_read.tag_names(sentences) == ["B-LOC", "O", "B-PER"]  # first appearance
  assert tag_read.tag_names(sentences, ("O", "B-PER", "B-LOC")) == ["O", "B-PER", "B-LOC"]


@pytest.mark.parametrize("text, message", [
    ("EU B-ORG\nrejects\n", r"bad.conll:2: the word 'rejects' has no tag"),
    ("EU B-ORG\n\xff\n", r"bad.conll: not UTF-8"),
])
def test_malformed_conll_is_refused_with_file_and_line(tmp_path, text, message):
  path = tmp_path / "bad.conll"
  path.write_bytes(text.encode("utf-8", "surrogateescape") if "\xff" not in text
                   else text.encode("latin-1"))
  with pytest.raises(ProblemDataError, match=message):
    tag_read.read_tagged(str(path))


@pytest.mark.parametrize("row, message", [
    ({"tokens": ["a", "b"], "tags": ["O"]}, "b.jsonl:1: 2 tokens but 1 tags"),
    ({"tokens": ["a b"], "tags": ["O"]}, "b.jsonl:1: expected an object whose 'tokens'"),
    ({"words": ["a"], "tags": ["O"]}, "b.jsonl:1: expected an object whose 'tokens'"),
    ({"tokens": ["a"], "labels": ["O"]}, r"b.jsonl:1: no tags field \('tags' or 'ner_tags'\)"),
    ({"tokens": ["a"], "tags": ["B PER"]}, "b.jsonl:1: tag 'B PER' is neither"),
])
def test_malformed_json_lines_are_refused_with_file_and_line(tmp_path, row, message):
  path = _write(tmp_path / "b.jsonl", json.dumps(row) + "\n")
  with pytest.raises(ProblemDataError, match=message):
    tag_read.read_tagged(path)


def test_an_unknown_dev_tag_names_its_line(tmp_path):
  train = tag_read.read_tagged(_write(tmp_path / "t.conll", "a O\nb B-PER\n"))
  dev = tag_read.read_tagged(_write(tmp_path / "d.conll", "x O\n\ny O\nz B-LOC\n"))
  with pytest.raises(ProblemDataError, match=r"d.conll:4: tag 'B-LOC' is not one of the 2 tags"):
    tag_read.tag_ids(dev, tag_read.tag_names(train))


@pytest.mark.parametrize("sentences, scheme", [
    ([["B-PER", "I-PER", "O", "B-LOC"]], "IOB2"),
    ([["I-PER", "I-PER", "B-PER", "O"]], "IOB1"),
    ([["S-PER", "O", "B-LOC", "E-LOC"]], "IOBES"),
    ([["U-PER", "O", "B-LOC", "L-LOC"]], "BILOU"),
    ([["NOUN", "VERB", "DET"]], "plain"),
    ([["O", "O"]], "plain"),
])
def test_the_scheme_is_read_from_the_training_tags(sentences, scheme):
  assert tag_scores.detect_scheme(sentences) == scheme


def test_scores_are_seqeval_default_and_strict():
  seqeval = pytest.importorskip("seqeval.metrics")
  from seqeval.scheme import IOB2
  gold = [["B-PER", "I-PER", "O", "B-LOC"], ["O", "B-ORG", "I-ORG"]]
  pred = [["B-PER", "I-PER", "O", "I-LOC"], ["O", "B-ORG", "O"]]
  labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]
  scores = tag_scores.score(gold, pred, labels, "IOB2")
  assert scores["f1"] == seqeval.f1_score(gold, pred)
  assert scores["strict_f1"] == seqeval.f1_score(gold, pred, mode="strict", scheme=IOB2)
  # Default mode: I-LOC after O opens an entity (conlleval); strict mode: it does not.
  assert (scores["precision"], scores["recall"]) == (2 / 3, 2 / 3)
  assert (scores["strict_precision"], scores["strict_recall"]) == (1 / 2, 1 / 3)
  assert (scores["PER_f1"], scores["LOC_f1"], scores["ORG_f1"]) == (1.0, 1.0, 0.0)
  assert scores["accuracy"] == 5 / 7
  assert set(scores) == set(tag_scores.metric_names(labels, "IOB2"))


def test_plain_tags_score_each_word_as_an_entity():
  scores = tag_scores.score([["NOUN", "VERB", "NOUN"]], [["NOUN", "NOUN", "NOUN"]],
                            ["NOUN", "VERB"], "plain")
  assert scores["accuracy"] == pytest.approx(2 / 3)
  assert scores["precision"] == scores["recall"] == scores["f1"] == pytest.approx(2 / 3)
  assert (scores["NOUN_f1"], scores["VERB_f1"]) == (pytest.approx(0.8), 0.0)


def test_prediction_files_read_back_to_the_same_tags(tmp_path):
  sentences = tag_read.read_tagged(_write(tmp_path / "g.conll", "a O\nb B-PER\n\nc O\n"))
  path = str(tmp_path / "p.conll")
  tag_write.write_predictions(path, sentences, [["O", "O"], ["B-PER"]])
  assert tag_write.read_predictions(path) == ([["O", "B-PER"], ["O"]], [["O", "O"], ["B-PER"]])
  assert [s.tags for s in tag_read.read_tagged(path)] == [("O", "O"), ("B-PER",)]
