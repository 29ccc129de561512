"""The best checkpoint of a pretraining run and early stopping, on the held-out MLM loss.

Every eval (events.py: at step 0 of a fresh run, every --eval_every and at the end) goes to
`BestEval.update`: a loss strictly below the lowest so far is an improvement, anything else
(equal, higher, NaN) one more eval without one.

- `train --keep_best`: at each improvement every worker saves the model's weights, the chief
  into `model_dir/best/` (`write_best`), a model dir of its own: config.json (the run's, plus a
  "best" section: the step and its eval metrics), vocab.json + merges.txt, and one checkpoint
  `ckpt-<step>` of the pretrainer only (no optimizer, no counters). Every binary that reads a
  model dir reads it (`export --model_dir=M/best`, `finetune --init_from=M/best`,
  `convert_checkpoint --to_hf --model_dir=M/best`); `--checkpoint=best` names it too
  (models/model_dir.py, `resolve_checkpoint`). The directory is replaced whole
  (common/atomic_write.atomic_dir): a reader finds the old best or the new one, never a mix.
- `--patience=N` (0: off): after N evals in a row without an improvement the run ends there (a
  final checkpoint, no further eval). Every worker reads the same all-reduced eval loss, so all
  of them stop after the same update. (Fine-tuning's --early_stopping_patience counts epochs.)

The state (the lowest loss, its step, the evals since) is run state: `BestEval` is checkpointed
with every training checkpoint (key "best_eval"), so a resumed run decides as the
uninterrupted one would have. A run resumed after it stopped early trains no further (unless
it is given a larger patience, or 0).
"""

from __future__ import annotations

import math

import tensorflow as tf

from roberta_tf.common import atomic_write, files
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.training import checkpointing

BEST_DIR = model_dir_lib.BEST_DIR
BEST_SECTION = "best"  # config.json's section in best/: {"step", "loss", "perplexity", ...}
CHECKPOINT_KEY = "best_eval"  # BestEval's key in the training checkpoints

_FIRST = tf.VariableAggregation.ONLY_FIRST_REPLICA


class BestEval(tf.Module):
  """The lowest held-out loss so far, its step, and the evals since it (checkpointed).

  Attributes (tf.Variables, under the run's strategy):
    loss: float64, +inf before the first eval.
    step: int64, the update the lowest loss was measured at (-1: none yet).
    evals_since: int64, evals since that one (0 right after an improvement).
  """

  def __init__(self, strategy: tf.distribute.Strategy):
    super().__init__(name=CHECKPOINT_KEY)
    with strategy.scope():
      var = lambda v, dtype, name: tf.Variable(v, dtype=dtype, trainable=False, name=name,
                                               aggregation=_FIRST)
      self.loss = var(math.inf, tf.float64, "best_loss")
      self.step = var(-1, tf.int64, "best_step")
      self.evals_since = var(0, tf.int64, "evals_since_best")

  def update(self, loss: float, step: int) -> bool:
    """Records the eval `loss` at `step`; True when it is the lowest so far (strictly)."""
    improved = loss < float(self.loss.numpy())  # NaN compares False: never an improvement
    if improved:
      self.loss.assign(loss)
      self.step.assign(step)
      self.evals_since.assign(0)
    else:
      self.evals_since.assign_add(1)
    return improved

  def exhausted(self, patience: int) -> bool:
    """`patience` evals in a row without an improvement (patience 0: never)."""
    return bool(patience) and int(self.evals_since.numpy()) >= patience

  def describe(self) -> str:
    """`best loss L at step S` (or `no eval yet`)."""
    step = int(self.step.numpy())
    return f"best loss {float(self.loss.numpy()):.4f} at step {step}" if step >= 0 else (
        "no eval yet")


def write_best(model_dir: str, model, step: int, metrics: dict, chief: bool = True,
               task_id: int = 0) -> str | None:
  """Writes `model`'s weights at `step` as `model_dir/best/` (see the module docstring);
  returns the checkpoint prefix there (None on a non-chief worker, which saves into its
  temporary directory, removed after: every worker takes part in a save).

  Raises:
    atomic_write.WriteError (disk full ...): naming model_dir/best; the old best/ is kept.
  """
  if not chief:
    scratch = checkpointing.worker_dir(model_dir, False, task_id)
    try:
      _save_weights(files.join(scratch, BEST_DIR), model, step)
    finally:
      files.rmtree(scratch, ignore_errors=True)
    return None
  source = model_dir_lib.ModelDir(model_dir)
  doc = source.read()
  doc[BEST_SECTION] = {"step": step, **{k: float(metrics[k]) for k in
                                        ("loss", "perplexity", "mlm_accuracy") if k in metrics}}
  target = files.join(model_dir, BEST_DIR)
  with atomic_write.atomic_dir(target) as tmp:
    prefix = _save_weights(tmp, model, step)
    best = model_dir_lib.ModelDir(tmp)
    best.write(doc)
    best.copy_vocabulary(model_dir)
  return files.join(target, files.basename(prefix))


def _save_weights(directory: str, model, step: int) -> str:
  """`model` (the pretrainer, key "model" as in every model dir) as `directory`'s only
  checkpoint ckpt-<step>, with its `checkpoint` index; returns the prefix."""
  files.makedirs(directory)
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory,
                                       max_to_keep=1,
                                       checkpoint_name=model_dir_lib.CHECKPOINT_NAME)
  return manager.save(checkpoint_number=step)


def recorded_best(model_dir: str) -> dict | None:
  """The "best" section of `model_dir/best/config.json` ({"step", "loss", ...}), or None."""
  return model_dir_lib.ModelDir(files.join(model_dir, BEST_DIR)).section(BEST_SECTION)
