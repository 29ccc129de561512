"""train --train_minutes (issue 38): the run stops when the budget is spent, with a final
checkpoint and eval; the learning rate follows the budget's elapsed share; the time spent is
stored with the checkpoint, so a resume keeps the accounting."""

import re

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.training.schedule import BudgetSchedule
from tests.harness import call_module


def test_budget_schedule_follows_the_elapsed_share():
  schedule = BudgetSchedule(1e-3, warmup_fraction=0.25)
  rates = []
  for f in (0.0, 0.125, 0.25, 0.625, 1.0, 1.5):
    schedule.fraction.assign(f)
    rates.append(float(schedule(tf.constant(12345))))  # the update count is ignored
  np.testing.assert_allclose(rates, [0.0, 5e-4, 1e-3, 5e-4, 0.0, 0.0], atol=1e-9)
  with pytest.raises(ValueError, match="warmup_fraction"):
    BudgetSchedule(1e-3, 1.0)


def _train_seconds(model_dir):
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
  key = next(k for k in reader.get_variable_to_shape_map() if k.startswith("train_seconds"))
  return float(reader.get_tensor(key))


def _steps(text):
  return [int(m) for m in re.findall(r"^step (\d+) \|", text, re.M)]


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_a_budget_stops_saves_and_resumes_its_accounting(train_shards, tmp_path):
  model_dir = str(tmp_path / "budget")
  args = [f"--train_data={train_shards}", f"--eval_data={train_shards}",
          f"--model_dir={model_dir}", "--config=tiny", "--max_seq_len=64", "--batch_size=8",
          "--train_steps=1000", "--warmup_steps=500", "--learning_rate=1e-3", "--log_every=1",
          "--eval_steps=2", "--checkpoint_every=100000"]
  first = call_module("roberta_tf.train", *args, "--train_minutes=0.1")
  assert first.returncode == 0, first.stderr[-3000:]
  steps = _steps(first.stdout)
  assert steps and steps[-1] < 1000, first.stdout[-2000:]  # the clock ended it, not the steps
  seconds = _train_seconds(model_dir)
  assert 6.0 <= seconds < 30.0, seconds
  assert f"ckpt-{steps[-1]}" in tf.train.latest_checkpoint(model_dir)
  assert re.search(rf"eval step {steps[-1]}:", first.stdout), first.stdout[-2000:]
  # Half the budget is warmup: the rate follows the clock (up, then down), never the peak's
  # constant, and never above it; the first logged update is early in the warmup.
  rates = [float(r) for r in re.findall(r"\| lr ([0-9.e+-]+) \|", first.stdout)]
  assert len(set(rates)) > 1 and max(rates) <= 1e-3 + 1e-9 and rates[0] < 5e-4, rates

  again = call_module("roberta_tf.train", *args, "--train_minutes=0.1")  # the budget is spent
  assert again.returncode == 0 and not _steps(again.stdout), again.stdout[-2000:]
  more = call_module("roberta_tf.train", *args, "--train_minutes=0.2")
  assert more.returncode == 0, more.stderr[-3000:]
  assert "changed schedule (--train_minutes: 0.1 -> 0.2)" in more.stdout, more.stdout[-2000:]
  assert _steps(more.stdout)[0] == steps[-1] + 1
  assert 12.0 <= _train_seconds(model_dir) < 45.0
