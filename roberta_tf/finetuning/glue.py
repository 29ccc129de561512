"""GLUE's nine tasks as presets: their files, columns, labels and official metrics.

`--glue_task=NAME --data_dir=GLUE/<Folder>` reads the folder as GLUE's download script
(`download_glue_data.py`) lays it out: train.tsv, dev.tsv (MNLI: dev_matched.tsv and
dev_mismatched.tsv) and test.tsv (MNLI: test_matched.tsv and test_mismatched.tsv). Every file is
tab-separated and NOT CSV-quoted: a `"` is an ordinary character (SST-2 and CoLA sentences start
with unbalanced quotes), so a row is one line split at tabs. Only "\n" ends a row (MNLI's text
holds U+0085 and U+2028, which `str.splitlines` would split at). Columns are read by their
header name (CoLA's train and dev files have no header: 4 columns by position), and every row
must have as many columns as its file's header: a row that lost or gained a tab (an MNLI dev row
without `gold_label` would otherwise be scored against `label5`) is refused naming file:line,
or skipped and counted with --skip_bad_examples (HF's QQP processor also skips such rows).

task   folder  train.tsv / dev.tsv: text columns, label         test.tsv: index, texts
cola   CoLA    no header, 4 columns: sentence (3), label (1)     index, sentence
sst2   SST-2   sentence, label                                   index, sentence
mrpc   MRPC    #1 String, #2 String, Quality                     index, #1 String, #2 String
stsb   STS-B   sentence1, sentence2, score                       index, sentence1, sentence2
qqp    QQP     question1, question2, is_duplicate                id, question1, question2
mnli   MNLI    sentence1, sentence2, gold_label                  index, sentence1, sentence2
qnli   QNLI    question, sentence, label                         index, question, sentence
rte    RTE     sentence1, sentence2, label                       index, sentence1, sentence2
wnli   WNLI    sentence1, sentence2, label                       index, sentence1, sentence2

(MNLI's train.tsv has 12 columns and its dev files 16, label1..label5 before gold_label.)
Metrics are GLUE's: CoLA Matthews correlation, STS-B Pearson and
Spearman, MRPC and QQP F1 and accuracy, MNLI matched and mismatched accuracy, the others
accuracy. The GLUE diagnostic (AX: index, sentence1, sentence2) is predicted by an MNLI model.

This module is TF-free (the binary's flag table imports it).
"""

from __future__ import annotations

import dataclasses

from roberta_tf.common import files
from roberta_tf.finetuning import problem_types
from roberta_tf.finetuning.problem_data import ProblemDataError, TextExample


@dataclasses.dataclass(frozen=True)
class Layout:
  """Where a file's fields are: header names, or 0-based positions in a headerless file of
  exactly `columns` columns (CoLA's train and dev files)."""
  text: tuple[str | int, ...]
  label: str | int | None = None    # None: unlabeled (test files)
  index: str | None = None          # test files: the leaderboard's row index
  columns: int | None = None        # headerless files: the column count; None: a header row

  @property
  def header(self) -> bool:
    return self.columns is None


@dataclasses.dataclass(frozen=True)
class GluePreset:
  """One GLUE task's preset: how to read its folder and score it (see the module docstring)."""
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


def _labeled(label: str, *texts: str) -> Layout:
  return Layout(text=texts, label=label)


def _test(*texts: str, index: str = "index") -> Layout:
  return Layout(text=texts, index=index)


