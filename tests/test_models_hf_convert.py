"""Hugging Face checkpoint import/export: parity with transformers' outputs, exact key layout."""

import json
import os
import re
import uuid

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.models import registry
from roberta_tf.models.roberta import hf_weights
from roberta_tf.models.roberta.hf_weights import HFCheckpointError
from tests.conftest import REPO
from tests.harness import call_module, tiny_config


@pytest.fixture(scope="module")
def expected(hf_tiny_dir):
  return dict(np.load(os.path.join(hf_tiny_dir, "expected.npz")))


@pytest.fixture(scope="module")
def fixture_tensors(hf_tiny_dir):
  return load_file(os.path.join(hf_tiny_dir, "model.safetensors"))


def _max_abs_on_real_tokens(pretrainer, expected):
  ids = expected["input_ids"].astype(np.int32)
  mask = expected["attention_mask"].astype(np.int32)
  hidden = pretrainer.encoder({"input_ids": ids, "padding_mask": mask})["sequence_output"]
  logits = pretrainer.full_logits(ids, mask)
  real = mask.astype(bool)
  return (np.abs(hidden.numpy() - expected["last_hidden_state"])[real].max(),
          np.abs(logits.numpy() - expected["logits"])[real].max())


def test_import_matches_transformers_outputs(hf_tiny_dir, expected):
  pretrainer = registry.load_hf(hf_tiny_dir)
  assert pretrainer.config.max_seq_len == 64 and pretrainer.config.vocab_size == 8000
  hidden_err, logits_err = _max_abs_on_real_tokens(pretrainer, expected)
  print(f"parity max abs: last_hidden_state {hidden_err:.3g}, logits {logits_err:.3g}")
  assert hidden_err < 1e-4 and logits_err < 1e-4


def _run_cli(*args):
  return call_module("roberta_tf.convert_checkpoint", *args)


