"""Token classification fine-tuning end to end (tiny model, synthetic NER in CoNLL): it learns,
eval_results.json's entity F1 is seqeval's on the saved predictions (dev and test), long
sentences are windowed with every word scored, and bad input is refused before anything is
written."""

import json
import os

import numpy as np
import pytest

from roberta_tf.finetuning import finetuned_dir, sweep_runner
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.tagging import tag_features, tag_read, tag_scores, tag_write
from tests import finetune_fixtures as fx
from tests.harness import call_module


@pytest.fixture(scope="module")
def run(tmp_path_factory, hf_tiny_dir):
  root = tmp_path_factory.mktemp("tagging")
  paths = {"pretrained": fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained"))}
  for split, n, seed in (("train", 96, 0), ("dev", 32, 1), ("test", 24, 2)):
    paths[split] = fx.write_conll(str(root / f"{split}.conll"), fx.ner_sentences(n, seed))
  # max_seq_len 16 cuts the longer sentences (up to 13 words, more pieces) into windows.
  cfg = FinetuneConfig.from_dict(dict(
      task="token_classification", model_dir=str(root / "out"), train_file=paths["train"],
      eval_file=paths["dev"], test_file=paths["test"], init_from=paths["pretrained"],
      max_seq_len=16, doc_stride=6, batch_size=16, epochs=3, learning_rate=2e-3, seeds=1))
  return paths, cfg, sweep_runner.run_sweep(cfg)


def test_it_learns_and_reports_seqeval_metrics(run):
  _, cfg, results = run
  assert results["metric"] == "f1"
  assert results["f1"] > 0.5 and results["test"]["f1"] > 0.5, results
  names = tag_scores.metric_names(("B-PER", "O", "B-ORG", "I-ORG", "B-LOC", "I-LOC"), "IOB2")
  assert set(results["test"]) == set(names) and set(names) <= set(results)
  saved = json.loads(open(os.path.join(cfg.model.model_dir, "config.json"),
                          encoding="utf-8").read())
  assert saved["task"]["labels"] == ["B-PER", "O", "B-ORG", "I-ORG", "B-LOC", "I-LOC"]
  assert saved["task"]["tag_scheme"] == "IOB2"
  assert results["runs"][0]["test"] == results["test"]


@pytest.mark.parametrize("name, key", [("predictions.conll", None), ("test_predictions.conll",
                                                                      "test")])
def test_seqeval_on_the_saved_predictions_gives_the_reported_f1(run, name, key):
  seqeval = pytest.importorskip("seqeval.metrics")
  paths, cfg, results = run
  gold, predicted = tag_write.read_predictions(os.path.join(cfg.model.model_dir, name))
  source = tag_read.read_tagged(paths["test" if key else "dev"])
  assert gold == [list(s.tags) for s in source]  # every word of every sentence, in order
  reported = results[key] if key else results
  assert seqeval.f1_score(gold, predicted) == reported["f1"]
  assert seqeval.accuracy_score(gold, predicted) == reported["accuracy"]


def test_windowed_sentences_are_scored_word_for_word(run):
  _, cfg, _ = run
  gold, predicted = tag_write.read_predictions(os.path.join(cfg.model.model_dir,
                                                            "predictions.conll"))
  assert [len(g) for g in gold] == [len(p) for p in predicted]
  words = [s.words for s in tag_read.read_tagged(cfg.eval_file)]
  pieces = tag_features.encode_words(finetuned_dir.load_tokenizer(cfg.model.init_from), words)
  lengths = np.asarray([sum(len(w) for w in s) for s in pieces])
  assert lengths.max() > cfg.data.max_seq_len - 2 >= lengths.min()  # some needed windows


def test_binary_refuses_an_unknown_dev_tag_and_writes_nothing(run, tmp_path):
  paths, _, _ = run
  dev = tmp_path / "dev.conll"
  dev.write_text("Bob B-PER\nsmiled O\n\nin O\nOslo B-GPE\n", encoding="utf-8")
  out = tmp_path / "out"
  proc = call_module("roberta_tf.finetune", "--task=token_classification",
                     f"--init_from={paths['pretrained']}", f"--train_file={paths['train']}",
                     f"--eval_file={dev}", f"--model_dir={out}", "--epochs=1", "--seeds=1")
  assert proc.returncode == 1
  assert f"{dev}:5: tag 'B-GPE' is not one of the 6 tags" in proc.stderr
  assert not os.path.exists(out)


def test_test_file_is_refused_for_other_tasks(run, tmp_path):
  paths, _, _ = run
  proc = call_module("roberta_tf.finetune", "--task=classification",
                     f"--init_from={paths['pretrained']}", f"--train_file={paths['train']}",
                     f"--eval_file={paths['dev']}", f"--test_file={paths['test']}",
                     f"--model_dir={tmp_path / 'out'}")
  assert proc.returncode != 0
  assert "--test_file is read by --task=token_classification only" in proc.stderr
