"""`python -m roberta_tf.train` end to end: console, config.json, TensorBoard, evaluate, flags.

One 12-step tiny run (eval at 0, 6 and 12) is shared by the tests; after it, a run that
starts from a model with NaN weights must stop with a clear error and a non-zero exit.
"""

import json
import os
import re
import subprocess
import time
import urllib.request

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.train_config import TrainConfig
from tests.harness import (
  call_module,
  console_script,
  free_port,
  run_script,
  start_command,
  tiny_config,
)

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

STEPS = 12
TRAIN_SCALARS = {"mlm/loss", "mlm/perplexity", "mlm/accuracy", "optim/learning_rate",
                 "optim/grad_norm", "perf/tokens_per_sec", "perf/examples_per_sec", "perf/mfu",
                 "perf/input_wait_fraction", "optim/skipped_steps"}
EVAL_SCALARS = {"mlm/loss", "mlm/perplexity", "mlm/accuracy"}


def _train(train_shards, model_dir, *extra):
  return call_module("roberta_tf.train", "--flagfile=flags/tiny.flags",
                     f"--train_data={train_shards}", f"--eval_data={train_shards}",
                     f"--model_dir={model_dir}", "--max_seq_len=64", "--batch_size=8",
                     f"--train_steps={STEPS}", "--warmup_steps=2", "--log_every=4",
                     "--eval_every=6", "--eval_steps=0", "--checkpoint_every=6", *extra)


@pytest.fixture(scope="module")
def trained(train_shards, tmp_path_factory):
  """(model_dir, console output) of the shared run, and (exit code, stderr, model_dir) of the
  NaN run."""
  root = tmp_path_factory.mktemp("binary")
  model_dir, nan_init = str(root / "run"), str(root / "nan_init")
  model = models.RobertaPretrainer(tiny_config())
  kernel = next(v for v in model.trainable_variables if v.path.endswith("query/kernel"))
  kernel.assign(tf.fill(kernel.shape, float("nan")))
  models.save(nan_init, model)
  run = _train(train_shards, model_dir)
  nan = _train(train_shards, str(root / "nan_run"), f"--init_from={nan_init}",
               "--max_bad_steps=2")
  assert run.returncode == 0, run.stderr[-3000:]
  return model_dir, run.stdout, (nan.returncode, nan.stderr, str(root / "nan_run"))


def _accumulator(model_dir, run):
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  acc = event_accumulator.EventAccumulator(os.path.join(model_dir, run),
                                           size_guidance={"tensors": 0})
  acc.Reload()
  return acc


def _scalars(model_dir, run):
  """{tag: {step: value}} from model_dir/run's event files (TensorBoard's own reader)."""
  acc = _accumulator(model_dir, run)
  return {tag: {e.step: tf.make_ndarray(e.tensor_proto) for e in acc.Tensors(tag)}
          for tag in acc.Tags()["tensors"]}


@pytest.mark.timeout(300)
def test_console_progress_and_config(trained):
  model_dir, out, _ = trained
  lines = re.findall(r"^step (\d+)/12 \| loss ([\d.]+) \| lr ([\d.e+-]+) \| ([\d,]+) tok/s \| "
                     r"grad_norm [\d.]+ \| ETA \d+:\d\d:\d\d$", out, re.M)
  assert [int(step) for step, *_ in lines] == [4, 8, 12]
  # MFU's peak: measured on this machine in the precision trained in (or cached), said once.
  assert re.search(r"^peak for MFU: float32 2048\^3 matmul \d+ GFLOP/s \(measured (now|earlier "
                   r"on this machine, .+precision\.json)\)$", out, re.M), out[:2000]
  assert all(float(tokens.replace(",", "")) > 0 for *_, tokens in lines)
  assert re.search(r"^eval step 12: loss [\d.]+ \| perplexity [\d.]+ \| mlm_accuracy [\d.]+ \| "
                   r"unigram perplexity [\d.]+ \([\d.]+x unigram\)$", out, re.M)
  with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  assert config["model"]["num_layers"] == 2 and config["model"]["vocab_size"] == 8000
  assert config["training"]["batch_size"] == 8 and config["training"]["train_steps"] == STEPS
  assert config["data"]["vocab"]["size"] == 8000
  assert os.path.isfile(os.path.join(model_dir, "vocab.json"))
  # keep_checkpoints (tiny.flags: 3) of ckpt-6 and ckpt-12.
  assert tf.train.get_checkpoint_state(model_dir).all_model_checkpoint_paths[-2:] == [
      os.path.join(model_dir, "ckpt-6"), os.path.join(model_dir, "ckpt-12")]


