"""oneDNN's frozen-weights switch (serving/frozen_weights.py) reaches no process that trains.

- Loading an export through the library sets nothing: a process that loads one (and serves a
  text) and then fine-tunes gets the weights of a process that never loaded one. Both run in a
  fresh process whose environment lacks the variable (tests/conftest.py pins it to 0 here,
  which would hide a library that set it again with `setdefault`).
- The binaries that train refuse to start under it: one `error:` line naming the variable,
  exit 1, nothing written into --model_dir.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.serving import frozen_weights
from tests import finetune_fixtures as fx
from tests.harness import call_module, module_env, run_module, run_script
from tests.test_export import exported  # noqa: F401  (the module fixture: a tiny export)

# Fine-tunes a classification head for three updates (tiny model) after, when argv[1] names an
# export, loading it with saved_model_reader.load and serving one text through it; prints the
# run's epoch losses.
_FINETUNE = r"""
import json, sys
from roberta_tf.finetuning import sweep_runner
from roberta_tf.finetuning.finetune_config import FinetuneConfig
export, config = sys.argv[1], json.loads(sys.argv[2])
if export:
  import tensorflow as tf
  from roberta_tf.serving import saved_model_reader
  loaded = saved_model_reader.load(export, ("fill_mask",), "an export")
  loaded.signatures["fill_mask"](text=tf.constant(["The capital of France is <mask>."]))
results = sweep_runner.run_sweep(FinetuneConfig.from_dict(config))
print(json.dumps([h["train_loss"] for h in results["runs"][0]["history"]]))
"""


def _weights(model_dir: str) -> dict[str, np.ndarray]:
  reader = tf.train.load_checkpoint(tf.train.latest_checkpoint(model_dir))
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()
          if "optimizer" not in name and not name.startswith("_CHECKPOINTABLE")}


@pytest.mark.slow
def test_fine_tuning_after_loading_an_export_trains_as_without_it(exported, tmp_path,  # noqa: F811
                                                                  hf_tiny_dir):
  _, export_dir = exported
  pretrained = fx.pretrained_model_dir(hf_tiny_dir, str(tmp_path / "pretrained"))
  table = fx.write_table(str(tmp_path / "train.tsv"), fx.sentiment_rows(48, 0))
  env = {k: v for k, v in module_env().items() if k != frozen_weights.ENV}
  losses, weights = {}, {}
  for side, export in (("loaded", export_dir), ("never", "")):
    config = dict(task="classification", model_dir=str(tmp_path / side), train_file=table,
                  eval_file=table, init_from=pretrained, max_seq_len=32, batch_size=16, epochs=2,
                  learning_rate=1e-3, text_fields=["sentence"], seeds=1, dropout=0.0)
    proc = run_script(_FINETUNE, export, json.dumps(config), env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    losses[side] = json.loads(proc.stdout.strip().splitlines()[-1])
    weights[side] = _weights(config["model_dir"])
  assert losses["loaded"] == losses["never"]
  assert weights["loaded"].keys() == weights["never"].keys() and weights["never"]
  for name, value in weights["never"].items():
    np.testing.assert_array_equal(weights["loaded"][name], value, err_msg=name)


def _train_flags(model_dir):
  return ["--train_data=/nonexistent/shards", f"--model_dir={model_dir}", "--train_steps=1"]


def _finetune_flags(model_dir):
  return ["--task=classification", "--train_file=/nonexistent/train.tsv",
          "--eval_file=/nonexistent/dev.tsv", f"--model_dir={model_dir}"]


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "yes"])
@pytest.mark.parametrize("binary, flags", [("roberta_tf.train", _train_flags),
                                           ("roberta_tf.finetune", _finetune_flags)])
def test_training_binaries_refuse_the_switch_in_one_line(binary, flags, value, tmp_path,
                                                         monkeypatch):
  monkeypatch.setenv(frozen_weights.ENV, value)
  model_dir = tmp_path / "out"
  proc = call_module(binary, *flags(model_dir))
  assert proc.returncode == 1, proc.stdout + proc.stderr
  assert proc.stderr.splitlines() == [proc.stderr.strip()], proc.stderr
  assert proc.stderr.startswith(f"error: {frozen_weights.ENV}={value} is set"), proc.stderr
  assert not model_dir.exists()


@pytest.mark.parametrize("value", ["0", "false", ""])
def test_the_switch_off_is_no_reason_to_refuse(value):
  assert not frozen_weights.is_on({frozen_weights.ENV: value})
  frozen_weights.refuse_in_training({frozen_weights.ENV: value})
  frozen_weights.refuse_in_training({})


def test_train_refuses_in_a_process_of_its_own(tmp_path):
  """The console process: exit code 1 and the one line, before TensorFlow is imported."""
  model_dir = tmp_path / "out"
  proc = run_module("roberta_tf.train", *_train_flags(model_dir),
                    env=module_env(**{frozen_weights.ENV: "1"}))
  assert proc.returncode == 1 and proc.stdout == "", proc.stdout + proc.stderr
  assert proc.stderr.strip().splitlines() == [
      f"error: {frozen_weights.ENV}=1 is set in the environment: oneDNN would keep the first "
      "packed copy of every weight and training would compute with stale weights; unset it (it "
      "is for processes that only serve)"]
  assert not os.path.exists(model_dir)
