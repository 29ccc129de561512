"""GLUE leaderboard prediction files from the kept model.

A submission to gluebenchmark.com is a zip of one TSV per test set, named as the leaderboard
expects (CoLA.tsv, SST-2.tsv, MRPC.tsv, STS-B.tsv, QQP.tsv, MNLI-m.tsv, MNLI-mm.tsv, QNLI.tsv,
RTE.tsv, WNLI.tsv, AX.tsv), each
    index<TAB>prediction
    0<TAB>entailment
    ...
with the test file's own index column and a prediction per test row in file order: the class
name for classification (as GLUE spells it: "0"/"1", "entailment"/"not_entailment",
"contradiction"/"entailment"/"neutral"), a score with 3 decimals for STS-B, clipped to its
[0, 5] range (as GLUE's baselines write it).
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning import problem_types

HEADER = "index\tprediction"


def predict_logits(model, problem, examples, batch_size: int) -> np.ndarray:
  """The model's logits ([N, K], regression [N]) on `examples` (a SequenceProblem's kind), in
  their order."""
  ds = problem.predict_dataset(examples, batch_size)
  predict = tf.function(lambda inputs: model(inputs, training=False)["logits"],
                        input_signature=[ds.element_spec], autograph=False)
  return np.concatenate([predict(batch).numpy() for batch in ds])


def prediction_strings(preset, logits: np.ndarray) -> list[str]:
  """A prediction per row in the leaderboard's spelling (see the module docstring)."""
  if preset.task_type == problem_types.REGRESSION:
    low, high = preset.score_range or (-np.inf, np.inf)
    return [f"{v:.3f}" for v in np.clip(logits.astype(np.float64), low, high)]
  return [preset.labels[i] for i in logits.argmax(-1)]


def write_tsv(path: str, indices, predictions) -> None:
  lines = [HEADER] + [f"{i}\t{p}" for i, p in zip(indices, predictions, strict=True)]
  atomic_write.write_text(path, "\n".join(lines) + "\n")


def write_glue_predictions(directory: str, problem, model, batch_size: int) -> list[str]:
  """Writes a leaderboard file per test set the problem read (problem.test_sets); returns the
  paths."""
  files.makedirs(directory)
  paths = []
  for name, examples, indices in problem.test_sets:
    logits = predict_logits(model, problem, examples, batch_size)
    path = files.join(directory, name)
    write_tsv(path, indices, prediction_strings(problem.glue_preset, logits))
    paths.append(path)
  return paths
