"""Continued pretraining with a grown vocabulary and a longer position table (issue 44).

Units: the grown rows (mean of the old pieces, or N(0, 0.02)), the Longformer-style position
rows, and that the old logits do not move. End to end, from an imported HF checkpoint (the tiny
fixture, vocabulary not trained here) and a domain corpus: `train_tokenizer --extend_from`,
shards of the grown vocabulary, `train --init_from` (the first update at learning rate 0: the
checkpoint is the grown initialisation itself), a longer second phase in the same model dir, and
the exports (`--to_hf`: transformers' fill-mask pipeline gives our SavedModel's top-5 where
torch + transformers are installed; `--to_keras_hub_preset`: keras-hub loads it).
"""

import importlib.util
import json
import os
import shutil
import types

import numpy as np
import pytest
import tensorflow as tf

from data_prep import train_tokenizer
from data_prep.vocab_settings import VocabSettings
from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.data import dataset_info
from roberta_tf.models import growth, registry
from roberta_tf.models.roberta import position_growth
from roberta_tf.pretraining import mlm_evaluation, model_dir_setup, vocab_checks
from roberta_tf.serving import mlm_export
from roberta_tf.tokenization import vocab_files, vocab_growth
from roberta_tf.tokenization.vocab_files import paths as vocab_paths
from tests.conftest import HF_TINY
from tests.domain_text import domain_lines, write_domain_corpus
from tests.harness import call_module, module_env, run_script
from tests.test_tokenizer import hf_tokenizer
from tests.test_vocab_extension import swapped_vocabulary

HAVE_HF = all(importlib.util.find_spec(m) for m in ("transformers", "torch"))
ADD = 40


@pytest.fixture(scope="module")
def source():
  """The imported HF checkpoint (8000 ids, <mask> = 4, 66 positions), as a pretrainer."""
  return registry.load_hf(HF_TINY)


@pytest.fixture(scope="module")
def grown_vocab(tmp_path_factory):
  root = tmp_path_factory.mktemp("continued_vocab")
  corpus_path = write_domain_corpus(root / "domain.txt", count=300)
  train_tokenizer.extend(VocabSettings(input=corpus_path, extend_from=HF_TINY, add_tokens=ADD,
                                       output_dir=str(root / "vocab"), progress=False))
  return corpus_path, str(root / "vocab")


def _old_ids(rng, shape, vocab_size=8000):
  ids = rng.integers(5, vocab_size, size=shape).astype(np.int32)
  ids[:, 0], ids[:, -1] = 0, 2
  return ids


def test_grown_vocabulary_rows_and_old_logits(source, grown_vocab):
  plan = vocab_growth.plan(HF_TINY, grown_vocab[1])
  assert (plan.old_size, plan.new_size) == (8000, 8000 + ADD)
  target = models.RobertaPretrainer(source.config.replace(vocab_size=plan.new_size))
  assert growth.copy_grown(source, target, plan) == {"vocab_size": (8000, 8000 + ADD)}
  old_table = source.encoder.get_layer("embeddings").token_embedding.embeddings.numpy()
  new_table = target.encoder.get_layer("embeddings").token_embedding.embeddings.numpy()
  old_bias, new_bias = source.mlm_head.output_bias.numpy(), target.mlm_head.output_bias.numpy()
  np.testing.assert_array_equal(new_table[:8000], old_table)
  for k, pieces in enumerate(plan.pieces):
    np.testing.assert_allclose(new_table[8000 + k], old_table[list(pieces)].mean(0), atol=1e-7)
    np.testing.assert_allclose(new_bias[8000 + k], old_bias[list(pieces)].mean(), atol=1e-7)
  ids = _old_ids(np.random.default_rng(0), (3, 40))
  mask = np.ones_like(ids)
  want = source.full_logits(ids, mask).numpy()
  got = target.full_logits(ids, mask).numpy()
  assert got.shape == want.shape[:2] + (8000 + ADD,)
  np.testing.assert_allclose(got[..., :8000], want, atol=1e-5, rtol=0)
  # A grown text holds new ids, and the grown model takes them.
  hf = hf_tokenizer(*vocab_paths(grown_vocab[1]))
  tokens = [e.ids for e in hf.encode_batch(domain_lines(4, seed=3))]
  assert max(max(row) for row in tokens) >= 8000
  padded = np.array([row[:20] for row in tokens if len(row) >= 20], np.int32)
  assert np.isfinite(target.full_logits(padded, np.ones_like(padded)).numpy()).all()

  normal = models.RobertaPretrainer(source.config.replace(vocab_size=plan.new_size))
  growth.copy_grown(source, normal, plan, new_token_init="normal", seed=1)
  rows = normal.encoder.get_layer("embeddings").token_embedding.embeddings.numpy()[8000:]
  assert 0.015 < rows.std() < 0.025 and abs(rows.mean()) < 0.005
  assert not normal.mlm_head.output_bias.numpy()[8000:].any()


