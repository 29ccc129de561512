"""Fine-tuned token classifiers <-> Hugging Face `RobertaForTokenClassification` folders
(convert_checkpoint, finetuning/tagging/hf_tagger.py).

Without transformers: the exported folder's keys, shapes, config.json and tokenizer config; the
import of our own export (identical weights and logits); one-line refusals. With transformers
and torch (requirements-bench.txt): HF loads our export with no missing or unexpected keys and
computes our logits; an HF token classifier imports and tags words exactly as HF does, so both
score the same seqeval F1.
"""

import json
import os
import shutil

import keras
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from roberta_tf.finetuning import finetuned_dir, heads, problem_types
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.tagging import hf_tagger, tag_features, tag_scores
from roberta_tf.models import registry
from roberta_tf.tokenization.vocabulary import roberta_template
from tests import finetune_fixtures as fx
from tests.harness import call_module

LABELS = ("O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG")
SENTENCES = fx.ner_sentences(24, 1)


def _convert(*args):
  return call_module("roberta_tf.convert_checkpoint", *args)


def _one_error_line(result, text):
  assert result.returncode == 1, result.stdout
  lines = result.stderr.strip().splitlines()
  assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], result.stderr


def _write_finetuned(hf_tiny_dir, out, task_type=problem_types.TOKEN_CLASSIFICATION):
  """A fine-tuned model dir as roberta_tf.finetune writes it: the HF fixture's encoder and a
  head with large random weights (so that tags vary from word to word)."""
  keras.utils.set_random_seed(0)
  pretrainer = registry.load_hf(hf_tiny_dir)
  config = pretrainer.config
  labels = LABELS if task_type == problem_types.TOKEN_CLASSIFICATION else ("neg", "pos")
  info = ProblemInfo(task_type, max_seq_len=16, labels=labels, doc_stride=6,
                     tag_scheme="IOB2" if labels == LABELS else "")
  model = heads.FinetuneModel(pretrainer.encoder, task_type, info.num_outputs,
                              dropout=config.dropout)
  rng = np.random.default_rng(0)
  for variable in model.head.weights:
    variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))
  finetuned_dir.write_config(out, config, info, {"task": task_type})
  finetuned_dir.save_checkpoint(out, model, 3)
  finetuned_dir.copy_tokenizer(hf_tiny_dir, out)
  return out


@pytest.fixture(scope="module")
def exported(hf_tiny_dir, tmp_path_factory):
  """(fine-tuned dir, its --to_hf folder, the CLI's stdout)."""
  root = tmp_path_factory.mktemp("hf_tagger")
  tagger = _write_finetuned(hf_tiny_dir, str(root / "tagger"))
  hf_dir = str(root / "hf")
  result = _convert("--to_hf", f"--model_dir={tagger}", f"--hf_dir={hf_dir}")
  assert result.returncode == 0, result.stderr
  return tagger, hf_dir, result.stdout


def _padded(windows, pad_id=1):
  width = max(len(w) for w in windows)
  ids = np.full((len(windows), width), pad_id, np.int32)
  for i, w in enumerate(windows):
    ids[i, :len(w)] = w
  return ids, (ids != pad_id).astype(np.int32)


def test_export_writes_a_token_classifier_folder(exported, hf_tiny_dir):
  tagger, hf_dir, stdout = exported
  assert sorted(os.listdir(hf_dir)) == ["config.json", "merges.txt", "model.safetensors",
                                        "special_tokens_map.json", "tokenizer_config.json",
                                        "vocab.json"]
  assert stdout.startswith(f"wrote {hf_dir}/{{config.json,model.safetensors,")
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    config = json.load(f)
  assert config["architectures"] == ["RobertaForTokenClassification"]
  assert config["num_labels"] == len(LABELS)
  assert config["id2label"] == {str(i): label for i, label in enumerate(LABELS)}
  assert config["label2id"] == {label: i for i, label in enumerate(LABELS)}
  with open(os.path.join(hf_dir, "tokenizer_config.json"), encoding="utf-8") as f:
    assert json.load(f)["add_prefix_space"] is True
  # The encoder's keys are the MLM checkpoint's (hf_weights), with no MLM head and no pooler.
  tensors = load_file(os.path.join(hf_dir, "model.safetensors"))
  mlm = load_file(os.path.join(hf_tiny_dir, "model.safetensors"))
  encoder_keys = {k for k in mlm if k.startswith("roberta.") and "pooler" not in k}
  assert set(tensors) == encoder_keys | {"classifier.weight", "classifier.bias"}
  for key in encoder_keys:
    assert tensors[key].shape == mlm[key].shape, key
  model, _, _ = finetuned_dir.load(tagger)
  np.testing.assert_array_equal(tensors["classifier.weight"],
                                model.head.classifier.kernel.numpy().T)
  np.testing.assert_array_equal(tensors["classifier.bias"], model.head.classifier.bias.numpy())


