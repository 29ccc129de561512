"""Fine-tuning data: table and RACE readers, label sets, and the TF featurization."""

import gzip
import json
import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import files
from roberta_tf.finetuning import featurize, problem_data
from roberta_tf.tokenization.tokenizer_json import Template
from roberta_tf.tokenization.vocabulary import roberta_template
from tests import finetune_fixtures as fx


@pytest.mark.parametrize("ext", [".tsv", ".csv", ".jsonl"])
def test_tables_read_the_same_examples(tmp_path, ext):
  rows = fx.sentiment_rows(5, seed=0)
  path = fx.write_table(str(tmp_path / f"t{ext}"), rows)
  got = problem_data.read_text_examples(path, ["sentence", "sentence2"], "label")
  assert [(e.text_a, e.text_b, e.label) for e in got] == [
      (r["sentence"], r["sentence2"], r["label"]) for r in rows]
  assert '"quoted"' in got[0].text_b  # TSV quotes are plain characters, CSV unescapes them
  scores = problem_data.read_text_examples(path, ["sentence"], "score", regression=True)
  assert [e.label for e in scores] == pytest.approx([r["score"] for r in rows], abs=1e-9)
  assert scores[0].text_b is None


def test_gzipped_json_list_and_numeric_labels(tmp_path):
  path = str(tmp_path / "t.json.gz")
  with gzip.open(path, "wt", encoding="utf-8") as f:
    json.dump([{"text": "a", "label": 1}, {"text": "b", "label": 0.0}, {"text": "c",
                                                                         "label": True}], f)
  got = problem_data.read_text_examples(path, ["text"], "label")
  assert [e.label for e in got] == ["1", "0", "true"]
  assert problem_data.label_names(got) == ["0", "1", "true"]
  assert problem_data.label_names(got, given=[1, 0, "true"]) == ["1", "0", "true"]
  assert problem_data.label_ids(got, ["1", "0", "true"], path) == [0, 1, 2]


def test_table_errors_name_file_line_and_field(tmp_path):
  path = fx.write_table(str(tmp_path / "t.jsonl"), fx.sentiment_rows(3, seed=0))
  with pytest.raises(problem_data.ProblemDataError, match=r"t.jsonl:1: no field 'sentence1'"):
    problem_data.read_text_examples(path, ["sentence1"], "label")
  with pytest.raises(problem_data.ProblemDataError,
                     match=r"t.jsonl:1: regression label '(pos|neg)' is not a number"):
    problem_data.read_text_examples(path, ["sentence"], "label", regression=True)
  examples = problem_data.read_text_examples(path, ["sentence"], "label")
  with pytest.raises(problem_data.ProblemDataError, match="label 'pos' is not one of the classes"):
    problem_data.label_ids(examples, ["neg", "neutral"], path)
  tsv = tmp_path / "bad.tsv"
  tsv.write_text("text\tlabel\nx\t1\textra\n")
  with pytest.raises(problem_data.ProblemDataError, match=r"bad.tsv:2: 2 fields in the header"):
    problem_data.read_text_examples(str(tsv), ["text"], "label")
  with pytest.raises(problem_data.ProblemDataError, match="unknown table format '.txt'"):
    problem_data.read_records(str(tmp_path / "x.txt"))
  with pytest.raises(problem_data.ProblemDataError, match="at least two classes"):
    problem_data.label_names([problem_data.TextExample("a", None, "x")])


def test_race_layouts(tmp_path):
  path = fx.write_race(str(tmp_path / "race.jsonl"), passages=2, seed=0)
  got = problem_data.read_choice_examples(path)
  assert len(got) == 8 and all(len(e.options) == 4 for e in got)
  first = json.loads(open(path).readline())
  assert got[1].id == "r0-1" and got[1].question == first["questions"][1]
  assert got[1].options[got[1].label] in first["article"]
  # RACE's own release: a directory of .txt files, one passage object each.
  os.makedirs(tmp_path / "race_dir" / "high")
  (tmp_path / "race_dir" / "high" / "1.txt").write_text(open(path).readline())
  assert [e.id for e in problem_data.read_choice_examples(str(tmp_path / "race_dir"))] == [
      f"r0-{k}" for k in range(4)]
  # One object per question, with a 0-based index.
  flat = tmp_path / "flat.json"
  flat.write_text(json.dumps([{"context": "c", "question": "q", "options": ["x", "y"],
                               "answer": 1}]))
  assert problem_data.read_choice_examples(str(flat))[0].label == 1
  flat.write_text(json.dumps([{"context": "c", "question": "q", "options": ["x", "y"],
                               "answer": "C"}]))
  with pytest.raises(problem_data.ProblemDataError, match="outside the 2 options"):
    problem_data.read_choice_examples(str(flat))
  flat.write_text(json.dumps([{"context": "c", "question": "q", "options": ["x", "y"],
                               "answer": 0},
                              {"context": "c", "question": "q", "options": ["x", "y", "z"],
                               "answer": 0}]))
  with pytest.raises(problem_data.ProblemDataError, match="different numbers of options"):
    problem_data.read_choice_examples(str(flat))