def test_position_table_grows_like_longformer(source):
  old = np.arange(66 * 2, dtype=np.float32).reshape(66, 2)
  new = position_growth.grown_positions(old, 200, pad_id=1)
  np.testing.assert_array_equal(new[:66], old)
  np.testing.assert_array_equal(new[66:130], old[2:66])     # the learned rows, tiled
  np.testing.assert_array_equal(new[130:194], old[2:66])
  np.testing.assert_array_equal(new[194:], old[2:8])
  with pytest.raises(ValueError, match="cannot shrink"):
    position_growth.grown_positions(old, 10, pad_id=1)

  target = models.RobertaPretrainer(source.config.replace(max_seq_len=256))
  assert growth.copy_grown(source, target) == {"max_positions": (66, 258)}
  rng = np.random.default_rng(1)
  ids = _old_ids(rng, (2, 64))
  mask = np.ones_like(ids)
  mask[1, 40:] = 0  # padding: positions count real tokens only
  np.testing.assert_allclose(target.full_logits(ids, mask).numpy(),
                             source.full_logits(ids, mask).numpy(), atol=1e-5, rtol=0)
  long_ids = _old_ids(rng, (1, 200))
  assert np.isfinite(target.full_logits(long_ids, np.ones_like(long_ids)).numpy()).all()
  with pytest.raises(growth.GrowthError, match="hidden_size"):
    growth.check_growable(source.config, source.config.replace(hidden_size=128, num_heads=4))
  with pytest.raises(growth.GrowthError, match="needs the vocabulary's growth plan"):
    growth.copy_grown(source, models.RobertaPretrainer(source.config.replace(vocab_size=8001)))


def test_resume_refuses_a_longer_table_the_shards_do_not_need(tmp_path, source):
  model_dir = str(tmp_path / "m")
  models.save(model_dir, source)
  longer = source.config.replace(max_seq_len=128)
  with pytest.raises(ValueError, match="max_positions: 66 there, 130 now"):
    model_dir_setup.check_resumable(model_dir, longer, shards_max_seq_len=64)
  model_dir_setup.check_resumable(model_dir, longer, shards_max_seq_len=128)  # a longer phase
  assert model_dir_setup.shorter_checkpoint_config(model_dir, longer) == source.config
  assert model_dir_setup.shorter_checkpoint_config(model_dir, source.config) is None
  with pytest.raises(ValueError, match="--init_from=.* --model_dir=NEW"):
    model_dir_setup.check_resumable(model_dir, source.config.replace(vocab_size=8040))


def _shards_of(vocab_dir, shards_dir) -> tuple[str, dict]:
  """A stand-in shard directory: `vocab_dir`'s files beside a dataset_info whose "vocab" records
  them (all the vocabulary checks read)."""
  os.makedirs(shards_dir)
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(vocab_dir, name), shards_dir)
  known = vocab_files.VocabId.of_dir(str(shards_dir))
  return str(shards_dir), {"vocab": known.record()}


def test_init_from_and_resume_meet_only_their_vocabulary(tmp_path, source, grown_vocab):
  """--init_from takes the model's vocabulary or one grown from it (the plan, once); a resume
  takes only the model dir's own; anything else is one line naming both flags."""
  model_dir = str(tmp_path / "m")
  models.save(model_dir, source, files={n: os.path.join(HF_TINY, n) for n in vocab_files.FILES})
  same = _shards_of(HF_TINY, tmp_path / "same")
  grown = _shards_of(grown_vocab[1], tmp_path / "grown")
  other = _shards_of(swapped_vocabulary(HF_TINY, tmp_path / "swapped"), tmp_path / "other")

  def cfg(shards, overwrite=False):  # what vocab_checks reads of a TrainConfig, by group
    model = types.SimpleNamespace(init_from=model_dir, model_dir=model_dir, overwrite=overwrite)
    return types.SimpleNamespace(model=model, train_data=shards)
  assert vocab_checks.init_from_plan(cfg(same[0]), same[1], 8000) is None
  assert vocab_checks.init_from_plan(cfg(grown[0]), grown[1], 8000).new_size == 8000 + ADD
  vocab_checks.check_resume(cfg(same[0]), same[1])
  vocab_checks.check_resume(cfg(other[0], overwrite=True), other[1])  # nothing is resumed
  refusals = [(vocab_checks.init_from_plan, other, "--init_from", "does not extend"),
              (vocab_checks.check_resume, other, "--model_dir", "2 of the 8000 ids"),
              (vocab_checks.check_resume, grown, "--model_dir", f"extends it with {ADD}")]
  for check, (shards, info), flag, detail in refusals:
    with pytest.raises(vocab_growth.VocabGrowthError) as error:
      check(cfg(shards), info, *([8000] if flag == "--init_from" else []))
    message = str(error.value)
    assert "\n" not in message and detail in message, message
    assert f"--train_data={shards!r}" in message and f"{flag}={model_dir!r}" in message
  with open(os.path.join(model_dir, "vocab.json"), encoding="utf-8") as f:
    assert len(json.load(f)) == 8000  # the refused resume replaced nothing