_BINARY = ("0", "1")
_ENTAILMENT = ("entailment", "not_entailment")
PRESETS: dict[str, GluePreset] = {t.name: t for t in (
    GluePreset("cola", "CoLA", problem_types.CLASSIFICATION, _BINARY, ("sentence",), "mcc",
               Layout(text=(3,), label=1, columns=4), _test("sentence"),
               test_files=(("CoLA.tsv", "test.tsv"),)),
    GluePreset("sst2", "SST-2", problem_types.CLASSIFICATION, _BINARY, ("sentence",), "accuracy",
               _labeled("label", "sentence"), _test("sentence"),
               test_files=(("SST-2.tsv", "test.tsv"),)),
    GluePreset("mrpc", "MRPC", problem_types.CLASSIFICATION, _BINARY, ("#1 String", "#2 String"),
               "accuracy", _labeled("Quality", "#1 String", "#2 String"),
               _test("#1 String", "#2 String"), test_files=(("MRPC.tsv", "test.tsv"),)),
    GluePreset("stsb", "STS-B", problem_types.REGRESSION, (), ("sentence1", "sentence2"), "pearson",
               _labeled("score", "sentence1", "sentence2"), _test("sentence1", "sentence2"),
               test_files=(("STS-B.tsv", "test.tsv"),), score_range=(0.0, 5.0)),
    GluePreset("qqp", "QQP", problem_types.CLASSIFICATION, _BINARY, ("question1", "question2"),
               "accuracy", _labeled("is_duplicate", "question1", "question2"),
               _test("question1", "question2", index="id"), test_files=(("QQP.tsv", "test.tsv"),)),
    GluePreset("mnli", "MNLI", problem_types.CLASSIFICATION,
               ("contradiction", "entailment", "neutral"), ("sentence1", "sentence2"), "accuracy",
               _labeled("gold_label", "sentence1", "sentence2"), _test("sentence1", "sentence2"),
               dev_files=(("", "dev_matched.tsv"), ("mismatched_", "dev_mismatched.tsv")),
               test_files=(("MNLI-m.tsv", "test_matched.tsv"), ("MNLI-mm.tsv",
                                                                 "test_mismatched.tsv"))),
    GluePreset("qnli", "QNLI", problem_types.CLASSIFICATION, _ENTAILMENT, ("question", "sentence"),
               "accuracy", _labeled("label", "question", "sentence"), _test("question", "sentence"),
               test_files=(("QNLI.tsv", "test.tsv"),)),
    GluePreset("rte", "RTE", problem_types.CLASSIFICATION, _ENTAILMENT, ("sentence1", "sentence2"),
               "accuracy", _labeled("label", "sentence1", "sentence2"),
               _test("sentence1", "sentence2"), test_files=(("RTE.tsv", "test.tsv"),)),
    GluePreset("wnli", "WNLI", problem_types.CLASSIFICATION, _BINARY, ("sentence1", "sentence2"),
               "accuracy", _labeled("label", "sentence1", "sentence2"),
               _test("sentence1", "sentence2"), test_files=(("WNLI.tsv", "test.tsv"),)),
)}
DIAGNOSTIC = _test("sentence1", "sentence2")  # GLUE's diagnostic.tsv: index, sentence1, sentence2
DIAGNOSTIC_FILE = "AX.tsv"     # its leaderboard file (an MNLI model's predictions)
# Flags a preset sets; giving them too is an error (the preset would silently win).
PRESET_FLAGS = ("task", "train_file", "eval_file", "text_fields", "label_field", "labels")


def get(name: str) -> GluePreset:
  if name not in PRESETS:
    raise ValueError(f"--glue_task={name!r}: expected one of {', '.join(PRESETS)}")
  return PRESETS[name]


def apply_preset(cfg):
  """cfg (a FinetuneConfig) with the GLUE task's type, files, fields, labels and metric filled
  in; cfg itself when it names no --glue_task."""
  if not cfg.glue_task:
    return cfg
  preset = get(cfg.glue_task)
  if not cfg.data_dir or not files.isdir(cfg.data_dir):
    raise ValueError(f"--glue_task={preset.name} needs --data_dir, GLUE's {preset.folder} folder "
                     f"(got {cfg.data_dir!r})")
  return dataclasses.replace(
      cfg, task=preset.task_type, train_file=files.join(cfg.data_dir, "train.tsv"),
      eval_file=files.join(cfg.data_dir, preset.dev_files[0][1]), text_fields=preset.text_fields,
      label_field="", labels=preset.labels, metric=cfg.metric or preset.metric)


def read_rows(path: str) -> list[tuple[int, list[str]]]:
  """(line number, fields) of each non-empty line: split at tabs, no quoting, "\\n" ends a line
  (a "\\r" before it is dropped), a UTF-8 byte-order mark is ignored."""
  if not files.isfile(path):
    raise ProblemDataError(f"{path}: no such file")
  raw = files.read_bytes(path)
  try:
    text = raw.decode("utf-8-sig")
  except UnicodeDecodeError as e:
    line = raw[:e.start].count(b"\n") + 1
    raise ProblemDataError(f"{path}:{line}: not UTF-8 ({e.reason})") from e
  return [(n, line.rstrip("\r").split("\t"))
          for n, line in enumerate(text.split("\n"), 1) if line.rstrip("\r")]