def test_tables_and_race_files_on_a_url_read_as_on_local_disk(tmp_path):
  """ram:// (TF's in-memory file system, standing for gs:// and the like): every table format,
  gzipped too, and a RACE directory; errors name the URL as given."""
  root = f"ram://problem_data_{uuid.uuid4().hex[:8]}"
  files.makedirs(files.join(root, "race", "high"))
  rows = fx.sentiment_rows(4, seed=0)
  locals_ = [fx.write_table(str(tmp_path / f"t{ext}"), rows) for ext in (".tsv", ".csv", ".jsonl")]
  with gzip.open(tmp_path / "t.jsonl.gz", "wt", encoding="utf-8") as f, open(locals_[2]) as src:
    f.write(src.read())
  for local in [*locals_, str(tmp_path / "t.jsonl.gz")]:
    url = files.join(root, os.path.basename(local))
    files.copy(local, url)
    assert (problem_data.read_text_examples(url, ["sentence", "sentence2"], "label") ==
            problem_data.read_text_examples(local, ["sentence", "sentence2"], "label")), url
  race = fx.write_race(str(tmp_path / "race.jsonl"), passages=2, seed=0)
  files.copy(race, files.join(root, "race", "high", "1.jsonl"))
  assert (problem_data.read_choice_examples(files.join(root, "race")) ==
          problem_data.read_choice_examples(race))
  with pytest.raises(problem_data.ProblemDataError, match=f"^{root}/none.tsv: no such file"):
    problem_data.read_records(files.join(root, "none.tsv"))
  assert not os.path.exists("ram:")
  files.rmtree(root)


def test_option_text():
  assert problem_data.option_text("Tom owns a _ .", "cat") == "Tom owns a cat ."
  assert problem_data.option_text("What does Tom own?", "a cat") == "What does Tom own? a cat"


def _longest_first(la, lb, budget):
  """HF's truncation="longest_first": one token at a time from the longer (B on a tie)."""
  while la + lb > budget:
    if la > lb:
      la -= 1
    else:
      lb -= 1
  return la, lb


def test_pair_truncation_matches_longest_first():
  cases = [(la, lb, budget) for la in range(9) for lb in range(9) for budget in range(9)]
  a, b, budgets = (np.array(x) for x in zip(*cases, strict=True))
  keep_a, keep_b = featurize.truncate_pair(a, b, budgets)
  got = list(zip(keep_a.numpy(), keep_b.numpy(), strict=True))
  assert got == [_longest_first(*c) for c in cases]


ROBERTA = roberta_template(0, 2)


def test_build_inputs_layout_and_truncation():
  ids_a = tf.ragged.constant([[10, 11, 12], [], [20, 21, 22, 23, 24, 25, 26]], tf.int32)
  ids_b = tf.ragged.constant([[30], [31, 32], [40, 41, 42, 43, 44, 45]], tf.int32)
  pair = featurize.build_inputs(ids_a, ids_b, max_seq_len=10, template=ROBERTA).to_list()
  assert pair[0] == [0, 10, 11, 12, 2, 2, 30, 2]
  assert pair[1] == [0, 2, 2, 31, 32, 2]
  assert pair[2] == [0, 20, 21, 22, 2, 2, 40, 41, 42, 2]  # budget 6: 3 + 3
  single = featurize.build_inputs(ids_a, None, max_seq_len=5, template=ROBERTA).to_list()
  assert single == [[0, 10, 11, 12, 2], [0, 2], [0, 20, 21, 22, 2]]
  # BERT-style ([CLS]=5 A [SEP]=6 B [SEP]): one separator between the texts, so 7 ids of text
  bert = Template((5,), (6,), (6,))
  pair = featurize.build_inputs(ids_a, ids_b, max_seq_len=10, template=bert).to_list()
  assert pair[0] == [5, 10, 11, 12, 6, 30, 6]
  assert pair[2] == [5, 20, 21, 22, 23, 6, 40, 41, 42, 6]  # budget 7: 4 + 3
  single = featurize.build_inputs(ids_a, None, max_seq_len=5, template=bert).to_list()
  assert single == [[5, 10, 11, 12, 6], [5, 6], [5, 20, 21, 22, 6]]
  with pytest.raises(ValueError, match="no pair template"):
    featurize.build_inputs(ids_a, ids_b, max_seq_len=10, template=Template((5,), (6,), None))
  dense = featurize.to_dense(tf.ragged.constant([[0, 5, 2], [0, 2]]), pad_id=1)
  assert dense["input_ids"].numpy().tolist() == [[0, 5, 2], [0, 2, 1]]
  assert dense["padding_mask"].numpy().tolist() == [[1, 1, 1], [1, 1, 0]]
