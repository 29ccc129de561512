"""SIGTERM to one worker of a 2-worker run stops both at one common checkpoint; a restart of
both continues from it exactly.

Two `python -m roberta_tf.train --strategy=multi_worker` processes on localhost (TF_CONFIG),
2 accumulation steps each (global batch 8), dropout 0. Worker 1 (not the chief) gets SIGTERM
after its step 3: both must exit 0 within a minute, having saved the same step (the chief's
checkpoint in model_dir, no worker temp dir left). Restarted, both resume from that step and
train to --train_steps; the final checkpoint equals a single-process run's of the same global
batch (1 replica x 4 accumulation steps) without interruption (<= 1e-5, fp32).
"""

import json
import os
import re
import subprocess
import time

import numpy as np
import pytest

from tests.harness import free_port, module_env, start_module
from tests.test_train_resume import _checkpoint

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

STEPS = 16
FLAGS = ["--config=tiny", "--max_seq_len=64", "--batch_size=8", f"--train_steps={STEPS}",
         "--warmup_steps=2", "--learning_rate=1e-3", "--dropout=0", "--seed=3", "--log_every=1",
         "--checkpoint_every=1000", "--shuffle_buffer=100"]


def _train(train_shards, model_dir, *extra, tf_config=None):
  env = module_env(**({"TF_CONFIG": json.dumps(tf_config)} if tf_config else {}))
  return start_module("roberta_tf.train", f"--train_data={train_shards}",
                      f"--model_dir={model_dir}", *FLAGS, *extra, env=env,
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _workers(train_shards, model_dir):
  ports = [free_port(), free_port()]
  return [_train(train_shards, model_dir, "--strategy=multi_worker", "--grad_accum_steps=2",
                 tf_config={"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                            "task": {"type": "worker", "index": i}}) for i in range(2)]


@pytest.mark.timeout(420)
def test_sigterm_to_the_non_chief_stops_both_at_one_checkpoint_and_resumes(train_shards,
                                                                         tmp_path):
  model_dir, reference = str(tmp_path / "multi"), str(tmp_path / "reference")
  procs = [_train(train_shards, reference, "--grad_accum_steps=4"), *_workers(train_shards,
                                                                              model_dir)]
  try:
    logs = []
    for line in procs[2].stdout:  # worker 1
      logs.append(line)
      if line.startswith("step 3/"):
        break
    assert logs and logs[-1].startswith("step 3/"), "".join(logs)[-3000:]
    procs[2].send_signal(15)
    signalled = time.monotonic()
    outs = [p.communicate(timeout=90)[0] for p in procs[1:]]
    took = time.monotonic() - signalled
    outs[1] = "".join(logs) + outs[1]
    assert [p.returncode for p in procs[1:]] == [0, 0], outs[0][-3000:] + outs[1][-3000:]
    assert took < 60, took
    saved = [re.search(r"SIGTERM(.*): saved step (\d+); exiting cleanly", o) for o in outs]
    assert all(saved), outs
    assert saved[0].group(1) == " (to another worker)" and saved[1].group(1) == ""
    step = int(saved[0].group(2))
    assert int(saved[1].group(2)) == step and 3 <= step < STEPS
    assert sorted(f for f in os.listdir(model_dir) if f.startswith("ckpt-")) == [
        f"ckpt-{step}.data-00000-of-00001", f"ckpt-{step}.index"]
    assert not [f for f in os.listdir(model_dir) if f.startswith("workertemp")]

    procs[1:] = _workers(train_shards, model_dir)
    outs = [p.communicate(timeout=240)[0] for p in procs[1:]]
    assert [p.returncode for p in procs[1:]] == [0, 0], outs[0][-3000:] + outs[1][-3000:]
    assert all(f"ckpt-{step} at step {step}" in o for o in outs), outs
    digests = [re.findall(r"trained to step (\d+): weights sha256 (\w+)", o) for o in outs]
    assert digests[0] == digests[1] == [(str(STEPS), digests[0][0][1])]
    out = procs[0].communicate(timeout=240)[0]
    assert procs[0].returncode == 0, out[-3000:]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
        p.wait()
  expected, actual = _checkpoint(reference), _checkpoint(model_dir)
  for d in (expected, actual):
    d.pop("data_rounds/.ATTRIBUTES/VARIABLE_VALUE")  # micro-batch rounds differ with the split
  assert sorted(expected) == sorted(actual)
  for key, value in expected.items():
    np.testing.assert_allclose(actual[key], value, rtol=0, atol=1e-5, err_msg=key)
