"""A run killed and restarted ends exactly where an uninterrupted run ends.

`python -m roberta_tf.train` with deterministic ops and dropout 0.1 (so the dropout RNG state
must be restored too) runs 16 steps uninterrupted (A), and, in another model dir:
  B1: SIGKILL right after its first checkpoint (step 4) appears;
  B2: restart; it resumes from that checkpoint, gets SIGTERM a few steps later, saves and exits 0;
  B3: restart; it resumes from B2's checkpoint and finishes.
B3's step-16 loss (from TensorBoard) and checkpoint (model, optimizer, counters, RNG) equal A's.
"""

import os
import signal
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import framework_internals
from tests.harness import start_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

STEPS = 16


def _train(train_shards, model_dir):
  """Starts the binary; stdout is a pipe of its console lines."""
  return start_module(
      "roberta_tf.train", "--config=tiny", f"--train_data={train_shards}",
      f"--model_dir={model_dir}", "--max_seq_len=64", "--batch_size=8", "--learning_rate=1e-3",
      f"--train_steps={STEPS}", "--warmup_steps=4", "--checkpoint_every=4", "--log_every=1",
      "--keep_checkpoints=10", "--dropout=0.1", "--seed=5", "--deterministic",
      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)


def _read_until(proc, prefix):
  """Reads console lines until one starts with ``prefix``; returns it (None at EOF)."""
  for line in proc.stdout:
    if line.startswith(prefix):
      return line.strip()
  return None


def _latest_step(model_dir):
  prefix = tf.train.latest_checkpoint(model_dir)
  return int(prefix.rsplit("-", 1)[1]) if prefix else 0


def _train_loss(model_dir, step):
  """The 'mlm/loss' scalar at ``step`` from model_dir/train's event files (last write wins)."""
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  acc = event_accumulator.EventAccumulator(os.path.join(model_dir, "train"),
                                           size_guidance={"tensors": 0})
  acc.Reload()
  values = [tf.make_ndarray(e.tensor_proto) for e in acc.Tensors("mlm/loss") if e.step == step]
  assert values, f"no loss at step {step} in {model_dir}/train"
  return float(values[-1])


def _checkpoint(model_dir):
  prefix = tf.train.latest_checkpoint(model_dir)
  return {k: tf.train.load_variable(prefix, k) for k, _ in tf.train.list_variables(prefix)
          if k not in (framework_internals.OBJECT_GRAPH_KEY,
                       "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
                       # wall-clock seconds (the --train_minutes accounting), not training state
                       "train_seconds/.ATTRIBUTES/VARIABLE_VALUE")}


@pytest.mark.timeout(300)
def test_killed_and_terminated_run_resumes_exactly(train_shards, tmp_path):
  uninterrupted, interrupted = str(tmp_path / "a"), str(tmp_path / "b")
  a = _train(train_shards, uninterrupted)
  b = _train(train_shards, interrupted)
  try:
    saved = _read_until(b, "saved ")
    b.send_signal(signal.SIGKILL)
    b.wait(timeout=60)
    b.stdout.close()
    assert saved is not None and saved.endswith("ckpt-4")
    killed_at = _latest_step(interrupted)
    assert 0 < killed_at < STEPS, "the SIGKILL came too late to interrupt the run"

    b = _train(train_shards, interrupted)
    assert _read_until(b, "resumed from ") == f"resumed from {interrupted}/ckpt-{killed_at} at " \
                                               f"step {killed_at}"
    assert _read_until(b, f"step {killed_at + 2}/") is not None
    b.send_signal(signal.SIGTERM)
    rest = b.communicate(timeout=120)[0]
    assert b.returncode == 0, rest
    assert "SIGTERM: saved step" in rest
    terminated_at = _latest_step(interrupted)
    assert killed_at < terminated_at < STEPS, "SIGTERM came too late to interrupt the run"

    b = _train(train_shards, interrupted)
    rest = b.communicate(timeout=120)[0]
    assert b.returncode == 0 and f"resumed from {interrupted}/ckpt-{terminated_at}" in rest, rest
    assert a.wait(timeout=120) == 0
  finally:
    for proc in (a, b):
      if proc.poll() is None:
        proc.kill()
        proc.wait()
      proc.stdout.close()

  assert _latest_step(uninterrupted) == _latest_step(interrupted) == STEPS
  assert abs(_train_loss(uninterrupted, STEPS) - _train_loss(interrupted, STEPS)) <= 1e-5
  expected, actual = _checkpoint(uninterrupted), _checkpoint(interrupted)
  assert sorted(expected) == sorted(actual)
  assert any(k.startswith("dropout_rng/") for k in expected)
  for key, value in expected.items():
    np.testing.assert_allclose(actual[key], value, rtol=0, atol=1e-5, err_msg=key)
