"""Distributed training gives the update of the global batch, whatever its split.

Three runs of 4 steps with the same global batch (8 sequences) must end with the same model and
optimizer state (<= 1e-5, fp32): 1 replica x 4 accumulation steps; MirroredStrategy over 4
logical CPU devices x 1; MirroredStrategy over 2 devices x 2 accumulation steps; and 2
MultiWorkerMirroredStrategy workers (localhost) x 2 accumulation steps. StableAdamW likewise
(1 x 4 and 2 devices x 2). A mirrored run resumed
from its step-2 checkpoint must end where the uninterrupted one did (the data position counts
sequences of the global stream, the same for every split: it is compared too).

Logical CPU devices and collectives must be set up before TensorFlow initializes, so every run
is a subprocess; they start together (the 2 cores stay busy) and are awaited once per module.
Dropout 0: every split reads the same global stream of sequences (data/pipeline.py), and with
masks a pure function of each record's place, the same masks.
"""

import json
import os
import re
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import framework_internals
from tests.harness import free_port, module_env, start_module, start_script

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

STEPS = 4
COMMON_FLAGS = ["--config=tiny", "--max_seq_len=64", "--batch_size=8", f"--train_steps={STEPS}",
                "--warmup_steps=1", "--learning_rate=1e-3", "--dropout=0", "--shuffle_buffer=0",
                "--seed=3", "--log_every=1", "--checkpoint_every=2", "--keep_checkpoints=5",
                "--max_bad_steps=4"]

# Runs library code in a fresh process: split the CPU, then pretraining.pretrain for each (name,
# strategy, grad_accum_steps, resume_from) given as JSON in argv[3]; model dirs go under argv[2].
_RUNS_SCRIPT = r"""
import json, os, shutil, sys
from roberta_tf.training import strategy as strategy_lib
strategy_lib.split_cpu(int(sys.argv[1]))
import tensorflow as tf
# Grappler spends ~15 s optimizing the 4-replica graph for a 4-step run; the math is the same.
tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.train_config import TrainConfig
out, specs, base = sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
for name, strategy, accum, resume_from, *extra in specs:
  model_dir = os.path.join(out, name)
  if resume_from:  # a model dir holding only resume_from's step-2 checkpoint
    os.makedirs(model_dir)
    for f in os.listdir(os.path.join(out, resume_from)):
      if f.startswith("ckpt-2."):
        shutil.copy(os.path.join(out, resume_from, f), model_dir)
    with open(os.path.join(model_dir, "checkpoint"), "w") as f:
      f.write('model_checkpoint_path: "ckpt-2"\n')
  strategy = (tf.distribute.MirroredStrategy() if strategy == "mirrored"
              else tf.distribute.get_strategy())
  result = pretraining.pretrain(
      TrainConfig.from_dict(dict(model_dir=model_dir, grad_accum_steps=accum, **base,
                                 **(extra[0] if extra else {}))),
      strategy=strategy)
  print("RESULT", name, json.dumps({"loss": result.final_train["last_step_loss"],
                                    "replicas": strategy.num_replicas_in_sync}), flush=True)
"""


def _flags_to_config(flags):
  """COMMON_FLAGS as TrainConfig keyword arguments."""
  values = {}
  for flag in flags:
    name, value = flag[2:].split("=")
    values[name] = float(value) if name in ("learning_rate", "dropout") else (
        value if name == "config" else int(value))
  return values


def _checkpoint_values(model_dir):
  """{key: array} of the latest checkpoint: model, optimizer moments, counters."""
  prefix = tf.train.latest_checkpoint(model_dir)
  assert prefix is not None and prefix.endswith(f"ckpt-{STEPS}"), prefix
  return {k: tf.train.load_variable(prefix, k) for k, _ in tf.train.list_variables(prefix)
          if k not in (framework_internals.OBJECT_GRAPH_KEY,
                       "save_counter/.ATTRIBUTES/VARIABLE_VALUE",
                       # wall-clock seconds (the --train_minutes accounting), not training state
                       "train_seconds/.ATTRIBUTES/VARIABLE_VALUE")}


def _assert_same_state(a, b, atol=1e-5):
  """Model, optimizer, step, data position and dropout RNG states agree (micro-batch rounds
  differ with the split)."""
  a, b = ({k: v for k, v in d.items() if not k.startswith("data_rounds")} for d in (a, b))
  assert sorted(a) == sorted(b)
  assert any(k.startswith("optimizer/") for k in a)  # the moments are compared too
  for key in a:
    np.testing.assert_allclose(b[key], a[key], rtol=0, atol=atol, err_msg=key)


