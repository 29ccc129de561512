"""training/precision_probe.py: --precision=auto measures both precisions and caches the pick."""

import json
import re

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common.option_groups import OptimizerOptions
from roberta_tf.pretraining.objective import MlmObjective
from roberta_tf.pretraining.task import synthetic_batch
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import precision_probe
from roberta_tf.training.schedule import WarmupLinearDecay
from roberta_tf.training.train_step import StepConfig, TrainStep
from tests.harness import call_module, tiny_config


@pytest.mark.parametrize("seconds, expected", [
    ({"float32": 1.0, "mixed_bfloat16": 0.95}, "mixed_bfloat16"),
    ({"float32": 1.0, "mixed_bfloat16": 0.96}, "float32"),  # under the 5% margin
    ({"float32": 1.0, "mixed_bfloat16": 1.5}, "float32"),
    ({"float32": 1.0}, "float32"),
])
def test_bfloat16_only_when_it_saves_the_margin(seconds, expected):
  assert precision_probe.choose(seconds) == expected


def test_pretrainings_synthetic_batch_has_the_pipelines_format():
  batch = synthetic_batch(3, 16, 4, 100, seed=1)
  assert {k: (v.shape, v.dtype.name) for k, v in batch.items()} == {
      "input_ids": ((3, 16), "int32"), "padding_mask": ((3, 16), "int32"),
      "mask_positions": ((3, 4), "int32"), "mask_ids": ((3, 4), "int32"),
      "mask_weights": ((3, 4), "float32")}
  np.testing.assert_array_equal(batch["mask_ids"],
                                np.take_along_axis(batch["input_ids"], batch["mask_positions"], 1))
  assert (batch["mask_positions"] > 0).all() and (batch["mask_positions"] < 15).all()
  np.testing.assert_array_equal(batch["mask_weights"].sum(1), [2, 2, 2])  # 15% of 16


def test_pick_measures_both_then_reads_the_cache(tmp_path, monkeypatch):
  monkeypatch.setenv("ROBERTA_TF_CACHE_DIR", str(tmp_path / "cache"))
  strategy = tf.distribute.get_strategy()
  config = tiny_config()
  built = []

  def build_step(precision):
    built.append(precision)
    model = models.RobertaPretrainer(config, dtype=precision)
    optimizer = optimizer_lib.adamw(OptimizerOptions(learning_rate=1e-4),
                                    WarmupLinearDecay(1e-4, 0, 10), model.trainable_variables)
    return TrainStep(strategy, model, optimizer, StepConfig(precision=precision), MlmObjective())
  batch = synthetic_batch(2, 16, 4, config.vocab_size)
  key = precision_probe.cache_key({"hidden": config.hidden_size}, (2, 16), 1)
  lines = []
  first = precision_probe.pick(build_step, strategy, batch, key, warmup=1, steps=2,
                               log=lines.append)
  assert built == ["float32", "mixed_bfloat16"] and first["cached"] is False
  seconds = first["seconds_per_step"]
  assert set(seconds) == {"float32", "mixed_bfloat16"} and min(seconds.values()) > 0
  assert first["precision"] == precision_probe.choose(seconds)
  with open(tmp_path / "cache" / "precision.json", encoding="utf-8") as f:
    assert json.load(f)[key]["precision"] == first["precision"]
  again = precision_probe.pick(build_step, strategy, batch, key, log=lines.append)
  assert built == ["float32", "mixed_bfloat16"]  # nothing built: the cache answered
  assert again["cached"] is True and again["precision"] == first["precision"]
  assert lines[-1].startswith(f"precision auto: {first['precision']} (measured earlier")
  assert precision_probe.machine_key() in key


XEON = {"vendor_id": "GenuineIntel", "cpu family": "6", "model": "143", "stepping": "8",
        "model name": "Intel(R) Xeon(R) Processor", "flags": "fpu avx2 fma avx512f avx512_bf16"}


def test_the_machine_key_is_the_cpus_family_and_flags_not_its_name():
  plain = precision_probe.machine_key(XEON)
  amx = precision_probe.machine_key({**XEON, "flags": XEON["flags"] + " amx_tile amx_bf16"})
  assert plain != amx and "Xeon" not in plain and "amx_bf16" in amx
  assert "family 6 model 143 stepping 8" in plain and "avx512_bf16" in plain
  assert "fpu" not in plain  # flags that do not change a matmul's speed stay out


