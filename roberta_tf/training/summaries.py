"""TensorBoard event files (model_dir/train, model_dir/eval) and console progress lines.

Scalars are written under grouped tags, each with a description (TensorBoard draws one section
per prefix and shows the description under the chart): callers pass metric names, the tables
below give the tag. Pretraining:

  mlm/    loss, perplexity, accuracy          (train and eval runs: one chart each, both curves)
          best_loss, evals_since_best         (eval: the best checkpoint and early stopping)
  nsp/    loss, accuracy                      (the input-format ablation's pair runs only)
  optim/  learning_rate, grad_norm, skipped_steps, loss_scale, overflow_steps, total_loss
  perf/   tokens_per_sec, examples_per_sec, mfu, input_wait_fraction
  mlm_by_position/  0-512, 512-1K, ...        (eval: the loss by position bucket, from metric
                                              names `loss_by_position/<bucket>`)

The unigram baseline is written as `mlm/perplexity` of a third run, `eval/unigram`
(model_dir/eval/unigram), so it is drawn on the held-out perplexity's chart. Fine-tuning writes
`task/loss` (train), `task/<metric>` (the dev metrics: accuracy, f1, ...) and `optim/...`.
Before these tables, tags were the bare metric names (`loss`, `perplexity`,
`unigram_perplexity`, ...); docs/design.md lists where each one moved.
"""

from __future__ import annotations

import datetime
import sys

import tensorflow as tf

from roberta_tf.common import files

UNIGRAM_RUN = "unigram"  # under the eval run: model_dir/eval/unigram

# Metric name -> (tag, description). "loss" is the MLM loss except in the NSP ablation's pair
# runs, where training's "loss" is MLM + NSP and "mlm_loss" the MLM part (see _tag).
PRETRAINING = {
    "loss": ("mlm/loss", "Masked-LM cross-entropy: nats per masked token (train: mean over the "
             "log window; eval: over the held-out batches)."),
    "mlm_loss": ("mlm/loss", "Masked-LM cross-entropy: nats per masked token."),
    "perplexity": ("mlm/perplexity", "exp(mlm/loss). The `eval/unigram` run is the unigram "
                   "baseline: the same masked targets predicted by train-split token frequency; "
                   "a model at ~1x of it has not learned to use context."),
    "unigram_perplexity": ("mlm/perplexity", "Unigram baseline: perplexity of the held-out "
                           "masked targets predicted by their train-split frequency."),
    "mlm_accuracy": ("mlm/accuracy", "Fraction of masked tokens whose argmax prediction is the "
                     "original token."),
    "best_loss": ("mlm/best_loss", "The lowest held-out MLM loss so far (train --keep_best "
                  "keeps its weights in model_dir/best/)."),
    "evals_since_best": ("mlm/evals_since_best", "Evals since the lowest held-out loss (train "
                         "--patience stops the run at its value)."),
    "nsp_loss": ("nsp/loss", "Next-sentence prediction cross-entropy per pair."),
    "nsp_accuracy": ("nsp/accuracy", "Fraction of pairs whose is-next label is predicted."),
    "total_loss": ("optim/total_loss", "The objective the optimizer minimizes: MLM + NSP mean "
                   "losses (pair runs of the input-format ablation)."),
    "learning_rate": ("optim/learning_rate", "AdamW learning rate of the last update: linear "
                      "warmup to the peak, then linear decay to 0."),
    "grad_norm": ("optim/grad_norm", "Global L2 norm of the gradient before clipping, mean over "
                  "the log window's applied updates."),
    "skipped_steps": ("optim/skipped_steps", "Updates skipped so far because the loss or a "
                      "gradient was not finite (the NaN guard)."),
    "loss_scale": ("optim/loss_scale", "fp16 dynamic loss scale of the last update."),
    "overflow_steps": ("optim/overflow_steps", "fp16 updates skipped so far on a gradient "
                       "overflow (the loss scale is halved on each)."),
    "tokens_per_sec": ("perf/tokens_per_sec", "Real (non-pad) tokens trained on per second of "
                       "wall time over the log window."),
    "examples_per_sec": ("perf/examples_per_sec", "Sequences trained on per second of wall "
                         "time over the log window."),
    "mfu": ("perf/mfu", "Model FLOPs utilization: the model's FLOPs per second over the "
            "accelerators' peak (models/flops.py)."),
    "input_wait_fraction": ("perf/input_wait_fraction", "Fraction of wall time the step loop "
                            "waited for the input pipeline."),
}