@pytest.mark.slow
def test_cli_round_trip(hf_tiny_dir, expected, fixture_tensors, tmp_path):
  model_dir, hf_out = str(tmp_path / "model"), str(tmp_path / "hf")
  result = _run_cli(f"--hf_dir={hf_tiny_dir}", f"--model_dir={model_dir}")
  assert result.returncode == 0, result.stderr
  assert {"config.json", "checkpoint", "vocab.json", "merges.txt"} <= set(os.listdir(model_dir))
  # What the binaries read: load(model_dir) reproduces transformers' outputs.
  hidden_err, logits_err = _max_abs_on_real_tokens(models.load(model_dir), expected)
  assert hidden_err < 1e-4 and logits_err < 1e-4

  result = _run_cli("--to_hf", f"--model_dir={model_dir}", f"--hf_dir={hf_out}")
  assert result.returncode == 0, result.stderr
  exported_path = os.path.join(hf_out, "model.safetensors")
  exported = load_file(exported_path)
  # Exactly the keys, shapes and dtypes that transformers' save_pretrained wrote.
  assert {k: (v.shape, v.dtype) for k, v in exported.items()} == {
      k: (v.shape, v.dtype) for k, v in fixture_tensors.items()}
  with safe_open(exported_path, "np") as f:
    assert f.metadata() == {"format": "pt"}  # transformers refuses files without it.
  for key, value in fixture_tensors.items():  # the token-type row included: ours holds it
    np.testing.assert_array_equal(exported[key], value, err_msg=key)
  with open(os.path.join(hf_out, "config.json")) as f:
    exported_config = json.load(f)
  with open(os.path.join(hf_tiny_dir, "config.json")) as f:
    fixture_config = json.load(f)
  assert set(exported_config) == set(fixture_config) - {"transformers_version"}
  assert {k: v for k, v in exported_config.items() if k != "transformers_version"} == {
      k: v for k, v in fixture_config.items() if k != "transformers_version"}
  # Re-import gives identical weights.
  original, reimported = models.load(model_dir), registry.load_hf(hf_out)
  for a, b in zip(original.weights, reimported.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def _logits(pretrainer, expected):
  ids = expected["input_ids"].astype(np.int32)
  mask = expected["attention_mask"].astype(np.int32)
  return pretrainer.full_logits(ids, mask).numpy()[mask.astype(bool)]


def test_token_type_row_with_and_without_the_table(hf_tiny_dir, expected, fixture_tensors):
  """The HF row held as our own 1-row table (default) or folded into the positions
  (--model_option=type_vocab_size=0, fairseq's shape): same logits, and exact weights back
  either way."""
  row = fixture_tensors[hf_weights.TOKEN_TYPE_KEY]
  assert np.abs(row).max() > 0  # a real, non-zero shared row
  with_table = registry.load_hf(hf_tiny_dir)
  assert with_table.config.type_vocab_size == 1
  table = with_table.encoder.get_layer("embeddings").token_type_embedding.embeddings
  np.testing.assert_array_equal(table.numpy(), row)
  exported = hf_weights.to_hf_tensors(with_table)
  for key, value in fixture_tensors.items():
    np.testing.assert_array_equal(exported[key], value, err_msg=key)

  fairseq = models.RobertaPretrainer(with_table.config.replace(type_vocab_size=0))
  hf_weights.set_from_hf_tensors(fairseq, fixture_tensors)
  reference = _logits(with_table, expected)
  assert np.abs(_logits(fairseq, expected) - reference).max() < 1e-5
  folded = hf_weights.to_hf_tensors(fairseq)  # type row 0, the row inside every position
  np.testing.assert_array_equal(folded[hf_weights.TOKEN_TYPE_KEY], np.zeros_like(row))
  np.testing.assert_array_equal(folded[hf_weights.POSITION_KEY],
                                fixture_tensors[hf_weights.POSITION_KEY] + row[0])
  again = models.RobertaPretrainer(with_table.config)
  hf_weights.set_from_hf_tensors(again, folded)
  assert np.abs(_logits(again, expected) - reference).max() < 1e-5
  back = models.RobertaPretrainer(fairseq.config)
  hf_weights.set_from_hf_tensors(back, folded)
  for a, b in zip(fairseq.weights, back.weights, strict=True):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


@pytest.mark.slow
def test_cli_errors_exit_non_zero(tmp_path):
  result = _run_cli(f"--hf_dir={tmp_path}", f"--model_dir={tmp_path / 'out'}")
  assert result.returncode != 0 and "config.json not found" in result.stderr
  assert not os.path.exists(tmp_path / "out")
  result = _run_cli(f"--hf_dir={tmp_path}")
  assert result.returncode != 0 and "--model_dir is required" in result.stderr


def _broken_copy(hf_tiny_dir, tmp_path, edit):
  """A copy of the fixture checkpoint in tmp_path with `edit` applied to its tensors."""
  tmp_path.mkdir(exist_ok=True)
  tensors = load_file(os.path.join(hf_tiny_dir, "model.safetensors"))
  edit(tensors)
  save_file(tensors, str(tmp_path / "model.safetensors"), metadata={"format": "pt"})
  with open(os.path.join(hf_tiny_dir, "config.json")) as src:
    (tmp_path / "config.json").write_text(src.read())
  return str(tmp_path)


def test_missing_key_is_named(hf_tiny_dir, tmp_path):
  path = _broken_copy(hf_tiny_dir, tmp_path, lambda t: t.pop(
      "roberta.encoder.layer.1.output.dense.bias"))
  with pytest.raises(HFCheckpointError, match=r"missing key 'roberta.encoder.layer.1.output."
                                              r"dense.bias'"):
    registry.load_hf(path)


def test_shape_mismatch_names_key_and_both_shapes(hf_tiny_dir, tmp_path):
  def edit(tensors):
    tensors["roberta.encoder.layer.0.intermediate.dense.weight"] = np.zeros((96, 64), np.float32)
  path = _broken_copy(hf_tiny_dir, tmp_path, edit)
  with pytest.raises(HFCheckpointError, match=r"'roberta.encoder.layer.0.intermediate.dense."
                                              r"weight' has shape \(96, 64\), the model "
                                              r"expects \(128, 64\)"):
    registry.load_hf(path)


def test_unexpected_key_is_named_and_pooler_is_skipped(hf_tiny_dir, tmp_path, expected):
  def edit(tensors):
    tensors["roberta.pooler.dense.weight"] = np.ones((64, 64), np.float32)
    tensors["lm_head.decoder.weight"] = tensors[hf_weights.WORD_KEY]
  pretrainer = registry.load_hf(_broken_copy(hf_tiny_dir, tmp_path / "a", edit))
  assert max(_max_abs_on_real_tokens(pretrainer, expected)) < 1e-4
  path = _broken_copy(hf_tiny_dir, tmp_path / "b",
                      lambda t: t.update({"roberta.encoder.layer.2.output.dense.bias": t[
                          "lm_head.bias"]}))
  with pytest.raises(HFCheckpointError, match="unexpected key 'roberta.encoder.layer.2"):
    registry.load_hf(path)


def test_config_checks(hf_tiny_dir):
  with open(os.path.join(hf_tiny_dir, "config.json")) as f:
    hf_config = json.load(f)
  config = hf_weights.config_from_hf(hf_config)
  assert hf_weights.config_from_hf(hf_weights.config_to_hf(config)) == config
  with pytest.raises(HFCheckpointError, match="hidden_act 'gelu_new'"):
    hf_weights.config_from_hf({**hf_config, "hidden_act": "gelu_new"})
  with pytest.raises(HFCheckpointError, match="missing field 'hidden_size'"):
    hf_weights.config_from_hf({k: v for k, v in hf_config.items() if k != "hidden_size"})


@pytest.mark.parametrize("recipe", [{"pre_layer_norm": True}, {"use_bias": False},
                                    {"pre_layer_norm": True, "use_bias": False}], ids=str)
def test_recipe_options_round_trip_through_hf_files(recipe, tmp_path):
  """Pre-LN is written as HF's roberta-prelayernorm (its keys and config), a bias-free model
  with zero biases; reading the files back gives the same logits (transformers' own reading:
  tests/test_hf_training_parity.py)."""
  import keras  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(0)
  config = tiny_config(vocab_size=300, max_seq_len=30, **recipe)
  ours = models.RobertaPretrainer(config, dtype="float32")
  hf_weights.save_hf(str(tmp_path), ours)
  with open(tmp_path / "config.json") as f:
    written = json.load(f)
  pre = recipe.get("pre_layer_norm", False)
  assert written["model_type"] == ("roberta-prelayernorm" if pre else "roberta")
  tensors = load_file(str(tmp_path / "model.safetensors"))
  root = "roberta_prelayernorm" if pre else "roberta"
  assert all(k.startswith((root + ".", "lm_head.")) for k in tensors)
  if pre:
    assert f"{root}.LayerNorm.weight" in tensors
    assert f"{root}.encoder.layer.0.intermediate.LayerNorm.weight" in tensors
  if not recipe.get("use_bias", True):
    assert not np.any(tensors[f"{root}.encoder.layer.1.output.dense.bias"])
  back = registry.load_hf(str(tmp_path))
  assert back.config.pre_layer_norm == pre
  ids = np.array([[0, 5, 6, 7, 2, 1], [0, 9, 2, 1, 1, 1]], np.int32)
  mask = (ids != 1).astype(np.int32)
  np.testing.assert_allclose(back.full_logits(ids, mask), ours.full_logits(ids, mask), atol=1e-5)


def test_a_gated_ffn_is_refused_naming_the_option(tmp_path):
  model = models.RobertaPretrainer(tiny_config(vocab_size=300, max_seq_len=30, gated_ffn=True))
  with pytest.raises(HFCheckpointError,
                     match=r"gated_ffn \(--model_option=gated_ffn=true, a GEGLU"):
    hf_weights.save_hf(str(tmp_path / "hf"), model)
  assert not os.path.exists(tmp_path / "hf")
  from roberta_tf.models.roberta import keras_hub_weights  # pylint: disable=import-outside-toplevel
  for recipe, name in (({"gated_ffn": True}, "gated_ffn"), ({"pre_layer_norm": True},
                                                             "pre_layer_norm")):
    with pytest.raises(keras_hub_weights.KerasHubWeightsError,
                       match=rf"^{name} \(--model_option={name}=true\)"):
      keras_hub_weights.build_backbone(tiny_config(vocab_size=300, max_seq_len=30, **recipe))


def test_hf_conversions_on_a_url_equal_the_local_ones(hf_tiny_dir, tmp_path):
  """Import from, and --to_hf export to, TF's in-memory ram:// (a URL, as gs://... is): the
  exported folder's files are byte for byte the local export's, and our --hf_dir import of it
  on ram:// gives the local model's weights. Nothing lands in a local `ram:` folder."""
  repo_before = set(os.listdir(REPO))
  root = f"ram://hf-convert-{uuid.uuid4().hex[:8]}"
  j = lambda *p: files.join(root, *p)  # noqa: E731
  local = lambda *p: str(tmp_path.joinpath(*p))  # noqa: E731
  try:
    files.copy_tree(hf_tiny_dir, j("hf_in"))
    results = [_run_cli(*args) for args in (
        (f"--hf_dir={j('hf_in')}", f"--model_dir={j('model')}"),
        ("--to_hf", f"--model_dir={j('model')}", f"--hf_dir={j('hf_out')}"),
        (f"--hf_dir={j('hf_out')}", f"--model_dir={j('again')}"),
        (f"--hf_dir={hf_tiny_dir}", f"--model_dir={local('model')}"),
        ("--to_hf", f"--model_dir={local('model')}", f"--hf_dir={local('hf_out')}"))]
    for result in results:
      assert result.returncode == 0, result.stderr
    assert results[0].stdout == (f"wrote {j('model')}/config.json and checkpoint "
                                 f"{j('model', 'ckpt-0')}\n")
    assert results[1].stdout.startswith(f"wrote {j('hf_out')}/{{config.json,model.safetensors,")
    names = sorted(os.listdir(local("hf_out")))
    assert sorted(files.listdir(j("hf_out"))) == names
    for name in names:
      assert files.read_bytes(j("hf_out", name)) == files.read_bytes(local("hf_out", name)), name
    assert sorted(files.listdir(j("again"))) == sorted(os.listdir(local("model")))
    want = models.load(local("model"))
    for got in (models.load(j("model")), models.load(j("again")), registry.load_hf(
        j("hf_out"))):
      for a, b in zip(want.weights, got.weights, strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    result = _run_cli("--to_hf", f"--model_dir={j('model')}", f"--hf_dir={j('hf_out')}")
    assert result.returncode == 1 and f"{j('hf_out')}/model.safetensors exists" in result.stderr
    result = _run_cli(f"--hf_dir={j('none')}", f"--model_dir={j('m2')}")
    assert result.returncode == 1 and f"{j('none')}/config.json not found" in result.stderr
    assert not files.exists(j("m2"))
  finally:
    files.rmtree(root, ignore_errors=True)
  assert set(os.listdir(REPO)) <= repo_before | {".pytest_cache"}


@pytest.mark.parametrize("flag", ["--hf_dir", "--model_dir", "--checkpoint"])
def test_an_unknown_scheme_is_one_error_line_naming_the_flag(flag, tmp_path):
  given = {"--hf_dir": str(tmp_path / "hf"), "--model_dir": str(tmp_path / "m"),
           "--checkpoint": str(tmp_path / "m" / "ckpt-0")}
  given[flag] = "nosuch://bucket/x"
  result = _run_cli("--to_hf", *(f"{k}={v}" for k, v in given.items()))
  assert result.returncode == 1
  assert re.fullmatch(rf"error: {flag}=nosuch://bucket/x: no file system handles 'nosuch://' "
                      r"here \(registered: .*ram://.*\n", result.stderr), result.stderr
  assert not os.listdir(tmp_path)
