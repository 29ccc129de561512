"""Model families (models/registry.py): configs, model dirs and HF folders round trip through
the registry for RoBERTa and ModernBERT, and `train --family=modernbert` runs the one training
core: from scratch (loss falls), resumed exactly, continued with --init_from (from a trained
dir, and from the imported HF fixture where build_shards reads its tokenizer.json), exported
with --to_hf (HF's logits equal ours where transformers is installed)."""

import importlib.util
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.models import flops, registry
from roberta_tf.models.modernbert import modernbert_config
from roberta_tf.models.roberta.config import ConfigError
from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.train_config import TrainConfig
from tests.conftest import TESTDATA
from tests.harness import call_module, crashed_copy, module_env, run_script, tiny_config
from tests.test_train_resume import _checkpoint, _train_loss

FIXTURE = os.path.join(TESTDATA, "modernbert_tiny")
HAVE_HF = all(importlib.util.find_spec(m) for m in ("transformers", "torch"))
STEPS = 6


def _mb_config(**overrides):
  return modernbert_config.preset("tiny", **{
      "vocab_size": 300, "hidden_size": 32, "num_heads": 2, "intermediate_size": 48,
      "pad_id": 1, "bos_id": 0, "eos_id": 2, "max_seq_len": 64, "local_attention": 8,
      **overrides})


def test_a_config_dict_names_its_family_and_absent_is_roberta():
  roberta, modern = tiny_config(), _mb_config()
  assert "family" not in roberta.to_dict()  # old readers read new RoBERTa dirs
  assert registry.config_from_dict(roberta.to_dict()) == roberta
  assert registry.config_from_dict({**roberta.to_dict(), "family": "roberta"}) == roberta
  assert modern.to_dict()["family"] == "modernbert"
  assert registry.config_from_dict(modern.to_dict()) == modern
  assert [registry.family_of(c).name for c in (roberta, modern)] == ["roberta", "modernbert"]
  with pytest.raises(ConfigError, match=r"unknown model family 'bert'; known: \['roberta', "):
    registry.config_from_dict({"family": "bert"})


def test_model_options_are_checked_by_the_familys_config():
  config = registry.with_options(tiny_config(), ["pre_layer_norm=true", "use_bias=false",
                                                 "type_vocab_size=0"])
  assert (config.pre_layer_norm, config.use_bias, config.type_vocab_size) == (True, False, 0)
  modern = registry.with_options(_mb_config(), ["local_attention=16", "global_rope_theta=1e4"])
  assert (modern.local_attention, modern.global_rope_theta) == (16, 1e4)
  with pytest.raises(ConfigError, match=r"modernbert configs have no field 'gated_ffn'; "
                     r"fields: attention_bias, attention_dropout, "):
    registry.with_options(_mb_config(), ["gated_ffn=true"])
  with pytest.raises(ConfigError, match="expected true or false"):
    registry.with_options(tiny_config(), ["use_bias=maybe"])
  with pytest.raises(ConfigError, match="expected field=value"):
    registry.with_options(tiny_config(), ["use_bias"])


def test_presets_take_max_seq_len_in_both_families():
  assert registry.preset("roberta", "tiny", max_seq_len=100).max_positions == 102
  assert registry.preset("modernbert", "tiny", max_seq_len=100).max_seq_len == 100


@pytest.mark.parametrize("config", [tiny_config(vocab_size=300), _mb_config()],
                         ids=["roberta", "modernbert"])
def test_model_dirs_round_trip_through_the_registry(config, tmp_path):
  model = registry.build_pretrainer(config)
  assert model.count_params() == registry.count_parameters(config)
  models.save(str(tmp_path / "m"), model)
  again = models.load(str(tmp_path / "m"))
  assert type(again) is type(model) and again.config == config
  assert all(np.array_equal(a.numpy(), b.numpy())
             for a, b in zip(model.weights, again.weights, strict=True))


