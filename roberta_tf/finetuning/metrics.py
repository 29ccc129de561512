"""Dev-set metrics of the sequence tasks: accuracy, F1, MCC (classification); Pearson and
Spearman correlation (regression). Plain numpy; the definitions are GLUE's (sklearn/scipy's).

Every function takes 1-D arrays of equal length N >= 1 and returns a Python float.
"""

from __future__ import annotations

import numpy as np


def _check(labels, predictions) -> tuple[np.ndarray, np.ndarray]:
  labels, predictions = np.asarray(labels), np.asarray(predictions)
  if labels.ndim != 1 or labels.shape != predictions.shape or labels.size == 0:
    raise ValueError(f"metrics need two non-empty 1-D arrays of the same length, got shapes "
                     f"{labels.shape} and {predictions.shape}")
  return labels, predictions


def accuracy(labels, predictions) -> float:
  """The fraction of predictions equal to their label."""
  labels, predictions = _check(labels, predictions)
  return float(np.mean(labels == predictions))


def confusion_matrix(labels, predictions, num_classes: int) -> np.ndarray:
  """int64 [K, K]: entry [t, p] counts examples with label t predicted as p."""
  labels, predictions = _check(labels, predictions)
  matrix = np.zeros((num_classes, num_classes), np.int64)
  np.add.at(matrix, (labels.astype(np.int64), predictions.astype(np.int64)), 1)
  return matrix


def f1(labels, predictions, positive: int = 1) -> float:
  """Binary F1 of class `positive` (GLUE's MRPC/QQP F1); 0 if never labelled nor predicted."""
  labels, predictions = _check(labels, predictions)
  tp = np.sum((predictions == positive) & (labels == positive))
  fp = np.sum((predictions == positive) & (labels != positive))
  fn = np.sum((predictions != positive) & (labels == positive))
  return float(2 * tp / (2 * tp + fp + fn)) if tp + fp + fn else 0.0


def macro_f1(labels, predictions, num_classes: int) -> float:
  """The unweighted mean over classes of each class's one-vs-rest F1."""
  return float(np.mean([f1(labels, predictions, positive=k) for k in range(num_classes)]))


def matthews_corrcoef(labels, predictions, num_classes: int) -> float:
  """Matthews correlation (GLUE's CoLA metric); the multi-class R_K of Gorodkin (2004).

  With confusion matrix C (s examples, c correct, t_k labelled k, p_k predicted k):
  (c*s - sum_k p_k t_k) / sqrt((s^2 - sum_k p_k^2) (s^2 - sum_k t_k^2)), which for two classes
  is (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)). 0 when a factor is 0 (all labels or
  all predictions one class), as sklearn returns.
  """
  matrix = confusion_matrix(labels, predictions, num_classes).astype(np.float64)
  t, p = matrix.sum(axis=1), matrix.sum(axis=0)
  s, c = matrix.sum(), np.trace(matrix)
  denominator = np.sqrt((s * s - p @ p) * (s * s - t @ t))
  return float((c * s - p @ t) / denominator) if denominator > 0 else 0.0


def pearson(x, y) -> float:
  """Pearson's r; 0 when either side is constant (undefined correlation)."""
  x, y = _check(x, y)
  x, y = x.astype(np.float64) - np.mean(x), y.astype(np.float64) - np.mean(y)
  denominator = np.sqrt((x @ x) * (y @ y))
  return float(x @ y / denominator) if denominator > 0 else 0.0


def rankdata(x) -> np.ndarray:
  """1-based ranks; tied values share the mean of their ranks (scipy.stats.rankdata 'average')."""
  x = np.asarray(x)
  order = np.argsort(x, kind="stable")
  ranks = np.empty(len(x), np.float64)
  ranks[order] = np.arange(1, len(x) + 1)
  values, inverse = np.unique(x, return_inverse=True)
  sums = np.bincount(inverse, weights=ranks, minlength=len(values))
  counts = np.bincount(inverse, minlength=len(values))
  return (sums / counts)[inverse]


def spearman(x, y) -> float:
  """Spearman's rho: Pearson's r of the (tie-averaged) ranks."""
  x, y = _check(x, y)
  return pearson(rankdata(x), rankdata(y))


def classification_metrics(labels, predictions, num_classes: int) -> dict[str, float]:
  """accuracy, mcc, and f1 (binary: of class 1) or macro_f1 (more than two classes)."""
  out = {"accuracy": accuracy(labels, predictions),
         "mcc": matthews_corrcoef(labels, predictions, num_classes)}
  if num_classes == 2:
    out["f1"] = f1(labels, predictions, positive=1)
  else:
    out["macro_f1"] = macro_f1(labels, predictions, num_classes)
  return out


def regression_metrics(labels, predictions) -> dict[str, float]:
  """pearson, spearman and mse (mean squared error)."""
  labels, predictions = _check(labels, predictions)
  return {"pearson": pearson(labels, predictions), "spearman": spearman(labels, predictions),
          "mse": float(np.mean((np.asarray(labels, np.float64) - predictions) ** 2))}
