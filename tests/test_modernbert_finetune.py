"""Fine-tuning on a ModernBERT encoder (issue 60 point 6): `finetune --init_from=M` where M is an
imported ModernBERT model dir trains HF ModernBERT's classification head (modernbert.md 1.9),
the fine-tuned dir reloads, its export classifies raw strings with the tokenizer.json inside,
in a fresh process, as the reloaded model does, and `convert_checkpoint --to_hf` writes a
ModernBertForSequenceClassification folder whose logits (transformers', where installed) are
ours."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.finetuning import featurize, finetuned_dir
from roberta_tf.models.modernbert import modernbert_hf_tasks
from roberta_tf.models.modernbert.modernbert_task_heads import ModernBertTaskHead
from roberta_tf.serving import finetuned_export
from tests import finetune_fixtures as fx
from tests import serving_loaders
from tests.conftest import TESTDATA
from tests.harness import call_module

HF_FIXTURE = os.path.join(TESTDATA, "modernbert_tiny")
TEXTS = ["the film was great , I think", "the film was awful , I think", "an [MASK] day"]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
  """The imported model dir, a 2-step fine-tuning run on it with --export_dir, and its paths."""
  root = tmp_path_factory.mktemp("mb_finetune")
  paths = {"pretrained": str(root / "M"), "model_dir": str(root / "F"),
           "export": str(root / "SM")}
  proc = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={HF_FIXTURE}",
                     f"--model_dir={paths['pretrained']}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  for split, n, seed in (("train", 16, 0), ("dev", 8, 1)):
    paths[split] = fx.write_table(str(root / f"{split}.tsv"), fx.sentiment_rows(n, seed))
  proc = call_module(
      "roberta_tf.finetune", "--task=classification", f"--train_file={paths['train']}",
      f"--eval_file={paths['dev']}", "--text_fields=sentence", "--label_field=label",
      f"--init_from={paths['pretrained']}", f"--model_dir={paths['model_dir']}", "--epochs=1",
      "--max_seq_len=32", "--batch_size=8", "--learning_rates=1e-3", "--seeds=1",
      f"--export_dir={paths['export']}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return paths


def _logits(model, tokenizer, texts, max_seq_len=32):
  ids = featurize.build_inputs(tokenizer(tf.constant(texts)), None, max_seq_len,
                               tokenizer.template)
  return model(featurize.to_dense(ids, tokenizer.pad_id), training=False)["logits"].numpy()


def test_finetune_trains_hf_head_on_modernbert_and_the_dir_reloads(run):
  with open(os.path.join(run["model_dir"], "eval_results.json")) as f:
    history = json.load(f)["runs"][0]["history"]
  assert history[-1]["step"] == 2 and np.isfinite(history[-1]["train_loss"])
  model, config, info = finetuned_dir.load(run["model_dir"])
  assert config.family == "modernbert" and list(info.labels) == ["neg", "pos"]
  assert isinstance(model.head, ModernBertTaskHead) and model.head.num_labels == 2
  assert model.head.pooling == config.classifier_pooling
  # The encoder moved away from the imported one (the run trained it), and the head is HF's.
  pretrained = models.load(run["pretrained"])
  moved = [not np.array_equal(a, b) for a, b in zip(
      model.encoder.get_weights(), pretrained.encoder.get_weights(), strict=True)]
  assert any(moved)
  tokenizer = finetuned_dir.load_tokenizer(run["model_dir"])
  logits = _logits(model, tokenizer, TEXTS)
  assert logits.shape == (3, 2) and np.isfinite(logits).all()
  again, _, _ = finetuned_dir.load(run["model_dir"])
  np.testing.assert_array_equal(_logits(again, tokenizer, TEXTS), logits)


def test_export_classifies_raw_strings_in_a_fresh_process(run, tmp_path):
  """The float32 export (finetune --export_dir) as the reloaded model; a bfloat16 one within
  bf16 rounding of it."""
  model, _, info = finetuned_dir.load(run["model_dir"])
  tokenizer = finetuned_dir.load_tokenizer(run["model_dir"])
  probabilities = tf.nn.softmax(_logits(model, tokenizer, TEXTS)).numpy()
  assert any(name == "tokenizer.json" for _, _, names in os.walk(run["export"])
             for name in names)
  bf16 = finetuned_export.export_saved_model(run["model_dir"], str(tmp_path / "bf16"),
                                             precision="bfloat16")
  calls = [("c", "classify", {"text_a": TEXTS})]
  loaded = serving_loaders.loader_runs({run["export"]: calls, bf16: calls},
                                       str(tmp_path / "out.npz"))
  for loader in ("tf2", "tf1"):
    got = serving_loaders.outputs_of(loaded[loader][run["export"]], "c")
    np.testing.assert_allclose(got["probabilities"], probabilities, atol=1e-5, rtol=0)
    assert [s.decode() for s in got["label"]] == [
        info.labels[i] for i in probabilities.argmax(-1)]
    got = serving_loaders.outputs_of(loaded[loader][bf16], "c")
    assert got["probabilities"].dtype == np.float32
    np.testing.assert_allclose(got["probabilities"], probabilities, atol=3e-2, rtol=0)
    assert not np.array_equal(got["probabilities"], probabilities)  # computed in bf16


def test_to_hf_writes_a_sequence_classifier_transformers_loads(run, tmp_path):
  hf_dir = str(tmp_path / "hf")
  proc = call_module("roberta_tf.convert_checkpoint", "--to_hf",
                     f"--model_dir={run['model_dir']}", f"--hf_dir={hf_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  with open(os.path.join(hf_dir, "config.json")) as f:
    hf_config = json.load(f)
  assert hf_config["architectures"] == ["ModernBertForSequenceClassification"]
  assert hf_config["id2label"] == {"0": "neg", "1": "pos"}
  assert os.path.isfile(os.path.join(hf_dir, "tokenizer.json"))
  model, _, _ = finetuned_dir.load(run["model_dir"])
  tokenizer = finetuned_dir.load_tokenizer(run["model_dir"])
  ours = _logits(model, tokenizer, TEXTS)
  # Read back by our HF reader (what CI without torch checks) ...
  back, labels = modernbert_hf_tasks.load_hf_task(hf_dir)
  assert labels == ["neg", "pos"]
  ids = featurize.build_inputs(tokenizer(tf.constant(TEXTS)), None, 32, tokenizer.template)
  dense = featurize.to_dense(ids, tokenizer.pad_id)
  np.testing.assert_allclose(back(dense)["logits"].numpy(), ours, atol=1e-5, rtol=0)
  # ... and by transformers, with its own tokenizer, where installed.
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  hf_tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
  hf_model = transformers.AutoModelForSequenceClassification.from_pretrained(hf_dir).eval()
  batch = hf_tokenizer(TEXTS, padding=True, return_tensors="pt")
  np.testing.assert_array_equal(batch["input_ids"].numpy(), dense["input_ids"].numpy())
  with torch.no_grad():
    theirs = hf_model(**batch).logits.numpy()
  np.testing.assert_allclose(theirs, ours, atol=1e-4, rtol=0)


@pytest.fixture(scope="module")
def tagger(run, tmp_path_factory):
  """A 2-step token-classification run on the same imported ModernBERT dir, with an export."""
  root = tmp_path_factory.mktemp("mb_tagging")
  paths = {"model_dir": str(root / "T"), "export": str(root / "TSM")}
  for split, n, seed in (("train", 16, 0), ("dev", 8, 1)):
    paths[split] = fx.write_conll(str(root / f"{split}.conll"), fx.ner_sentences(n, seed))
  proc = call_module(
      "roberta_tf.finetune", "--task=token_classification", f"--train_file={paths['train']}",
      f"--eval_file={paths['dev']}", f"--init_from={run['pretrained']}",
      f"--model_dir={paths['model_dir']}", "--epochs=1", "--max_seq_len=32", "--batch_size=8",
      "--learning_rates=1e-3", "--seeds=1", f"--export_dir={paths['export']}")
  assert proc.returncode == 0, proc.stderr[-3000:]
  return paths


def test_token_tagging_trains_exports_and_goes_to_hf(tagger, tmp_path):
  model, config, info = finetuned_dir.load(tagger["model_dir"])
  assert isinstance(model.head, ModernBertTaskHead) and model.head.task == "token_classification"
  assert model.head.num_labels == len(info.labels) > 1
  loaded = serving_loaders.loader_runs(
      {tagger["export"]: [("t", "tag", {"text": ["Alice met Bob in Oslo"]})]},
      str(tmp_path / "out.npz"))
  got = serving_loaders.outputs_of(loaded["tf2"][tagger["export"]], "t")
  assert got["num_words"].tolist() == [5]
  assert all(tag.decode() in info.labels for tag in got["word_tags"][0][:5])
  hf_dir = str(tmp_path / "hf")
  proc = call_module("roberta_tf.convert_checkpoint", "--to_hf",
                     f"--model_dir={tagger['model_dir']}", f"--hf_dir={hf_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  back, labels = modernbert_hf_tasks.load_hf_task(hf_dir)
  assert labels == list(info.labels) and back.task == "token_classification"
  tokenizer = finetuned_dir.load_tokenizer(tagger["model_dir"])
  ids = featurize.build_inputs(tokenizer(tf.constant(TEXTS)), None, 32, tokenizer.template)
  dense = featurize.to_dense(ids, tokenizer.pad_id)
  mask = dense["padding_mask"].numpy().astype(bool)
  ours = model(dense, training=False)["logits"].numpy()
  np.testing.assert_allclose(back(dense)["logits"].numpy()[mask], ours[mask], atol=1e-5, rtol=0)
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  hf_model = transformers.AutoModelForTokenClassification.from_pretrained(hf_dir).eval()
  with torch.no_grad():
    theirs = hf_model(input_ids=torch.tensor(dense["input_ids"].numpy()).long(),
                      attention_mask=torch.tensor(mask).long()).logits.numpy()
  np.testing.assert_allclose(theirs[mask], ours[mask], atol=1e-4, rtol=0)