@pytest.mark.timeout(300)
def test_event_files_hold_every_scalar_and_the_config(trained):
  model_dir, _, _ = trained
  train, evaluation = _scalars(model_dir, "train"), _scalars(model_dir, "eval")
  assert TRAIN_SCALARS <= set(train)
  for tag in TRAIN_SCALARS:
    assert sorted(train[tag]) == [4, 8, 12], tag
  assert 0 < train["perf/mfu"][12] < 1 and 0 <= train["perf/input_wait_fraction"][12] < 1
  assert train["optim/learning_rate"][4] == pytest.approx(1e-3 * (STEPS - 3) / (STEPS - 2))
  assert train["mlm/perplexity"][12] == pytest.approx(np.exp(train["mlm/loss"][12]), rel=1e-5)
  assert set(evaluation) == EVAL_SCALARS
  assert sorted(evaluation["mlm/loss"]) == [0, 6, 12]
  # The unigram baseline: the same tag in the eval/unigram run, so one chart draws both.
  unigram = _scalars(model_dir, os.path.join("eval", "unigram"))
  assert set(unigram) == {"mlm/perplexity"} and sorted(unigram["mlm/perplexity"]) == [0, 6, 12]
  assert unigram["mlm/perplexity"][12] > 1 and unigram["mlm/perplexity"][12] != evaluation[
      "mlm/perplexity"][12]
  for run_dir, tags in (("train", TRAIN_SCALARS), ("eval", EVAL_SCALARS),
                        (os.path.join("eval", "unigram"), {"mlm/perplexity"})):
    acc = _accumulator(model_dir, run_dir)
    for tag in tags:
      assert len(acc.SummaryMetadata(tag).summary_description) > 20, (run_dir, tag)
  config_text = train["config"][0].item().decode()
  assert '"batch_size": 8' in config_text


@pytest.mark.timeout(300)
def test_evaluate_binary_equals_final_eval(trained):
  model_dir, _, _ = trained
  train_shards = json.load(open(os.path.join(model_dir, "config.json")))["data"]["eval"]
  result = call_module("roberta_tf.evaluate", f"--model_dir={model_dir}",
                       f"--eval_data={train_shards}", "--json")
  assert result.returncode == 0, result.stderr[-3000:]
  metrics = json.loads(result.stdout[result.stdout.index("{"):])
  assert metrics["checkpoint"] == os.path.join(model_dir, f"ckpt-{STEPS}")
  final = _scalars(model_dir, "eval")
  final["unigram_perplexity"] = _scalars(model_dir, os.path.join("eval", "unigram"))[
      "mlm/perplexity"]
  for name, tag in (("loss", "mlm/loss"), ("perplexity", "mlm/perplexity"),
                    ("mlm_accuracy", "mlm/accuracy"), ("unigram_perplexity", "unigram_perplexity")):
    assert metrics[name] == pytest.approx(float(final[tag][STEPS]), rel=1e-5), name


@pytest.mark.timeout(300)
def test_init_from_continues_from_the_trained_weights(trained, tmp_path):
  """A new run --init_from the model dir starts at the trained model's eval (same masks)."""
  model_dir, _, _ = trained
  saved = json.load(open(os.path.join(model_dir, "config.json")))["data"]
  result = pretraining.pretrain(TrainConfig.from_dict(dict(
      model_dir=str(tmp_path), train_data=saved["train"], eval_data=saved["eval"],
      init_from=model_dir, max_seq_len=64, batch_size=8, train_steps=1, warmup_steps=0,
      learning_rate=1e-4, log_every=1)))
  step, start = result.eval_history[0]
  assert step == 0
  assert start["loss"] == pytest.approx(
      float(_scalars(model_dir, "eval")["mlm/loss"][STEPS]), rel=1e-5)