def _positions(preset: GluePreset, path: str, layout: Layout, header: list[str] | None) -> dict:
  """{"text": [column...], "label": column or None, "index": column or None} of a file."""
  if header is None:
    return {"text": list(layout.text), "label": layout.label, "index": layout.index}

  def find(name):
    if name is None:
      return None
    if name not in header:
      raise ProblemDataError(f"{path}:1: the header has no column {name!r} (it has {header}); is "
                             f"--glue_task={preset.name} the right task for this folder?")
    return header.index(name)
  return {"text": [find(n) for n in layout.text], "label": find(layout.label),
          "index": find(layout.index)}


def read_file(preset: GluePreset, path: str, layout: Layout, skip_bad: bool = False,
              log=print) -> tuple[list[TextExample], list[str]]:
  """A GLUE file's examples (label None in unlabeled files) and their leaderboard indices
  (test files; else the 0-based row numbers).

  Every row must have the header's column count (a headerless file: layout.columns); a row that
  does not is an error naming file:line, or with `skip_bad` is skipped and counted (`log` gets
  one line per file that had such rows).

  Raises:
    ProblemDataError: naming file:line.
  """
  rows = read_rows(path)
  header = None
  if layout.header:
    if not rows:
      raise ProblemDataError(f"{path}: empty file (GLUE files start with a header row)")
    header = [name.strip() for name in rows[0][1]]
    rows = rows[1:]
  where = _positions(preset, path, layout, header)
  expected = len(header) if header is not None else layout.columns
  examples, indices, skipped = [], [], []
  for lineno, row in rows:
    if len(row) != expected:
      if skip_bad:
        skipped.append(lineno)
        continue
      what = "the header's" if header is not None else f"GLUE {preset.folder}'s layout's"
      raise ProblemDataError(
          f"{path}:{lineno}: {len(row)} tab-separated columns where {what} {expected} are "
          "expected (a lost or extra tab?); fix the row, or pass --skip_bad_examples to skip "
          f"such rows{'' if header is not None else '; is --glue_task the right task?'}")
    texts = [row[c] for c in where["text"]]
    label = None
    if where["label"] is not None:
      value = row[where["label"]].strip()
      if preset.task_type == problem_types.REGRESSION:
        try:
          label = float(value)
        except ValueError as e:
          raise ProblemDataError(f"{path}:{lineno}: score {value!r} is not a number") from e
      elif value not in preset.labels:
        raise ProblemDataError(f"{path}:{lineno}: label {value!r} is not one of GLUE "
                               f"{preset.folder}'s labels {list(preset.labels)}")
      else:
        label = value
    examples.append(TextExample(texts[0], texts[1] if len(texts) == 2 else None, label))
    indices.append(row[where["index"]].strip() if where["index"] is not None
                   else str(len(indices)))
  if skipped:
    log(f"warning: --skip_bad_examples: skipped {len(skipped)} rows of {path} whose column "
        f"count is not {expected} (lines {', '.join(map(str, skipped[:5]))}"
        f"{', ...' if len(skipped) > 5 else ''})")
  if not examples:
    raise ProblemDataError(f"{path}: no examples")
  return examples, indices


@dataclasses.dataclass
class GlueData:
  """A GLUE folder read: training examples, the dev sets (metric prefix, examples; the first is
  the one whose metric picks the epoch and configuration), and the test sets present
  (leaderboard file name, examples, indices)."""
  train: list[TextExample]
  dev: list[tuple[str, list[TextExample]]]
  test: list[tuple[str, list[TextExample], list[str]]]


def read_data(preset: GluePreset, data_dir: str, diagnostic: str = "", skip_bad: bool = False,
              log=print) -> GlueData:
  """Reads train, dev (required) and test (those present) files, and the AX diagnostic file;
  `skip_bad`: rows with the wrong column count are skipped and counted (read_file)."""
  def read(path, layout):
    return read_file(preset, path, layout, skip_bad, log)
  train, _ = read(files.join(data_dir, "train.tsv"), preset.train)
  dev = [(prefix, read(files.join(data_dir, name), preset.train)[0])
         for prefix, name in preset.dev_files]
  test = []
  for out_name, name in preset.test_files:
    path = files.join(data_dir, name)
    if files.isfile(path):
      test.append((out_name, *read(path, preset.test)))
  if diagnostic:
    if preset.name != "mnli":
      raise ProblemDataError(f"--glue_diagnostic is predicted by an MNLI model; --glue_task is "
                             f"{preset.name}")
    test.append((DIAGNOSTIC_FILE, *read(diagnostic, DIAGNOSTIC)))
  return GlueData(train, dev, test)