def _eval_shards(vocab_dir, shards_dir, max_seq_len=64, split="validation") -> str:
  """`_shards_of` with a dataset_info.json on disk listing one (empty) shard of `split`."""
  path, info = _shards_of(vocab_dir, shards_dir)
  open(os.path.join(path, "v.tfrecord"), "wb").close()
  info.update(format_version=1, special_ids={}, max_seq_len=max_seq_len, packing="full_sentences",
              splits={split: {"shards": [{"file": "v.tfrecord"}]}})
  with open(os.path.join(path, "dataset_info.json"), "w", encoding="utf-8") as f:
    json.dump(info, f)
  return path


def test_eval_data_is_checked_before_anything_is_written(tmp_path, source):
  """--eval_data of another vocabulary than --train_data's (same size), of longer sequences or
  without a validation split: one line before the model dir is touched (the eval pipeline
  found the first only by size, and all of them after config.json was written)."""
  train = _shards_of(HF_TINY, tmp_path / "train")
  cfg = lambda eval_data, length=64: types.SimpleNamespace(  # noqa: E731
      train_data=train[0], eval_data=eval_data, data=types.SimpleNamespace(max_seq_len=length))
  vocab_checks.check_eval_data(cfg(""), train[1], source.config)
  vocab_checks.check_eval_data(cfg(_eval_shards(HF_TINY, tmp_path / "same")), train[1],
                               source.config)
  other = _eval_shards(swapped_vocabulary(HF_TINY, tmp_path / "swapped"), tmp_path / "other")
  with pytest.raises(vocab_growth.VocabGrowthError) as error:
    vocab_checks.check_eval_data(cfg(other), train[1], source.config)
  message = str(error.value)
  assert "\n" not in message and "2 of the 8000 ids" in message, message
  assert f"--eval_data={other!r}" in message and f"--train_data={train[0]!r}" in message
  # `evaluate --eval_data`: the same refusal against the model dir's vocabulary, before loading.
  model_dir = _shards_of(HF_TINY, tmp_path / "model")[0]  # its vocab files: all the check reads
  with pytest.raises(vocab_growth.VocabGrowthError, match=f"--eval_data={other!r} .* than "
                     f"--model_dir={model_dir!r} .*2 of the 8000 ids"):
    mlm_evaluation.evaluate_checkpoint(model_dir, other)
  for shards, length, problem in (
      (_eval_shards(HF_TINY, tmp_path / "long", max_seq_len=128), 128, "position table"),
      (_eval_shards(HF_TINY, tmp_path / "long2", max_seq_len=64), 32, "--max_seq_len=32"),
      (_eval_shards(HF_TINY, tmp_path / "train_only", split="train"), 64, "no 'validation'")):
    with pytest.raises(dataset_info.DatasetInfoError, match=problem):
      vocab_checks.check_eval_data(cfg(shards, length), train[1], source.config)


def test_growth_reads_urls(source, grown_vocab, tmp_path):
  """The growth plan and the checkpoint's table size on ram:// (the storage convention)."""
  root = "ram://continued_pretraining_test"
  for name in ("vocab.json", "merges.txt"):
    files.copy(os.path.join(HF_TINY, name), f"{root}/old/{name}")
    files.copy(os.path.join(grown_vocab[1], name), f"{root}/new/{name}")
  assert vocab_growth.plan(f"{root}/old", f"{root}/new") == vocab_growth.plan(HF_TINY,
                                                                               grown_vocab[1])
  models.save(f"{root}/model", source)
  longer = source.config.replace(max_seq_len=128)
  assert model_dir_setup.shorter_checkpoint_config(f"{root}/model", longer) == source.config
  assert not os.path.exists("ram:")


def _train(model_dir, shards, *extra):
  out = call_module("roberta_tf.train", f"--train_data={shards}", f"--model_dir={model_dir}",
                    "--batch_size=8", "--warmup_steps=1", "--log_every=1",
                    "--checkpoint_every=100", "--shuffle_buffer=0", *extra)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stderr + out.stdout


