"""GLUE rows are read by header name and must have their file's column count (issue 36):
a row that lost or gained a tab is refused naming file:line, or skipped and counted."""

import os
import shutil
import uuid

import pytest

from roberta_tf.common import files
from roberta_tf.finetuning import glue
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.problem_data import ProblemDataError
from tests.conftest import REPO

GLUE = os.path.join(REPO, "tests", "testdata", "glue")
MNLI = glue.get("mnli")


def _mnli_copy(tmp_path, edit_file, edit):
  """GLUE's MNLI test folder copied to tmp_path, `edit(lines)` applied to one file's lines."""
  folder = tmp_path / "MNLI"
  shutil.copytree(os.path.join(GLUE, "MNLI"), folder)
  path = folder / edit_file
  lines = path.read_text(encoding="utf-8").split("\n")
  edit(lines)
  path.write_text("\n".join(lines), encoding="utf-8")
  return str(folder), str(path)


def _drop_last_column(line_index):
  def edit(lines):
    lines[line_index] = lines[line_index].rsplit("\t", 1)[0]
  return edit


def test_dev_row_without_gold_label_is_refused_naming_the_line(tmp_path):
  # Read by position (-1), this row would have been scored against label5.
  folder, path = _mnli_copy(tmp_path, "dev_matched.tsv", _drop_last_column(2))
  with pytest.raises(ProblemDataError, match=rf"{path}:3: 15 tab-separated columns where the "
                     r"header's 16 are expected .*--skip_bad_examples"):
    glue.read_data(MNLI, folder)


def test_train_and_test_rows_are_checked_against_their_own_header(tmp_path):
  folder, path = _mnli_copy(tmp_path, "train.tsv", lambda lines: lines.__setitem__(
      1, lines[1] + "\textra"))
  with pytest.raises(ProblemDataError, match=rf"{path}:2: 13 tab-separated columns where the "
                     r"header's 12"):
    glue.read_data(MNLI, folder)
  folder, path = _mnli_copy(tmp_path / "t", "test_matched.tsv", _drop_last_column(1))
  with pytest.raises(ProblemDataError, match=rf"{path}:2: 9 tab-separated columns where the "
                     r"header's 10"):
    glue.read_data(MNLI, folder)


def test_skip_bad_examples_skips_and_counts(tmp_path):
  folder, path = _mnli_copy(tmp_path, "dev_matched.tsv", _drop_last_column(2))
  full = glue.read_data(MNLI, os.path.join(GLUE, "MNLI"))
  lines = []
  data = glue.read_data(MNLI, folder, skip_bad=True, log=lines.append)
  assert len(data.dev[0][1]) == len(full.dev[0][1]) - 1
  assert [e.label for e in data.dev[0][1]] == [
      e.label for i, e in enumerate(full.dev[0][1]) if i != 1]
  assert lines == [f"warning: --skip_bad_examples: skipped 1 rows of {path} whose column count "
                   "is not 16 (lines 3)"]


def test_labels_are_read_by_header_name_not_position(tmp_path):
  # Columns reordered (label first): the reader follows the header.
  folder = tmp_path / "RTE"
  shutil.copytree(os.path.join(GLUE, "RTE"), folder)
  rows = [line.split("\t") for line in
          (folder / "train.tsv").read_text(encoding="utf-8").strip("\n").split("\n")]
  (folder / "train.tsv").write_text("\n".join("\t".join([r[3], r[0], r[2], r[1]]) for r in rows)
                                    + "\n", encoding="utf-8")
  moved = glue.read_file(glue.get("rte"), str(folder / "train.tsv"), glue.get("rte").train)[0]
  original = glue.read_file(glue.get("rte"), os.path.join(GLUE, "RTE", "train.tsv"),
                            glue.get("rte").train)[0]
  assert moved == original


def test_headerless_cola_rows_need_four_columns(tmp_path):
  path = tmp_path / "train.tsv"
  path.write_text("gj04\t1\t\tGood sentence.\ngj04\t0\tBad one.\n", encoding="utf-8")
  cola = glue.get("cola")
  with pytest.raises(ProblemDataError, match=r"train.tsv:2: 3 tab-separated columns where GLUE "
                     r"CoLA's layout's 4 are expected"):
    glue.read_file(cola, str(path), cola.train)
  examples, _ = glue.read_file(cola, str(path), cola.train, skip_bad=True, log=lambda _: None)
  assert [(e.text_a, e.label) for e in examples] == [("Good sentence.", "1")]


def _preset_config(name, data_dir):
  return FinetuneConfig.from_dict(dict(
      task="", model_dir="", train_file="", eval_file="", glue_task=name, data_dir=data_dir))


def test_a_glue_folder_on_a_url_reads_as_on_local_disk():
  """--data_dir and --glue_diagnostic on ram:// (TF's in-memory file system, standing for gs://):
  the preset's files are URLs there and read the same rows."""
  root = f"ram://glue_{uuid.uuid4().hex[:8]}"
  files.copy_tree(os.path.join(GLUE, "MNLI"), files.join(root, "MNLI"))
  files.copy(os.path.join(GLUE, "diagnostic", "diagnostic.tsv"), files.join(root, "ax.tsv"))
  cfg = glue.apply_preset(_preset_config("mnli", files.join(root, "MNLI")))
  assert cfg.train_file == f"{root}/MNLI/train.tsv"
  assert cfg.eval_file == f"{root}/MNLI/dev_matched.tsv"
  got = glue.read_data(MNLI, files.join(root, "MNLI"), diagnostic=files.join(root, "ax.tsv"))
  want = glue.read_data(MNLI, os.path.join(GLUE, "MNLI"),
                        diagnostic=os.path.join(GLUE, "diagnostic", "diagnostic.tsv"))
  assert got == want and [name for name, _, _ in got.test] == ["MNLI-m.tsv", "MNLI-mm.tsv",
                                                               "AX.tsv"]
  with pytest.raises(ValueError, match="needs --data_dir"):
    glue.apply_preset(_preset_config("rte", files.join(root, "RTE")))
  assert not os.path.exists("ram:")
  files.rmtree(root)
