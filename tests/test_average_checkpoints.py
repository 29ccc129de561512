"""python -m roberta_tf.average_checkpoints (models/checkpoint_average.py): the mean of the
weights of the last N or named checkpoints, as a new model dir that exports, fills masks and
converts to HF; RoBERTa and ModernBERT; bad input is one error line with nothing written."""

import glob
import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.models import checkpoint_files, registry
from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.train_config import TrainConfig
from tests.harness import call_module

pytestmark = pytest.mark.slow  # tiny training runs, an export (see pyproject.toml's markers)

# A tiny ModernBERT (as tests/test_model_families.py trains one).
MODERNBERT = dict(family="modernbert",
                  model_option=("hidden_size=64", "intermediate_size=96", "num_heads=2"))


@pytest.fixture(scope="module")
def trained(train_shards, tmp_path_factory):
  """{family: model dir} of tiny runs of 6 steps with checkpoints at 2, 4 and 6."""
  dirs = {}
  for family, extra in (("roberta", {}), ("modernbert", MODERNBERT)):
    model_dir = str(tmp_path_factory.mktemp("average") / family)
    pretraining.pretrain(TrainConfig.from_dict(dict(
        config="tiny", train_data=train_shards, model_dir=model_dir, max_seq_len=64,
        batch_size=8, train_steps=6, warmup_steps=1, learning_rate=1e-3, seed=3,
        log_every=6, checkpoint_every=2, keep_checkpoints=5, peak_flops=1e12, **extra)))
    dirs[family] = model_dir
  return dirs


def _average(*flags):
  return call_module("roberta_tf.average_checkpoints", *flags)


def _weights(model_dir, checkpoint=None):
  return {w.path: w.numpy() for w in models.load(model_dir, checkpoint=checkpoint).weights}


@pytest.mark.parametrize("family, flag, steps", [
    ("roberta", "--last=3", [2, 4, 6]),
    ("modernbert", "--checkpoints=ckpt-2,ckpt-6", [2, 6]),
])
def test_the_average_is_the_mean_of_the_weights_bit_for_bit(trained, tmp_path, family, flag,
                                                             steps):
  source, out = trained[family], str(tmp_path / "avg")
  run = _average(f"--model_dir={source}", flag, f"--output_dir={out}")
  assert run.returncode == 0, run.stderr
  assert run.stdout.strip() == (
      f"averaged {len(steps)} checkpoints ({', '.join(f'ckpt-{s}' for s in steps)}) into "
      f"{out}/ckpt-{steps[-1]} (weights only, no optimizer state)")
  inputs = [_weights(source, checkpoint_files.prefix_of(source, s)) for s in steps]
  averaged = _weights(out)
  assert sorted(averaged) == sorted(inputs[0])
  for path, value in averaged.items():
    # "Exactly": the float64 mean of the float32 values, rounded once to float32.
    mean = np.mean(np.stack([w[path] for w in inputs]).astype(np.float64), axis=0)
    assert value.dtype == np.float32 and np.array_equal(value, mean.astype(np.float32)), path
  kernel = next(p for p in averaged if p.endswith("kernel"))
  assert not any(np.array_equal(averaged[kernel], w[kernel]) for w in inputs)

  doc = json.load(open(os.path.join(out, "config.json"), encoding="utf-8"))
  assert doc["averaged"]["steps"] == steps and models.read_config(out).family == family
  assert doc["training"] == json.load(open(os.path.join(source, "config.json"),
                                           encoding="utf-8"))["training"]
  # The weights only: no optimizer moments, step or data position.
  names = checkpoint_files.variable_names(checkpoint_files.prefix_of(out, steps[-1]))
  assert all(n.startswith(("model/", "_CHECKPOINTABLE_OBJECT_GRAPH", "save_counter/"))
             for n in names), names
  assert sorted(f for f in os.listdir(out) if not f.startswith("ckpt-")) == [
      "checkpoint", "config.json", "merges.txt", "vocab.json"]