@pytest.mark.timeout(300)
def test_non_finite_weights_stop_the_run_with_an_error(trained):
  _, _, (returncode, stderr, model_dir) = trained
  assert returncode == 1, stderr[-3000:]
  assert re.search(r"^error: 2 steps in a row \(>= --max_bad_steps=2\) had a non-finite loss "
                   r"or gradient", stderr, re.M), stderr[-3000:]
  assert tf.train.latest_checkpoint(model_dir) is None  # nothing non-finite was saved


def _get_json(url, deadline, board):
  """The JSON at url, retried until TensorBoard has loaded something (or the deadline)."""
  while time.time() < deadline:
    try:
      with urllib.request.urlopen(url, timeout=5) as response:
        value = json.loads(response.read())
      if value:
        return value
    except (OSError, ValueError):
      pass
    assert board.poll() is None, "tensorboard exited"
    time.sleep(0.5)
  raise AssertionError(f"no answer from {url}")


@pytest.mark.timeout(120)
def test_tensorboard_serves_grouped_tags_with_descriptions(trained):
  """TensorBoard's own server: tags by group with their descriptions, the train loss, and the
  unigram baseline as a run beside eval on the mlm/perplexity chart."""
  model_dir, _, _ = trained
  port = free_port()
  board = start_command(
      [console_script("tensorboard"), f"--logdir={model_dir}", "--host=localhost",
       f"--port={port}", "--reload_interval=1"],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  base = f"http://localhost:{port}/data/plugin/scalars"
  try:
    deadline = time.time() + 90
    runs = {}
    while time.time() < deadline and not {"train", "eval", "eval/unigram"} <= set(runs):
      runs = _get_json(f"{base}/tags", deadline, board)
    points = _get_json(f"{base}/scalars?run=train&tag=mlm/loss", deadline, board)
    unigram = _get_json(f"{base}/scalars?run=eval/unigram&tag=mlm/perplexity", deadline, board)
  finally:
    board.kill()
    board.wait()
  assert TRAIN_SCALARS <= set(runs["train"]) and set(runs["eval"]) == EVAL_SCALARS
  assert set(runs["eval/unigram"]) == {"mlm/perplexity"}
  assert "unigram" in runs["eval"]["mlm/perplexity"]["description"]
  assert "before clipping" in runs["train"]["optim/grad_norm"]["description"]
  steps = [step for _, step, _ in points]  # [wall_time, step, value]
  expected = _scalars(model_dir, "train")["mlm/loss"]
  assert steps == [4, 8, 12]
  assert [value for *_, value in points] == pytest.approx([float(expected[s]) for s in steps])
  assert [step for _, step, _ in unigram] == [0, 6, 12]


def test_flagfiles_parse_and_every_setting_has_a_flag():
  """Every flagfile resolves to a valid TrainConfig; every TrainConfig field is a flag with help."""
  script = r"""
import glob
from roberta_tf.common import options
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.train import FLAGS  # the binary's flags
for field in options.flag_fields(TrainConfig):  # its groups' options included
  assert field.name in FLAGS, field.name
  assert len(FLAGS[field.name].help) > 15, field.name
for path in sorted(glob.glob("flags/*.flags")):
  FLAGS.unparse_flags()
  FLAGS(["train", f"--flagfile={path}", "--model_dir=m", "--train_data=d"])
  cfg = options.from_flags(TrainConfig, FLAGS)  # as train's main builds it
  cfg.validate()
  print(path, cfg.model.config, cfg.data.batch_size, cfg.data.max_seq_len, cfg.train_steps)
"""
  result = run_script(script, timeout=60)
  assert result.returncode == 0, result.stderr[-3000:]
  names = {os.path.basename(line.split()[0]) for line in result.stdout.splitlines()}
  assert {"tiny.flags", "small.flags", "medium.flags", "base.flags", "large.flags",
          "paper_base.flags", "paper_large.flags", "quickstart.flags"} <= names
  assert "flags/paper_base.flags base 8192 512 500000" in result.stdout
