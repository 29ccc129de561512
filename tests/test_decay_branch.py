"""Warmup-stable-decay and its decay branch (issue 62): a branch from a stable-phase
checkpoint (train --decay_from) ends on the weights of the run planned as "stable, then that
decay", exactly; a resume inside the decay is exact; a checkpoint outside the stable phase is
refused."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import files, framework_internals
from tests.harness import call_module

# Not training state: the wall clock, and how many saves this model dir made.
_NOT_STATE = (framework_internals.OBJECT_GRAPH_KEY, "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
              "train_seconds/.ATTRIBUTES/VARIABLE_VALUE")


def _train(train_shards, model_dir, *flags):
  """The binary in this process: tiny model, dropout on (the branch must carry its RNG)."""
  out = call_module(
      "roberta_tf.train", "--config=tiny", f"--train_data={train_shards}",
      f"--model_dir={model_dir}", "--max_seq_len=64", "--batch_size=8", "--learning_rate=2e-3",
      "--warmup_steps=2", "--checkpoint_every=2", "--keep_checkpoints=10", "--log_every=1",
      "--dropout=0.1", "--seed=3", "--schedule=wsd", *flags)
  assert out.returncode == 0, out.stderr[-3000:]
  return out


def _state(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()
          if k not in _NOT_STATE}


def _assert_same(a, b):
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _rates(stdout):
  return {int(s): float(r) for s, r in re.findall(r"^step (\d+)\S* \|.*\| lr ([0-9.e+-]+) \|",
                                                  stdout, re.M)}


@pytest.mark.slow
def test_a_branch_from_the_stable_phase_is_the_planned_run(train_shards, tmp_path):
  planned, branch = str(tmp_path / "planned"), str(tmp_path / "branch")
  decay = ("--decay_steps=4", "--decay_shape=1-sqrt", "--decay_floor=0.1")
  # Planned: warmup 2, stable to step 4, the decay's 4 updates; its ckpt-4 ends the stable phase.
  planned_out = _train(train_shards, planned, "--train_steps=8", *decay)
  branch_out = _train(train_shards, branch, f"--decay_from={planned}/ckpt-4", *decay)
  assert "decay branch from" in branch_out.stdout and "warning" not in branch_out.stdout
  assert sorted(_rates(branch_out.stdout)) == [5, 6, 7, 8]  # only the decay's updates
  # The rate of update t (logged at step t + 1): 1-sqrt from the peak to 0.1 x the peak.
  expected = {t + 1: 2e-3 - (2e-3 - 2e-4) * np.sqrt((t - 4) / 4) for t in range(4, 8)}
  for step, rate in _rates(branch_out.stdout).items():
    assert rate == _rates(planned_out.stdout)[step]
    np.testing.assert_allclose(rate, expected[step], rtol=1e-3)  # 4 digits printed
  _assert_same(_state(f"{branch}/ckpt-8"), _state(f"{planned}/ckpt-8"))
  with open(f"{branch}/config.json", encoding="utf-8") as f:
    recorded = json.load(f)["training"]
  assert (recorded["decay_from"], recorded["init_from"], recorded["train_steps"]) == (
      f"{planned}/ckpt-4", planned, 8)

  # A resume inside the decay: the branch's model dir as a stop after its step-6 save left it.
  resumed = str(tmp_path / "resumed")
  files.makedirs(resumed)
  for path in [f"{branch}/config.json", *files.glob(f"{branch}/ckpt-6.*")]:
    files.copy(path, f"{resumed}/{files.basename(path)}")
  # The recorded source checkpoint wins over the flag's model dir (whose newest is ckpt-8).
  again = _train(train_shards, resumed, f"--decay_from={planned}", *decay)
  assert "resumed from" in again.stdout and sorted(_rates(again.stdout)) == [7, 8]
  _assert_same(_state(f"{resumed}/ckpt-8"), _state(f"{planned}/ckpt-8"))

  # Outside the stable phase: the planned run's step 6 is in its decay; nothing is written.
  refused = call_module("roberta_tf.train", "--config=tiny", f"--train_data={train_shards}",
                        f"--model_dir={tmp_path / 'late'}", "--max_seq_len=64",
                        "--schedule=wsd", "--decay_steps=2", f"--decay_from={planned}/ckpt-6")
  assert refused.returncode != 0
  assert "step 6 is not in that run's stable phase (steps 2..4" in refused.stderr
  assert not files.exists(str(tmp_path / "late" / "config.json"))