@pytest.mark.slow
def test_import_grow_continue_longer_export(tmp_path, grown_vocab, source):
  corpus_path, vocab_dir = grown_vocab
  src = str(tmp_path / "imported")
  out = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={HF_TINY}", f"--model_dir={src}")
  assert out.returncode == 0, out.stderr
  shards = {}
  for length in (64, 128):
    shards[length] = str(tmp_path / f"shards{length}")
    out = call_module("data_prep.build_shards", f"--input={corpus_path}",
                      f"--vocab_dir={vocab_dir}", f"--output_dir={shards[length]}",
                      f"--max_seq_len={length}", "--num_shards=1", "--validation_fraction=0",
                      "--noprogress")
    assert out.returncode == 0, out.stderr
  run = str(tmp_path / "run")
  # Phase 1: the single update's learning rate is 0 (warmup), so ckpt-1 is the grown init.
  log = _train(run, shards[64], f"--init_from={src}", "--max_seq_len=64", "--train_steps=1")
  assert "grown: vocabulary 8000 -> 8040 tokens (new rows: --new_token_init=mean)" in log
  grown = models.load(run)
  assert (grown.config.vocab_size, grown.config.max_positions) == (8040, 66)
  ids = _old_ids(np.random.default_rng(2), (2, 48))
  np.testing.assert_allclose(grown.full_logits(ids, np.ones_like(ids)).numpy()[..., :8000],
                             source.full_logits(ids, np.ones_like(ids)).numpy(), atol=1e-5,
                             rtol=0)
  with open(os.path.join(run, "vocab.json"), encoding="utf-8") as f:
    assert len(json.load(f)) == 8040  # the grown vocabulary travels with the model
  # Phase 2: phase 1's command with 128-token shards, --max_seq_len=128 and more steps, in the
  # same model dir: the table grows on resume; the steps go on.
  log = _train(run, shards[128], f"--init_from={src}", "--max_seq_len=128", "--train_steps=2")
  assert "ckpt-1 has a position table of 66 rows: grown to 130" in log
  assert "resumed from" in log and "step 2/2" in log
  longer = models.load(run)
  assert (longer.config.vocab_size, longer.config.max_positions) == (8040, 130)

  # Exports carry the new sizes. A sharper MLM head first (the fixture's random head has
  # near-ties in its top-5, which TF and torch may order differently; tests/test_hf_folder.py).
  gamma = longer.mlm_head.intermediate_layer_norm.gamma
  gamma.assign(gamma * 40.0)
  sharp = str(tmp_path / "sharp")
  models.save(sharp, longer, files={n: os.path.join(run, n) for n in ("vocab.json",
                                                                       "merges.txt")})
  hf_dir, preset = str(tmp_path / "hf"), str(tmp_path / "preset")
  for args in (["--to_hf", f"--hf_dir={hf_dir}"], [f"--to_keras_hub_preset={preset}"]):
    out = call_module("roberta_tf.convert_checkpoint", f"--model_dir={sharp}", *args)
    assert out.returncode == 0, out.stderr[-3000:]
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    hf_config = json.load(f)
  assert (hf_config["vocab_size"], hf_config["max_position_embeddings"]) == (8040, 130)
  import keras_hub  # pylint: disable=import-outside-toplevel
  masked_lm = keras_hub.models.RobertaMaskedLM.from_preset(preset)
  assert masked_lm.backbone.vocabulary_size == 8040
  assert masked_lm.backbone.max_sequence_length == 128
  if HAVE_HF:
    _check_hf_pipeline(hf_dir, mlm_export.export_saved_model(sharp, str(tmp_path / "sm"),
                                                             top_k=5))


_HF = r"""
import json, sys
from transformers import pipeline
fill = pipeline("fill-mask", model=sys.argv[1], top_k=5, device="cpu")
out = []
for text in json.loads(sys.argv[2]):
  out.append([p["token"] for p in fill(text)])
print(json.dumps(out))
"""

TEXTS = ["And Jehoshaphat begat <mask> in the wilderness.", "Thou shalt <mask> unto the Lord.",
         "The <mask> of the tabernacle.", "Which is the <mask> function of the module?"]


def _check_hf_pipeline(hf_dir, export_dir):
  proc = run_script(_HF, hf_dir, json.dumps(TEXTS), timeout=600,
                    env=module_env(CUDA_VISIBLE_DEVICES=""))
  assert proc.returncode == 0, proc.stderr[-3000:]
  hf_top = json.loads(proc.stdout.strip().splitlines()[-1])
  ours = tf.saved_model.load(export_dir).signatures["fill_mask"](text=tf.constant(TEXTS))
  assert ours["top_ids"][:, 0].numpy().tolist() == hf_top