def test_a_model_dir_written_before_families_loads_with_the_same_logits():
  """tests/testdata/roberta_tf_main_tiny (README there): main's code wrote it before RoBERTa's
  modules moved into models/roberta/; the checkpoint's names are the object graph's, so it
  restores into today's classes and computes what it computed then."""
  path = os.path.join(TESTDATA, "roberta_tf_main_tiny")
  model = models.load(path)
  assert type(model).__name__ == "RobertaPretrainer" and model.config.family == "roberta"
  expected = np.load(os.path.join(path, "expected.npz"))
  ids, mask = expected["input_ids"], expected["padding_mask"]
  positions = np.tile(np.arange(ids.shape[1], dtype=np.int32), (ids.shape[0], 1))
  logits = model({"input_ids": ids, "padding_mask": mask, "mask_positions": positions}).numpy()
  np.testing.assert_allclose(logits, expected["logits"], rtol=0, atol=1e-6)


def test_modernbert_flop_terms_count_local_windows_and_geglu():
  config = _mb_config(num_layers=3, global_attn_every_n_layers=3)
  work = config.flop_terms()
  h, i = config.hidden_size, config.intermediate_size
  assert [layer.window for layer in work.layers] == [None, 8, 8]
  assert work.layers[0].projection_macs == 4 * h * h + 3 * h * i
  assert work.head_macs == h * h + h * config.vocab_size
  s = 64  # a local layer scores at most 9 keys per query, fewer at the ends
  local_pairs = flops.attention_pairs(s, 8)
  assert local_pairs == 9 * s - 2 * (4 + 3 + 2 + 1)
  assert flops.forward_flops(work, seq_len=s, predictions_per_seq=0) == (
      3 * 2 * s * work.layers[0].projection_macs + 4 * h * (s * s + 2 * local_pairs))


def _config(train_shards, model_dir, **overrides):
  return TrainConfig.from_dict(dict(
      family="modernbert", config="tiny", train_data=train_shards, eval_data=train_shards,
      model_dir=model_dir, max_seq_len=64, batch_size=8, train_steps=STEPS, warmup_steps=2,
      learning_rate=1e-3, seed=3, shuffle_buffer=50, log_every=1, checkpoint_every=3,
      eval_every=STEPS, eval_steps=2, keep_checkpoints=5, peak_flops=1e12,
      model_option=("hidden_size=64", "intermediate_size=96", "num_heads=2"), **overrides))


@pytest.fixture(scope="module")
def trained(train_shards, tmp_path_factory):
  """A tiny ModernBERT trained 6 steps from scratch on the RoBERTa-vocabulary test shards."""
  model_dir = str(tmp_path_factory.mktemp("modernbert") / "a")
  result = pretraining.pretrain(_config(train_shards, model_dir))
  return model_dir, result


def test_modernbert_trains_from_scratch_on_any_vocabulary(trained):
  model_dir, result = trained
  assert result.step == STEPS
  doc = json.load(open(os.path.join(model_dir, "config.json"), encoding="utf-8"))
  assert doc["model"]["family"] == "modernbert" and doc["model"]["hidden_size"] == 64
  assert doc["model"]["pad_id"] == 1  # the shards' special ids (dataset_info), not HF's
  assert doc["training"]["mask_rate"] == 0.3  # the family's rate
  assert doc["data"]["eval_mask_rate"] == 0.15  # every family's evaluation
  losses = [_train_loss(model_dir, step) for step in range(1, STEPS + 1)]
  assert all(np.isfinite(losses)) and np.mean(losses[-2:]) < np.mean(losses[:2]) - 0.05, losses


def test_modernbert_resumes_exactly(trained, train_shards, tmp_path):
  a, _ = trained
  b = str(tmp_path / "b")
  crashed_copy(a, b, 3)
  assert pretraining.pretrain(_config(train_shards, b)).step == STEPS
  for step in range(4, STEPS + 1):
    assert abs(_train_loss(a, step) - _train_loss(b, step)) <= 1e-5, step
  expected, actual = _checkpoint(a), _checkpoint(b)
  assert sorted(expected) == sorted(actual)
  for key, value in expected.items():
    np.testing.assert_allclose(actual[key], value, rtol=0, atol=1e-5, err_msg=key)