@pytest.fixture(scope="module")
def runs(train_shards, tmp_path_factory):
  """Starts all distributed runs at once; returns {name: model_dir} and their outputs."""
  out = str(tmp_path_factory.mktemp("distributed"))
  base = dict(_flags_to_config(COMMON_FLAGS), train_data=train_shards)
  script_runs = {
      4: [["accum4", "default", 4, None], ["mirrored4", "mirrored", 1, None],
          ["accum4_stable", "default", 4, None, {"optimizer": "stable_adamw"}]],
      2: [["mirrored2", "mirrored", 2, None], ["mirrored2_resumed", "mirrored", 2, "mirrored2"],
          ["mirrored2_stable", "mirrored", 2, None, {"optimizer": "stable_adamw"}]],
  }
  procs = {}
  for devices, specs in script_runs.items():
    procs[f"split{devices}"] = start_script(
        _RUNS_SCRIPT, devices, out, json.dumps(specs), json.dumps(base),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  ports = [free_port(), free_port()]
  for index in range(2):
    tf_config = {"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                 "task": {"type": "worker", "index": index}}
    procs[f"worker{index}"] = start_module(
        "roberta_tf.train", f"--train_data={train_shards}",
        f"--model_dir={os.path.join(out, 'multi_worker')}", "--strategy=multi_worker",
        "--grad_accum_steps=2", *COMMON_FLAGS, env=module_env(TF_CONFIG=json.dumps(tf_config)),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
  logs = {}
  try:
    for name, proc in procs.items():
      logs[name] = proc.communicate(timeout=240)[0]
      assert proc.returncode == 0, f"{name} failed:\n{logs[name][-3000:]}"
  finally:
    for proc in procs.values():
      if proc.poll() is None:
        proc.kill()
        proc.wait()
  results = {}
  for name in ("split4", "split2"):
    for m in re.finditer(r"^RESULT (\S+) (.*)$", logs[name], re.M):
      results[m.group(1)] = json.loads(m.group(2))
  return out, results, logs


@pytest.mark.timeout(300)
def test_4_replicas_equal_1_replica_with_4_accumulation_steps(runs):
  out, results, _ = runs
  assert results["mirrored4"]["replicas"] == 4 and results["accum4"]["replicas"] == 1
  assert abs(results["mirrored4"]["loss"] - results["accum4"]["loss"]) <= 1e-5
  _assert_same_state(_checkpoint_values(os.path.join(out, "accum4")),
                     _checkpoint_values(os.path.join(out, "mirrored4")))


@pytest.mark.timeout(300)
def test_mirrored_2_devices_with_accumulation_and_resume(runs):
  out, results, logs = runs
  assert results["mirrored2"]["replicas"] == 2
  reference = _checkpoint_values(os.path.join(out, "accum4"))
  _assert_same_state(reference, _checkpoint_values(os.path.join(out, "mirrored2")))
  # Resumed at step 2 (data position 2 steps x 8 sequences).
  assert re.search(r"resumed from \S+ckpt-2 at step 2", logs["split2"])
  assert not os.path.exists(os.path.join(out, "mirrored2_resumed", "ckpt-1.index"))
  _assert_same_state(_checkpoint_values(os.path.join(out, "mirrored2")),
                     _checkpoint_values(os.path.join(out, "mirrored2_resumed")), atol=1e-6)


@pytest.mark.timeout(300)
def test_stable_adamw_mirrored_with_accumulation_equals_one_replica(runs):
  """StableAdamW's per-tensor clipping sees the all-reduced gradient: 2 devices x 2 equal
  1 x 4, and differ from AdamW's run."""
  out, results, _ = runs
  assert results["mirrored2_stable"]["replicas"] == 2
  stable = _checkpoint_values(os.path.join(out, "accum4_stable"))
  _assert_same_state(stable, _checkpoint_values(os.path.join(out, "mirrored2_stable")))
  adamw = _checkpoint_values(os.path.join(out, "accum4"))
  assert any(not np.allclose(stable[k], adamw[k], rtol=0, atol=1e-5) for k in stable)


@pytest.mark.timeout(300)
def test_two_workers_end_identical_and_equal_one_worker(runs):
  out, _, logs = runs
  digests = [re.findall(r"trained to step (\d+): weights sha256 (\w+)", logs[f"worker{i}"])
             for i in range(2)]
  assert digests[0] == digests[1] and digests[0][0][0] == str(STEPS), digests  # bit-identical
  _assert_same_state(_checkpoint_values(os.path.join(out, "accum4")),
                     _checkpoint_values(os.path.join(out, "multi_worker")))
  # Only the chief writes checkpoints and summaries; worker 1's temporary checkpoints are gone.
  model_dir = os.path.join(out, "multi_worker")
  assert "saved " in logs["worker0"] and "saved " not in logs["worker1"]
  assert len(os.listdir(os.path.join(model_dir, "train"))) == 1
  assert not [f for f in os.listdir(model_dir) if f.startswith("workertemp")]
