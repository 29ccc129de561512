"""GLUE's nine tasks as presets: their files, columns, labels and official metrics.

`--glue_task=NAME --data_dir=GLUE/<Folder>` reads the folder as GLUE's download script
(`download_glue_data.py`) lays it out: train.tsv, dev.tsv (MNLI: dev_matched.tsv and
dev_mismatched.tsv) and test.tsv (MNLI: test_matched.tsv and test_mismatched.tsv). Every file is
tab-separated and NOT CSV-quoted: a `"` is an ordinary character (SST-2 and CoLA sentences start
with unbalanced quotes), so a row is one line split at tabs. Only "\\n" ends a row (MNLI's text
holds U+0085 and U+2028, which `str.splitlines` would split at). Columns are read by position,
as GLUE's baselines and HF's processors read them:

task   folder  train.tsv / dev.tsv (header unless said)             test.tsv (index at 0)
cola   CoLA    no header, 4 columns: source, label, mark, sentence   sentence at 1
sst2   SST-2   sentence, label                                       sentence at 1
mrpc   MRPC    Quality, #1 ID, #2 ID, #1 String, #2 String           strings at 3, 4
stsb   STS-B   ... sentence1 (7), sentence2 (8), ..., score (last)   sentences at 7, 8
qqp    QQP     id, qid1, qid2, question1, question2, is_duplicate    questions at 1, 2
mnli   MNLI    ... sentence1 (8), sentence2 (9), ..., gold_label     sentences at 8, 9
qnli   QNLI    index, question, sentence, label                      question, sentence
rte    RTE     index, sentence1, sentence2, label                    sentences at 1, 2
wnli   WNLI    index, sentence1, sentence2, label                    sentences at 1, 2

(MNLI's train.tsv has 12 columns and its dev files 16: label1..label5 then gold_label, so the
label is the LAST column.) Metrics are GLUE's: CoLA Matthews correlation, STS-B Pearson and
Spearman, MRPC and QQP F1 and accuracy, MNLI matched and mismatched accuracy, the others
accuracy. The GLUE diagnostic (AX: index, sentence1, sentence2) is predicted by an MNLI model.

This module is TF-free (the binary's flag table imports it).
"""

from __future__ import annotations

import dataclasses
import os

from roberta_tf.finetuning import task_types
from roberta_tf.finetuning.task_data import TaskDataError, TextExample


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where a file's fields are. Columns are 0-based; -1 is the last column."""
  header: bool
  text_columns: tuple[int, ...]
  label_column: int | None = None   # None: unlabeled (test files)
  index_column: int | None = None   # test files: the leaderboard's row index


@dataclasses.dataclass(frozen=True)
class GlueTask:
  """One GLUE task (see the module docstring)."""
  name: str                       # the --glue_task value
  folder: str                     # GLUE's folder name
  task_type: str                  # classification or regression
  labels: tuple[str, ...]         # class names in id order (HF's order); () for regression
  text_fields: tuple[str, ...]    # the text columns' names (the SavedModel's text_a / text_b)
  metric: str                     # the dev metric that picks the epoch and the configuration
  train: Layout
  test: Layout
  dev_files: tuple[tuple[str, str], ...] = (("", "dev.tsv"),)     # (metric prefix, file)
  test_files: tuple[tuple[str, str], ...] = ()                    # (leaderboard file, file)
  score_range: tuple[float, float] | None = None                  # regression: clip test scores


def _pair(a: int, b: int, label: int | None = -1) -> Layout:
  return Layout(header=True, text_columns=(a, b), label_column=label)


def _test(*columns: int) -> Layout:
  return Layout(header=True, text_columns=columns, index_column=0)


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
TASKS: dict[str, GlueTask] = {t.name: t for t in (
    GlueTask("cola", "CoLA", task_types.CLASSIFICATION, _BINARY, ("sentence",), "mcc",
             Layout(header=False, text_columns=(3,), label_column=1), _test(1),
             test_files=(("CoLA.tsv", "test.tsv"),)),
    GlueTask("sst2", "SST-2", task_types.CLASSIFICATION, _BINARY, ("sentence",), "accuracy",
             Layout(header=True, text_columns=(0,), label_column=1), _test(1),
             test_files=(("SST-2.tsv", "test.tsv"),)),
    GlueTask("mrpc", "MRPC", task_types.CLASSIFICATION, _BINARY, ("#1 String", "#2 String"),
             "accuracy", _pair(3, 4, 0), _test(3, 4), test_files=(("MRPC.tsv", "test.tsv"),)),
    GlueTask("stsb", "STS-B", task_types.REGRESSION, (), ("sentence1", "sentence2"), "pearson",
             _pair(7, 8), _test(7, 8), test_files=(("STS-B.tsv", "test.tsv"),),
             score_range=(0.0, 5.0)),
    GlueTask("qqp", "QQP", task_types.CLASSIFICATION, _BINARY, ("question1", "question2"),
             "accuracy", _pair(3, 4, 5), _test(1, 2), test_files=(("QQP.tsv", "test.tsv"),)),
    GlueTask("mnli", "MNLI", task_types.CLASSIFICATION, ("contradiction", "entailment", "neutral"),
             ("sentence1", "sentence2"), "accuracy", _pair(8, 9), _test(8, 9),
             dev_files=(("", "dev_matched.tsv"), ("mismatched_", "dev_mismatched.tsv")),
             test_files=(("MNLI-m.tsv", "test_matched.tsv"), ("MNLI-mm.tsv",
                                                               "test_mismatched.tsv"))),
    GlueTask("qnli", "QNLI", task_types.CLASSIFICATION, _ENTAILMENT, ("question", "sentence"),
             "accuracy", _pair(1, 2), _test(1, 2), test_files=(("QNLI.tsv", "test.tsv"),)),
    GlueTask("rte", "RTE", task_types.CLASSIFICATION, _ENTAILMENT, ("sentence1", "sentence2"),
             "accuracy", _pair(1, 2), _test(1, 2), test_files=(("RTE.tsv", "test.tsv"),)),
    GlueTask("wnli", "WNLI", task_types.CLASSIFICATION, _BINARY, ("sentence1", "sentence2"),
             "accuracy", _pair(1, 2), _test(1, 2), test_files=(("WNLI.tsv", "test.tsv"),)),
)}
DIAGNOSTIC = _test(1, 2)       # GLUE's diagnostic/diagnostic.tsv: index, sentence1, sentence2
DIAGNOSTIC_FILE = "AX.tsv"     # its leaderboard file (an MNLI model's predictions)
# Flags a preset sets; giving them too is an error (the preset would silently win).
PRESET_FLAGS = ("task", "train_file", "eval_file", "text_fields", "label_field", "labels")