def test_modernbert_continues_with_init_from_a_new_theta_and_refuses_other_options(
    trained, train_shards, tmp_path):
  """A context extension's shape: --init_from, a longer --max_seq_len and a new global rotary
  theta (--model_option of a phase field), recorded in config.json; architecture fields are
  refused."""
  a, _ = trained
  run = call_module("roberta_tf.train", f"--init_from={a}", f"--train_data={train_shards}",
                    f"--model_dir={tmp_path / 'c'}", "--max_seq_len=128", "--batch_size=8",
                    "--train_steps=2", "--warmup_steps=1", "--log_every=1",
                    "--model_option=global_rope_theta=320000")
  assert run.returncode == 0, run.stderr[-2000:]
  assert f"initialized weights from {a}" in run.stdout
  assert "global_rope_theta 160000.0 -> 320000.0" in run.stdout
  config = models.read_config(str(tmp_path / "c"))
  assert config.family == "modernbert" and config.max_seq_len == 128  # no table: just a bound
  assert config.global_rope_theta == 320000.0 and config.local_rope_theta == 10000.0
  run = call_module("roberta_tf.train", f"--init_from={a}", f"--train_data={train_shards}",
                    f"--model_dir={tmp_path / 'd'}", "--model_option=local_attention=4")
  assert run.returncode != 0
  assert run.stderr.strip().splitlines()[-1].startswith(
      "error: --model_option=local_attention=4: --init_from=")


def test_imported_modernbert_continues_pretraining(tmp_path):
  """convert_checkpoint imports the HF fixture with its tokenizer files; training continues it
  on shards of its own vocabulary (build_shards --vocab_dir=the model dir)."""
  model_dir, shards = str(tmp_path / "m"), str(tmp_path / "shards")
  run = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={FIXTURE}",
                    f"--model_dir={model_dir}")
  assert run.returncode == 0, run.stderr
  assert {"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"} <= set(
      os.listdir(model_dir))
  assert not run.stderr.strip()  # no missing-vocabulary warning: tokenizer.json is one
  run = call_module("data_prep.build_shards",
                    f"--input={os.path.join(TESTDATA, 'python_docs_small.jsonl.gz')}",
                    f"--vocab_dir={model_dir}", f"--output_dir={shards}", "--max_seq_len=64",
                    "--num_shards=1", "--validation_fraction=0.1", "--noprogress")
  assert run.returncode == 0, run.stderr[-2000:]
  run = call_module("roberta_tf.train", f"--init_from={model_dir}", f"--train_data={shards}",
                    f"--model_dir={tmp_path / 'c'}", "--max_seq_len=64", "--batch_size=8",
                    "--train_steps=2", "--warmup_steps=1", "--log_every=1")
  assert run.returncode == 0, run.stderr[-2000:]
  assert f"initialized weights from {model_dir}" in run.stdout


_HF_LOGITS = r"""
import sys
import numpy as np, torch, transformers
model = transformers.AutoModelForMaskedLM.from_pretrained(sys.argv[1], attn_implementation="eager")
ids = np.load(sys.argv[2])
with torch.no_grad():
  logits = model.eval()(input_ids=torch.tensor(ids), attention_mask=torch.ones_like(
      torch.tensor(ids))).logits
np.save(sys.argv[3], logits.numpy())
print(type(model).__name__)
"""


def test_to_hf_of_a_trained_modernbert(trained, tmp_path):
  a, _ = trained
  out = str(tmp_path / "hf")
  run = call_module("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={a}",
                    f"--hf_dir={out}")
  assert run.returncode == 0, run.stderr
  ours = models.load(a)
  back = registry.load_hf(out)
  # HF's config.json lists the layer types and max_position_embeddings (= max_seq_len).
  assert back.config.replace(layer_types=None) == ours.config
  assert all(np.array_equal(x.numpy(), y.numpy())
             for x, y in zip(ours.weights, back.weights, strict=True))
  ids = np.random.default_rng(0).integers(3, ours.config.vocab_size, (2, 40)).astype(np.int32)
  logits = ours.full_logits(tf.constant(ids), tf.ones_like(ids)).numpy()
  if not HAVE_HF:
    return
  np.save(str(tmp_path / "ids.npy"), ids)
  result = run_script(_HF_LOGITS, out, str(tmp_path / "ids.npy"), str(tmp_path / "hf.npy"),
                      env=module_env(), timeout=300)
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip().endswith("ModernBertForMaskedLM")
  np.testing.assert_allclose(np.load(str(tmp_path / "hf.npy")), logits, atol=1e-4, rtol=0)