def test_the_peak_is_measured_once_then_cached(tmp_path, monkeypatch):
  monkeypatch.setenv("ROBERTA_TF_CACHE_DIR", str(tmp_path))
  lines = []
  flops, cached = precision_probe.peak_flops("float32", lines.append, n=32, reps=1)
  assert flops > 0 and not cached and "measured now" in lines[-1]
  monkeypatch.setattr(precision_probe, "matmul_flops", lambda *a: pytest.fail("measured again"))
  assert precision_probe.peak_flops("float32", lines.append, n=32) == (flops, True)
  assert f"{flops / 1e9:.0f} GFLOP/s (measured earlier" in lines[-1]
  # Measured again (the benchmarks): a loaded machine's lower figure does not replace the best.
  monkeypatch.setattr(precision_probe, "matmul_flops", lambda *a: flops / 2)
  assert precision_probe.peak_flops("float32", lines.append, n=32, remeasure=True) == (flops, False)
  assert "the best measured on this machine is used" in lines[-1]
  monkeypatch.setattr(precision_probe, "matmul_flops", lambda *a: flops * 2)
  assert precision_probe.peak_flops("float32", lines.append, n=32, remeasure=True)[0] == flops * 2
  assert precision_probe.peak_flops("float32", lines.append, n=32) == (flops * 2, True)


@pytest.mark.parametrize("content", [
    "[1, 2]", "{not json", '{"KEY": [1]}', '{"KEY": {"float32": "fast"}}',
    "[" * 10**5 + "]" * 10**5,  # deeper than json's recursion limit
    '{"KEY": {"float32": Infinity}}', '{"KEY": {"float32": 1e999}}'])  # both read as inf
def test_a_malformed_cache_is_measured_again(tmp_path, monkeypatch, content):
  monkeypatch.setenv("ROBERTA_TF_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(precision_probe, "matmul_flops", lambda *a: 5e9)
  key = precision_probe.peak_key(32)
  (tmp_path / "precision.json").write_text(content.replace("KEY", json.dumps(key)[1:-1]))
  lines = []
  assert precision_probe.peak_flops("float32", lines.append, n=32) == (5e9, False)
  assert len(lines) == 2 and "measured now" in lines[1]
  assert lines[0].startswith(f"ignoring {tmp_path / 'precision.json'}")  # one line, the file
  assert precision_probe.read_cache()[key] == {"float32": 5e9}  # rewritten
  assert precision_probe.cached_entry(key, precision_probe._is_pick, lines.append) is None


def test_an_unreadable_cache_is_said_once_and_measured_again(tmp_path, monkeypatch):
  monkeypatch.setenv("ROBERTA_TF_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(precision_probe, "matmul_flops", lambda *a: 5e9)
  (tmp_path / "precision.json").mkdir()  # nor can it be rewritten: every run measures
  lines = []
  assert precision_probe.peak_flops("float32", lines.append, n=32) == (5e9, False)
  assert len(lines) == 2 and lines[0].startswith(f"ignoring {tmp_path / 'precision.json'}: "
                                                 "cannot read it"), lines


def test_train_with_auto_records_the_measured_precision_and_a_resume_keeps_it(
    tmp_path, monkeypatch, train_shards):
  monkeypatch.setenv("ROBERTA_TF_CACHE_DIR", str(tmp_path / "cache"))
  model_dir = tmp_path / "model"
  common = ["--config=tiny", f"--train_data={train_shards}", f"--model_dir={model_dir}",
            "--batch_size=4", "--max_seq_len=64", "--log_every=1", "--precision=auto",
            "--checkpoint_every=2", "--warmup_steps=1"]
  first = call_module("roberta_tf.train", *common, "--train_steps=2")
  assert first.returncode == 0, first.stderr[-3000:]
  said = re.search(r"precision auto: (\S+) \(float32 (\d+) ms a step, mixed_bfloat16 (\d+) ms",
                   first.stdout + first.stderr)
  assert said, (first.stdout + first.stderr)[-3000:]
  with open(model_dir / "config.json", encoding="utf-8") as f:
    assert json.load(f)["training"]["precision"] == said.group(1)
  resumed = call_module("roberta_tf.train", *common, "--train_steps=3")
  assert resumed.returncode == 0, resumed.stderr[-3000:]
  assert (f"precision auto: {said.group(1)} (the resumed run's, from its config.json)"
          in resumed.stdout + resumed.stderr)