def get(name: str) -> GlueTask:
  if name not in TASKS:
    raise ValueError(f"--glue_task={name!r}: expected one of {', '.join(TASKS)}")
  return TASKS[name]


def apply_preset(cfg):
  """cfg (a FinetuneConfig) with the GLUE task's type, files, fields, labels and metric filled
  in; cfg itself when it names no --glue_task."""
  if not cfg.glue_task:
    return cfg
  task = get(cfg.glue_task)
  if not cfg.data_dir or not os.path.isdir(cfg.data_dir):
    raise ValueError(f"--glue_task={task.name} needs --data_dir, GLUE's {task.folder} folder "
                     f"(got {cfg.data_dir!r})")
  return dataclasses.replace(
      cfg, task=task.task_type, train_file=os.path.join(cfg.data_dir, "train.tsv"),
      eval_file=os.path.join(cfg.data_dir, task.dev_files[0][1]), text_fields=task.text_fields,
      label_field="", labels=task.labels, metric=cfg.metric or task.metric)


def read_rows(path: str) -> list[tuple[int, list[str]]]:
  """(line number, fields) of each non-empty line: split at tabs, no quoting, "\\n" ends a line
  (a "\\r" before it is dropped), a UTF-8 byte-order mark is ignored."""
  if not os.path.isfile(path):
    raise TaskDataError(f"{path}: no such file")
  with open(path, "rb") as f:
    raw = f.read()
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    raise TaskDataError(f"{path}:{line}: not UTF-8 ({e.reason})") from e
  return [(n, line.rstrip("\r").split("\t"))
          for n, line in enumerate(text.split("\n"), 1) if line.rstrip("\r")]


def _column(row: list[str], column: int, path: str, lineno: int, what: str) -> str:
  need = column + 1 if column >= 0 else -column
  if len(row) < need:
    raise TaskDataError(f"{path}:{lineno}: {len(row)} tab-separated columns, but the {what} is "
                        f"in column {column if column >= 0 else len(row) + column} (0-based) of "
                        "GLUE's layout; is --glue_task the right task for this folder?")
  return row[column]


def read_file(task: GlueTask, path: str, layout: Layout) -> tuple[list[TextExample], list[str]]:
  """A GLUE file's examples (label None in unlabeled files) and their leaderboard indices
  (test files; else the 0-based row numbers)."""
  rows = read_rows(path)
  if layout.header:
    rows = rows[1:]
  examples, indices = [], []
  for lineno, row in rows:
    texts = [_column(row, c, path, lineno, f"text {k + 1}")
             for k, c in enumerate(layout.text_columns)]
    label = None
    if layout.label_column is not None:
      value = _column(row, layout.label_column, path, lineno, "label").strip()
      if task.task_type == task_types.REGRESSION:
        try:
          label = float(value)
        except ValueError as e:
          raise TaskDataError(f"{path}:{lineno}: score {value!r} is not a number") from e
      elif value not in task.labels:
        raise TaskDataError(f"{path}:{lineno}: label {value!r} is not one of GLUE {task.folder}'s "
                            f"labels {list(task.labels)}")
      else:
        label = value
    examples.append(TextExample(texts[0], texts[1] if len(texts) == 2 else None, label))
    indices.append(row[layout.index_column].strip() if layout.index_column is not None
                   else str(len(indices)))
  if not examples:
    raise TaskDataError(f"{path}: no examples")
  return examples, indices


@dataclasses.dataclass
class GlueData:
  """A GLUE folder read: training examples, the dev sets (metric prefix, examples; the first is
  the one whose metric picks the epoch and configuration), and the test sets present
  (leaderboard file name, examples, indices)."""
  train: list[TextExample]
  dev: list[tuple[str, list[TextExample]]]
  test: list[tuple[str, list[TextExample], list[str]]]


def read_data(task: GlueTask, data_dir: str, diagnostic: str = "") -> GlueData:
  """Reads train, dev (required) and test (those present) files, and the AX diagnostic file."""
  train, _ = read_file(task, os.path.join(data_dir, "train.tsv"), task.train)
  dev = [(prefix, read_file(task, os.path.join(data_dir, name), task.train)[0])
         for prefix, name in task.dev_files]
  test = []
  for out_name, name in task.test_files:
    path = os.path.join(data_dir, name)
    if os.path.isfile(path):
      test.append((out_name, *read_file(task, path, task.test)))
  if diagnostic:
    if task.name != "mnli":
      raise TaskDataError(f"--glue_diagnostic is predicted by an MNLI model; --glue_task is "
                          f"{task.name}")
    test.append((DIAGNOSTIC_FILE, *read_file(task, diagnostic, DIAGNOSTIC)))
  return GlueData(train, dev, test)
