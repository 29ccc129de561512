"""train --keep_best and --patience (pretraining/best_checkpoint.py): the lowest
held-out loss's weights in model_dir/best/, an early stop after N evals without a lower loss,
and both decided on a resume as the uninterrupted run decided them."""

import json
import math
import os
import re
import shutil

import pytest
import tensorflow as tf

from roberta_tf.models import checkpoint_files
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.pretraining import best_checkpoint, mlm_evaluation
from tests.harness import call_module

PATIENCE = 3


def test_best_eval_decides_the_same_after_a_restore(tmp_path):
  strategy = tf.distribute.get_strategy()
  losses = [5.0, 4.0, 4.0, 4.5, 3.0, math.nan, 6.0, 7.0]
  whole = best_checkpoint.BestEval(strategy)
  decisions = [(whole.update(x, s), whole.exhausted(PATIENCE)) for s, x in enumerate(losses)]
  # Equal, higher and NaN are no improvement; the third in a row exhausts a patience of 3.
  assert decisions == [(True, False), (True, False), (False, False), (False, False),
                       (True, False), (False, False), (False, False), (False, True)]
  assert whole.describe() == "best loss 3.0000 at step 4"
  assert not whole.exhausted(0)  # 0: never

  first = best_checkpoint.BestEval(strategy)
  for s, x in enumerate(losses[:4]):
    first.update(x, s)
  path = tf.train.Checkpoint(best_eval=first).write(str(tmp_path / "state"))
  resumed = best_checkpoint.BestEval(strategy)
  tf.train.Checkpoint(best_eval=resumed).read(path).assert_existing_objects_matched()
  assert [(resumed.update(x, s), resumed.exhausted(PATIENCE))
          for s, x in enumerate(losses[4:], 4)] == decisions[4:]


def test_checkpoint_best_without_a_best_dir_names_keep_best(tmp_path):
  with pytest.raises(model_dir_lib.ModelDirError, match=r"--checkpoint=best: no best checkpoint "
                     r"in .*best \(train writes one with --keep_best"):
    model_dir_lib.resolve_checkpoint(str(tmp_path), "best")


def test_keep_best_and_patience_need_eval_data(train_shards, tmp_path):
  for flag in ("--keep_best", "--patience=2"):
    run = call_module("roberta_tf.train", f"--train_data={train_shards}",
                      f"--model_dir={tmp_path / 'm'}", "--config=tiny", flag)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == [
        "error: --keep_best and --patience judge the held-out loss: they need "
        "--eval_data"]
  assert not os.path.exists(tmp_path / "m")


def _train(train_shards, model_dir):
  # A learning rate high enough that the held-out loss falls, then climbs: an early stop.
  return call_module(
      "roberta_tf.train", f"--train_data={train_shards}", f"--eval_data={train_shards}",
      f"--model_dir={model_dir}", "--config=tiny", "--max_seq_len=64", "--batch_size=8",
      "--learning_rate=5e-2", "--warmup_steps=0", "--train_steps=12", "--eval_every=1",
      "--eval_steps=1", "--checkpoint_every=1", "--keep_checkpoints=20", "--log_every=100",
      "--seed=3", "--peak_flops=1e12", "--keep_best", f"--patience={PATIENCE}")


def _evals(stdout):
  return {int(s): float(x) for s, x in re.findall(r"^eval step (\d+): loss ([\d.]+)", stdout,
                                                  re.M)}


def _eval_scalar(model_dir, tag):
  """{step: value} of scalar `tag` in model_dir/eval's event files."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  acc = event_accumulator.EventAccumulator(os.path.join(model_dir, "eval"),
                                           size_guidance={"tensors": 0})
  acc.Reload()
  return {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)}


def _state(prefix):
  """best_eval's (loss, step, evals_since) in a training checkpoint."""
  reader = checkpoint_files.reader(prefix)
  value = lambda name: reader.get_tensor(f"best_eval/{name}/.ATTRIBUTES/VARIABLE_VALUE")
  return float(value("loss")), int(value("step")), int(value("evals_since"))


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_best_checkpoint_early_stop_and_an_exact_resume(train_shards, tmp_path):
  a = str(tmp_path / "a")
  run = _train(train_shards, a)
  assert run.returncode == 0, run.stderr[-3000:]
  evals = _evals(run.stdout)
  # What the rule says of the logged losses: the lowest so far, and PATIENCE evals after it.
  best_step = min(evals, key=lambda s: (evals[s], s))
  stop = best_step + PATIENCE
  assert 0 < best_step and stop < 12 and max(evals) == stop, run.stdout[-3000:]
  assert f"early stop at step {stop}: {PATIENCE} evals without a lower held-out loss" in run.stdout
  assert checkpoint_files.steps_on_disk(a)[-1] == stop
  loss, step, since = _state(checkpoint_files.prefix_of(a, stop))
  assert (step, since) == (best_step, PATIENCE) and abs(loss - evals[best_step]) < 1e-4
  # TensorBoard charts it (eval run); config.json records the flags.
  assert _eval_scalar(a, "mlm/evals_since_best")[stop] == PATIENCE
  assert abs(_eval_scalar(a, "mlm/best_loss")[stop] - evals[best_step]) < 1e-4
  training = json.load(open(os.path.join(a, "config.json"), encoding="utf-8"))["training"]
  assert training["keep_best"] is True and training["patience"] == PATIENCE

  # best/ is a model dir holding that eval's weights: evaluated again, the same loss.
  best = os.path.join(a, "best")
  assert checkpoint_files.steps_on_disk(best) == [best_step]
  record = json.load(open(os.path.join(best, "config.json"), encoding="utf-8"))
  assert record["best"]["step"] == best_step and "training" in record
  assert sorted(f for f in os.listdir(best) if not f.startswith("ckpt-")) == [
      "checkpoint", "config.json", "merges.txt", "vocab.json"]
  again = mlm_evaluation.evaluate_checkpoint(a, train_shards, checkpoint="best", batch_size=8,
                                             eval_steps=1)
  assert again["checkpoint"] == os.path.join(best, f"ckpt-{best_step}")
  assert abs(again["loss"] - evals[best_step]) < 1e-4, (again, evals)

  # A crash after step stop-1 (evals_since 2 there): the resumed run stops at the same step,
  # with the same state. A resume that forgot the state would take step stop as a new best.
  b = str(tmp_path / "b")
  shutil.copytree(a, b)
  for path in checkpoint_files.files_of(checkpoint_files.prefix_of(b, stop)):
    os.remove(path)
  assert _state(checkpoint_files.prefix_of(b, stop - 1))[1:] == (best_step, PATIENCE - 1)
  resumed = _train(train_shards, b)
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert f"resumed from {b}/ckpt-{stop - 1}" in resumed.stdout
  assert f"early stop at step {stop}:" in resumed.stdout
  assert abs(_evals(resumed.stdout)[stop] - evals[stop]) < 1e-3
  assert _state(checkpoint_files.prefix_of(b, stop))[1:] == (best_step, PATIENCE)
  assert checkpoint_files.steps_on_disk(b)[-1] == stop

  # The stopped run, started again: nothing to train, nothing written.
  before = sorted(os.listdir(a))
  stopped = _train(train_shards, a)
  assert stopped.returncode == 0, stopped.stderr[-3000:]
  assert f"the run stopped early at step {stop}" in stopped.stdout
  assert not re.search(r"^(step|eval step) ", stopped.stdout, re.M)
  assert sorted(os.listdir(a)) == before