def test_import_of_our_export_gives_identical_weights(exported, tmp_path):
  tagger, hf_dir, _ = exported
  out = str(tmp_path / "imported")
  result = _convert(f"--hf_dir={hf_dir}", f"--model_dir={out}")
  assert result.returncode == 0, result.stderr
  assert "token_classification model: 7 labels, tag scheme IOB2" in result.stdout
  assert {"config.json", "checkpoint", "vocab.json", "merges.txt"} <= set(os.listdir(out))
  want, want_config, want_info = finetuned_dir.load(tagger)
  got, got_config, got_info = finetuned_dir.load(out)
  assert got_config == want_config
  # The position table's width is what an HF folder keeps of the length (16 was fine-tuning's).
  assert got_info == ProblemInfo(problem_types.TOKEN_CLASSIFICATION, max_seq_len=64,
                                 labels=LABELS, tag_scheme="IOB2")
  for a, b in zip(want.weights, got.weights, strict=True):
    assert a.path == b.path
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)


def test_refusals_are_one_line(hf_tiny_dir, exported, tmp_path):
  _, hf_dir, _ = exported
  classifier = _write_finetuned(hf_tiny_dir, str(tmp_path / "cls"), problem_types.CLASSIFICATION)
  result = _convert("--to_hf", f"--model_dir={classifier}", f"--hf_dir={tmp_path / 'out'}")
  _one_error_line(result, "is a fine-tuned classification model; --to_hf exports")
  assert not os.path.exists(tmp_path / "out")

  sequence = tmp_path / "sequence"
  shutil.copytree(hf_dir, sequence)
  tensors = load_file(str(sequence / "model.safetensors"))
  tensors["classifier.out_proj.weight"] = tensors.pop("classifier.weight")
  save_file(tensors, str(sequence / "model.safetensors"), metadata={"format": "pt"})
  result = _convert(f"--hf_dir={sequence}", f"--model_dir={tmp_path / 'm1'}")
  _one_error_line(result, f"{sequence} is a RobertaForSequenceClassification checkpoint; only")
  config = json.loads((sequence / "config.json").read_text())
  config["architectures"] = ["RobertaForMultipleChoice"]
  (sequence / "config.json").write_text(json.dumps(config))
  save_file(load_file(str(hf_dir + "/model.safetensors")), str(sequence / "model.safetensors"),
            metadata={"format": "pt"})
  result = _convert(f"--hf_dir={sequence}", f"--model_dir={tmp_path / 'm1'}")
  _one_error_line(result, "is a RobertaForMultipleChoice checkpoint")

  labels = tmp_path / "labels"
  shutil.copytree(hf_dir, labels)
  config = json.loads((labels / "config.json").read_text())
  config["id2label"] = {"0": "O", "1": "B-X", "2": "I-X"}
  (labels / "config.json").write_text(json.dumps(config))
  result = _convert(f"--hf_dir={labels}", f"--model_dir={tmp_path / 'm2'}")
  _one_error_line(result, "id2label has ids [0, 1, 2], but the classifier has 7 outputs")
  assert not os.path.exists(tmp_path / "m1") and not os.path.exists(tmp_path / "m2")


@pytest.mark.parametrize("labels, scheme", [
    (LABELS, "IOB2"), (("O", "I-PER", "I-LOC", "B-LOC"), "IOB2"),
    (("O", "B-PER", "I-PER", "E-PER", "S-PER"), "IOBES"), (("O", "U-X", "L-X", "B-X"), "BILOU"),
    (("NOUN", "VERB", "O"), "plain"), (("LABEL_0", "LABEL_1"), "plain"), (("O",), "plain")])
def test_scheme_of_labels(labels, scheme):
  assert hf_tagger.scheme_of_labels(labels) == scheme


def _hf():
  return pytest.importorskip("torch"), pytest.importorskip("transformers")