def test_an_averaged_roberta_exports_and_fills_masks(trained, tmp_path):
  out, export = str(tmp_path / "avg"), str(tmp_path / "export")
  assert _average(f"--model_dir={trained['roberta']}", "--last=2",
                  f"--output_dir={out}").returncode == 0
  run = call_module("roberta_tf.export", f"--model_dir={out}", f"--export_dir={export}")
  assert run.returncode == 0, run.stderr
  fill = tf.saved_model.load(export).signatures["fill_mask"]
  result = fill(text=tf.constant(["The <mask> module."]))
  assert result["num_masks"].numpy().tolist() == [1] and result["top_tokens"].shape == (1, 1, 5)
  assert np.all(np.diff(result["top_probs"].numpy()[0, 0]) <= 0)  # ranked


def test_an_averaged_modernbert_converts_to_hf(trained, tmp_path):
  out, hf = str(tmp_path / "avg"), str(tmp_path / "hf")
  assert _average(f"--model_dir={trained['modernbert']}", "--last=2",
                  f"--output_dir={out}").returncode == 0
  run = call_module("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={out}",
                    f"--hf_dir={hf}")
  assert run.returncode == 0, run.stderr
  ours, back = models.load(out), registry.load_hf(hf)
  assert all(np.array_equal(x.numpy(), y.numpy())
             for x, y in zip(ours.weights, back.weights, strict=True))


def _swap_two_ids(model_dir):
  """Another vocabulary of the same size: two tokens' ids swapped in vocab.json."""
  path = os.path.join(model_dir, "vocab.json")
  vocab = json.load(open(path, encoding="utf-8"))
  a, b = list(vocab)[100:102]
  vocab[a], vocab[b] = vocab[b], vocab[a]
  with open(path, "w", encoding="utf-8") as f:
    json.dump(vocab, f)


def test_bad_input_is_one_error_line_and_writes_nothing(trained, tmp_path):
  roberta, modern = trained["roberta"], trained["modernbert"]
  other_vocab = str(tmp_path / "other_vocab")
  shutil.copytree(roberta, other_vocab)
  _swap_two_ids(other_vocab)
  existing = str(tmp_path / "existing")
  os.makedirs(existing)
  open(os.path.join(existing, "keep.txt"), "w", encoding="utf-8").close()
  cases = [
      ((f"--model_dir={roberta}", "--last=4"),
       re.escape(f"--last=4: {roberta} holds 3 checkpoints (ckpt-2, ckpt-4, ckpt-6)")),
      ((f"--model_dir={roberta}",), "pass one of --last=N"),
      ((f"--model_dir={roberta}", "--last=2", "--checkpoints=ckpt-2"), "pass one of --last=N"),
      ((f"--model_dir={roberta}", "--checkpoints=ckpt-2,ckpt-3"),
       "checkpoint '.*ckpt-3' not found"),
      ((f"--model_dir={roberta}", "--checkpoints=ckpt-2,ckpt-2"), "names .*ckpt-2 more than once"),
      ((f"--model_dir={roberta}", f"--checkpoints=ckpt-2,{modern}/ckpt-4"),
       re.escape(f"{modern}/ckpt-4 is of another model than --model_dir={roberta} (family: "
                 "modernbert there, roberta here)")),
      ((f"--model_dir={roberta}", f"--checkpoints=ckpt-2,{other_vocab}/ckpt-4"),
       re.escape(f"{other_vocab}/ckpt-4 was trained with another vocabulary")),
  ]
  out = str(tmp_path / "out")
  for flags, message in cases:
    run = _average(*flags, f"--output_dir={out}")
    lines = run.stderr.strip().splitlines()
    assert run.returncode == 1 and len(lines) == 1, run.stderr
    assert lines[0].startswith("error: ") and re.search(message, lines[0]), lines
  for target, message in ((existing, "exists and is not empty"),
                          (roberta, "is where the checkpoints are")):
    run = _average(f"--model_dir={roberta}", "--last=2", f"--output_dir={target}")
    assert run.returncode == 1 and message in run.stderr and len(run.stderr.splitlines()) == 1
  assert not os.path.exists(out) and not glob.glob(out + ".tmp-*")
  assert os.listdir(existing) == ["keep.txt"]
  assert checkpoint_files.steps_on_disk(roberta) == [2, 4, 6]