# Metric names `BY_POSITION` + a bucket (pretraining/position_buckets.py) -> mlm_by_position/...
BY_POSITION = "loss_by_position/"
_BY_POSITION_TAG = ("mlm_by_position/", "Masked-LM cross-entropy of the masked tokens at these "
                    "positions of their rows (0: the first token): does the model use its far "
                    "positions? (pretraining/position_buckets.py)")

FINETUNING = {
    "loss": ("task/loss", "Mean training loss of the epoch (the task's cross-entropy, or mean "
             "squared error for regression)."),
    "learning_rate": ("optim/learning_rate", "AdamW learning rate of the epoch's last update: "
                      "linear warmup, then linear decay to 0."),
    "skipped_steps": ("optim/skipped_steps", "Updates skipped so far because the loss or a "
                      "gradient was not finite (the NaN guard)."),
}


def _tag(table: dict, split: str, name: str, values: dict) -> tuple[str, str, str]:
  """(run subdirectory, tag, description) of metric `name` in `values` of `split`."""
  if name == "loss" and "mlm_loss" in values and table is PRETRAINING:
    name = "total_loss"  # the NSP ablation's objective; mlm_loss is the MLM part
  if name == "unigram_perplexity":
    return f"{split}/{UNIGRAM_RUN}", *table[name]
  if name in table:
    return split, *table[name]
  if name.startswith(BY_POSITION) and table is PRETRAINING:
    return split, _BY_POSITION_TAG[0] + name[len(BY_POSITION):], _BY_POSITION_TAG[1]
  return split, f"task/{name}", f"Dev-set {name} (roberta_tf/finetuning/metrics.py)."


class Summaries:
  """Scalar and text summaries; a no-op on non-chief workers (``enabled=False``).

  Args:
    model_dir: where the runs' directories go (train/, eval/, eval/unigram/).
    enabled: False on non-chief workers.
    tags: PRETRAINING or FINETUNING (metric name -> tag, description).
    runs: the run directories made at once (others when first written).
  """

  def __init__(self, model_dir: str, enabled: bool = True, tags: dict = PRETRAINING,
               runs: tuple[str, ...] = ("train", "eval")):
    self.enabled = enabled
    self.model_dir = model_dir
    self.tags = tags
    self._writers = {}
    if enabled:
      for split in runs:
        self._writer(split)

  def _writer(self, run: str):
    if run not in self._writers:
      self._writers[run] = tf.summary.create_file_writer(files.join(self.model_dir, run))
    return self._writers[run]

  def scalars(self, split: str, step: int, values: dict) -> None:
    """Writes `values` ({metric name: float}) at `step` to the `split` run ("train"/"eval")."""
    if not self.enabled:
      return
    runs = set()
    for name, value in values.items():
      run, tag, description = _tag(self.tags, split, name, values)
      with self._writer(run).as_default(step=step):
        tf.summary.scalar(tag, value, description=description)
      runs.add(run)
    for run in runs:
      self._writers[run].flush()

  def text(self, split: str, step: int, name: str, value: str) -> None:
    if not self.enabled:
      return
    with self._writer(split).as_default(step=step):
      tf.summary.text(name, value)
    self._writers[split].flush()


def format_eta(seconds: float) -> str:
  return str(datetime.timedelta(seconds=int(max(seconds, 0))))


def progress_line(step: int, total: int | None, metrics: dict, eta_s: float) -> str:
  """One console line: step (of total, unless None: a time budget), loss, lr, tokens/s, ETA."""
  parts = [f"step {step}/{total}" if total else f"step {step}", f"loss {metrics['loss']:.4f}",
           f"lr {metrics['learning_rate']:.3e}", f"{metrics['tokens_per_sec']:,.0f} tok/s",
           f"grad_norm {metrics['grad_norm']:.3f}", f"ETA {format_eta(eta_s)}"]
  if "nsp_loss" in metrics:
    parts.insert(2, f"nsp_loss {metrics['nsp_loss']:.4f} acc {metrics['nsp_accuracy']:.3f}")
  if metrics.get("skipped_steps"):
    parts.append(f"skipped {int(metrics['skipped_steps'])}")
  return " | ".join(parts)


def log(line: str) -> None:
  print(line, file=sys.stdout, flush=True)