def test_transformers_loads_our_export_with_our_logits(exported):
  torch, transformers = _hf()
  tagger, hf_dir, _ = exported
  hf_model, loading = transformers.AutoModelForTokenClassification.from_pretrained(
      hf_dir, output_loading_info=True)
  assert type(hf_model).__name__ == "RobertaForTokenClassification"
  assert not any(loading.values()), loading  # missing, unexpected, mismatched keys, errors
  assert hf_model.config.id2label == dict(enumerate(LABELS))
  model, _, _ = finetuned_dir.load(tagger)
  tokenizer = finetuned_dir.load_tokenizer(tagger)
  words = [w for w, _ in SENTENCES]
  pieces = tag_features.encode_words(tokenizer, words)
  ids, mask = _padded([np.concatenate([[0], *p, [2]]) for p in pieces])
  ours = model({"input_ids": ids, "padding_mask": mask})["logits"].numpy()
  with torch.no_grad():
    theirs = hf_model.eval()(input_ids=torch.tensor(ids, dtype=torch.long),
                             attention_mask=torch.tensor(mask)).logits.numpy()
  np.testing.assert_allclose(ours[mask == 1], theirs[mask == 1], atol=1e-5)
  # HF's tokenizer from the folder: each word after a space, the raw text's first one too.
  hf_tokenizer = transformers.AutoTokenizer.from_pretrained(hf_dir)
  encoded = hf_tokenizer(words, is_split_into_words=True, padding=True)["input_ids"]
  assert np.array_equal(np.asarray(encoded), ids)
  assert hf_tokenizer(" ".join(words[0]))["input_ids"] == ids[0][mask[0] == 1].tolist()


def _hf_token_classifier(hf_tiny_dir, hf_dir, torch, transformers):
  """An HF RobertaForTokenClassification (random, seeded; classifier weights spread so that
  tags vary) saved with its tokenizer, as a user's folder would be."""
  config = transformers.RobertaConfig.from_pretrained(
      hf_tiny_dir, id2label=dict(enumerate(LABELS)), label2id={k: i for i, k in enumerate(LABELS)})
  torch.manual_seed(0)
  model = transformers.RobertaForTokenClassification(config).eval()
  with torch.no_grad():
    model.classifier.weight.normal_(0.0, 0.5)
    model.classifier.bias.normal_(0.0, 0.5)
  model.save_pretrained(hf_dir)
  tokenizer = transformers.AutoTokenizer.from_pretrained(hf_tiny_dir, add_prefix_space=True)
  tokenizer.save_pretrained(hf_dir)  # transformers 5: tokenizer.json + tokenizer_config.json
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(hf_tiny_dir, name), hf_dir)
  return model, transformers.AutoTokenizer.from_pretrained(hf_dir)


def _hf_word_tags(model, tokenizer, words, torch):
  """HF's word-level predictions: each word's tag at its first piece (word_ids())."""
  encoded = tokenizer(words, is_split_into_words=True, padding=True, return_tensors="pt")
  with torch.no_grad():
    logits = model(**encoded).logits.numpy()
  tags, margins = [], []
  for i in range(len(words)):
    word_ids = encoded.word_ids(i)
    first = [word_ids.index(w) for w in range(len(words[i]))]
    rows = np.sort(logits[i, first], axis=1)
    margins.append((rows[:, -1] - rows[:, -2]).min())
    tags.append([LABELS[k] for k in logits[i, first].argmax(axis=1)])
  return tags, min(margins)


def test_an_hf_token_classifier_imports_and_scores_the_same_f1(hf_tiny_dir, tmp_path):
  torch, transformers = _hf()
  hf_dir, out = str(tmp_path / "hf"), str(tmp_path / "ours")
  hf_model, hf_tokenizer = _hf_token_classifier(hf_tiny_dir, hf_dir, torch, transformers)
  result = _convert(f"--hf_dir={hf_dir}", f"--model_dir={out}")
  assert result.returncode == 0, result.stderr
  words, gold = [w for w, _ in SENTENCES], [t for _, t in SENTENCES]
  hf_tags, margin = _hf_word_tags(hf_model, hf_tokenizer, words, torch)
  assert margin > 1e-4, "near-ties: the comparison would not test the tags"

  model, config, info = finetuned_dir.load(out)
  assert info.labels == LABELS and info.tag_scheme == "IOB2"
  features = tag_features.featurize_sentences(
      tag_features.encode_words(finetuned_dir.load_tokenizer(out), words), None,
      max_seq_len=info.max_seq_len, doc_stride=info.doc_stride,
      template=roberta_template(config.bos_id, config.eos_id))
  ids, mask = _padded(features.input_ids, config.pad_id)
  logits = model({"input_ids": ids, "padding_mask": mask})["logits"].numpy()
  tag_ids, _ = tag_features.word_predictions(list(logits), features)
  our_tags = [[LABELS[k] for k in sentence] for sentence in tag_ids]
  assert our_tags == hf_tags
  assert len({t for tags in our_tags for t in tags}) > 2  # not one tag everywhere
  ours = tag_scores.score(gold, our_tags, LABELS, info.tag_scheme)
  assert ours == tag_scores.score(gold, hf_tags, LABELS, info.tag_scheme)
