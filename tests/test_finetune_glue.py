"""GLUE presets: every task's files read in GLUE's real layout (tests/testdata/glue), bad rows
named, the binary's sweep with medians and spreads over seeds, leaderboard prediction files,
and the MNLI -> RTE/STS-B chain of --init_from."""

import json
import os

import numpy as np
import pytest

from roberta_tf import models
from roberta_tf.finetuning import finetuned_dir, glue, predictions, sweep_runner, warm_start
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.problem_data import ProblemDataError
from roberta_tf.finetuning.problem_info import ProblemInfo
from tests import finetune_fixtures as fx
from tests.conftest import TESTDATA
from tests.harness import call_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

GLUE = os.path.join(TESTDATA, "glue")


def _data(name):
  preset = glue.get(name)
  return glue.read_data(preset, os.path.join(GLUE, preset.folder))


def test_every_task_reads_its_real_layout():
  cola = _data("cola")
  assert len(cola.train) == 8 and cola.train[0].label == "1" and cola.train[1].label == "0"
  assert cola.train[0].text_a.startswith("Our friends won't buy") and cola.train[0].text_b is None
  assert cola.train[3].text_a == 'The more he reads, "the less he understands.'  # no quoting
  assert [t[0] for t in cola.test] == ["CoLA.tsv"]
  _, examples, indices = cola.test[0]
  assert indices == ["0", "1", "2"] and examples[1].text_a.startswith('"Which book')
  assert examples[0].label is None

  sst = _data("sst2")
  assert sst.train[0].text_a == "hide new secretions from the parental units "
  assert sst.train[3].text_a.startswith('" the film') and sst.train[3].label == "1"
  assert sst.dev[0][1][1].text_a == 'unflinchingly bleak and desperate " '

  mrpc = _data("mrpc")
  first = mrpc.train[0]
  assert first.label == "1" and first.text_a.startswith("Amrozi accused his brother , whom")
  assert first.text_b.startswith("Referring to him as only \" the witness \"")
  assert mrpc.test[0][1][0].text_b.startswith("Current Chief Operating Officer")

  stsb = _data("stsb")
  assert [e.label for e in stsb.train] == [5.0, 3.8, 3.8, 2.6, 0.0]
  assert stsb.train[0].text_b == "An air plane is taking off."
  assert stsb.test[0][1][1].text_a == 'He said "no".' and stsb.test[0][2] == ["0", "1"]

  qqp = _data("qqp")
  assert qqp.train[1].text_b == 'How do you control your "horniness"?' and qqp.train[1].label == "1"
  assert qqp.test[0][1][0].text_a.startswith("Why am I mentally very lonely?")  # id, q1, q2

  mnli = _data("mnli")
  assert [p for p, _ in mnli.dev] == ["", "mismatched_"]
  assert mnli.train[0].text_b == "Product and geography are what make cream skimming work. "
  assert mnli.train[3].text_b == 'This information belongs to them \u2028and "nobody else.'
  assert [e.label for e in mnli.dev[0][1]] == ["neutral", "entailment", "neutral",
                                               "contradiction"]  # gold_label: the last column
  assert [e.label for e in mnli.dev[1][1]] == ["neutral", "entailment", "entailment"]
  assert [t[0] for t in mnli.test] == ["MNLI-m.tsv", "MNLI-mm.tsv"]
  with_ax = glue.read_data(glue.get("mnli"), os.path.join(GLUE, "MNLI"),
                           diagnostic=os.path.join(GLUE, "diagnostic", "diagnostic.tsv"))
  assert with_ax.test[-1][0] == "AX.tsv" and with_ax.test[-1][1][1].text_a.startswith('The "cat"')

  for name, labels in (("qnli", {"entailment", "not_entailment"}),
                       ("rte", {"entailment", "not_entailment"}), ("wnli", {"0", "1"})):
    data = _data(name)
    assert {e.label for e in data.train} == labels and data.train[0].text_b
    assert data.test[0][0] == f"{glue.get(name).folder}.tsv"


def _write(path, text):
  os.makedirs(os.path.dirname(path), exist_ok=True)
  with open(path, "w", encoding="utf-8") as f:
    f.write(text)
  return path


def test_bad_rows_are_named(tmp_path):
  rte = glue.get("rte")
  short = _write(str(tmp_path / "RTE" / "train.tsv"),
                 "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tentailment\n1\ta\n")
  with pytest.raises(ProblemDataError, match=r"train.tsv:3: 2 tab-separated columns where the "
                                          r"header's 4 are expected"):
    glue.read_file(rte, short, rte.train)
  bad = _write(str(tmp_path / "RTE" / "dev.tsv"),
               "index\tsentence1\tsentence2\tlabel\n0\ta\tb\tneutral\n")
  with pytest.raises(ProblemDataError, match=r"dev.tsv:2: label 'neutral' is not one of GLUE RTE"):
    glue.read_file(rte, bad, rte.train)
  stsb = glue.get("stsb")
  score = _write(str(tmp_path / "STS-B" / "train.tsv"),
                 "index\tgenre\tfilename\tyear\told_index\tsource1\tsource2\tsentence1\t"
                 "sentence2\tscore\n" + "\t".join(["0"] * 7 + ["a", "b", "five"]) + "\n")
  with pytest.raises(ProblemDataError, match=r"train.tsv:2: score 'five' is not a number"):
    glue.read_file(stsb, score, stsb.train)
  with pytest.raises(ProblemDataError, match=r"RTE/train.tsv:1: the header has no column "
                     r"'gold_label' .* is --glue_task=mnli the right task for this folder"):
    glue.read_data(glue.get("mnli"), os.path.join(GLUE, "RTE"))
  with open(os.path.join(GLUE, "MNLI", "train.tsv"), encoding="utf-8") as f:
    _write(str(tmp_path / "MNLI" / "train.tsv"), f.read())
  with pytest.raises(ProblemDataError, match="dev_matched.tsv: no such file"):
    glue.read_data(glue.get("mnli"), str(tmp_path / "MNLI"))


def test_prediction_strings_and_files(tmp_path):
  stsb, mnli = glue.get("stsb"), glue.get("mnli")
  assert predictions.prediction_strings(stsb, np.array([-0.4, 2.34567, 7.0])) == [
      "0.000", "2.346", "5.000"]
  logits = np.array([[0.0, 1.0, 0.0], [3.0, 1.0, 0.0]])
  assert predictions.prediction_strings(mnli, logits) == ["entailment", "contradiction"]
  path = str(tmp_path / "MNLI-m.tsv")
  predictions.write_tsv(path, ["0", "1"], ["entailment", "contradiction"])
  with open(path, encoding="utf-8") as f:
    assert f.read() == "index\tprediction\n0\tentailment\n1\tcontradiction\n"


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, hf_tiny_dir):
  return fx.pretrained_model_dir(hf_tiny_dir, str(tmp_path_factory.mktemp("glue") / "pretrained"))


@pytest.fixture(scope="module")
def mnli(pretrained, tmp_path_factory):
  """A 1-epoch MNLI model with the diagnostic (in process)."""
  cfg = FinetuneConfig.from_dict(dict(
      task="", model_dir=str(tmp_path_factory.mktemp("mnli") / "out"), train_file="",
      eval_file="", glue_task="mnli", data_dir=os.path.join(GLUE, "MNLI"), init_from=pretrained,
      max_seq_len=64, batch_size=4, epochs=1, learning_rate=1e-3, seeds=1,
      glue_diagnostic=os.path.join(GLUE, "diagnostic", "diagnostic.tsv")))
  return cfg, sweep_runner.run_sweep(cfg)


def _read_tsv(path):
  with open(path, encoding="utf-8") as f:
    return [line.split("\t") for line in f.read().split("\n") if line]


def test_mnli_scores_matched_and_mismatched_and_writes_three_files(mnli):
  cfg, results = mnli
  assert results["metric"] == "accuracy"
  for key in ("accuracy", "mismatched_accuracy", "mcc", "mismatched_macro_f1"):
    assert 0 <= results[key] <= 1
  assert results["mismatched_accuracy"] in (0, 1 / 3, 2 / 3, 1)  # 3 mismatched dev examples
  assert results["test_predictions"] == ["MNLI-m.tsv", "MNLI-mm.tsv", "AX.tsv"]
  for name, rows in (("MNLI-m.tsv", 3), ("MNLI-mm.tsv", 2), ("AX.tsv", 2)):
    table = _read_tsv(os.path.join(cfg.model.model_dir, name))
    assert table[0] == ["index", "prediction"] and len(table) == rows + 1
    assert [r[0] for r in table[1:]] == [str(i) for i in range(rows)]
    assert {r[1] for r in table[1:]} <= {"contradiction", "entailment", "neutral"}


def test_init_from_a_finetuned_model_takes_the_encoder_and_a_new_head_when_labels_differ(
    mnli, pretrained):
  cfg, _ = mnli
  model_config = models.read_config(cfg.model.model_dir)
  source, _, source_info = finetuned_dir.load(cfg.model.model_dir)
  rte_info = ProblemInfo("classification", 64, labels=("entailment", "not_entailment"),
                         text_fields=("sentence1", "sentence2"))
  rte = warm_start.warm_started_model(model_config, rte_info, init_from=cfg.model.model_dir)
  for a, b in zip(source.encoder.weights, rte.encoder.weights, strict=True):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  assert rte.head.out_proj.kernel.shape == (128, 2)  # new: 2 classes, not MNLI's 3
  again = warm_start.warm_started_model(model_config, source_info, init_from=cfg.model.model_dir)
  for a, b in zip(source.weights, again.weights, strict=True):  # same labels: the head kept
    np.testing.assert_array_equal(a.numpy(), b.numpy())
  stsb = warm_start.warm_started_model(model_config, ProblemInfo("regression", 64),
                                       init_from=cfg.model.model_dir)
  assert stsb.head.out_proj.kernel.shape == (128, 1)
  assert "a new head (it was classification contradiction/entailment/neutral)" in (
      warm_start.describe(cfg.model.model_dir, rte_info))
  assert "pretrained encoder, new head" in warm_start.describe(pretrained, rte_info)


def test_binary_rte_from_mnli_sweeps_seeds_and_writes_medians_and_predictions(mnli, tmp_path):
  """The paper's chain through the binary: RTE from the MNLI model, 3 seeds, the median kept
  (the choice between configurations by median: test_finetune_sweep.py)."""
  cfg, _ = mnli
  out = tmp_path / "rte"
  args = ["--glue_task=rte", f"--data_dir={os.path.join(GLUE, 'RTE')}",
          f"--init_from={cfg.model.model_dir}", f"--model_dir={out}", "--batch_sizes=4",
          "--learning_rate=1e-3", "--seeds=3", "--epochs=1", "--max_seq_len=64"]
  proc = call_module("roberta_tf.finetune", *args)
  assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
  assert "init from fine-tuned" in proc.stdout and "a new head" in proc.stdout
  with open(out / "eval_results.json", encoding="utf-8") as f:
    results = json.load(f)
  assert [(c["batch_size"], c["seeds"]) for c in results["configs"]] == [(4, [0, 1, 2])]
  best = results["configs"][0]
  assert results["best_config"]["batch_size"] == 4
  values = best["metrics"]["accuracy"]["values"]
  assert results["median"]["accuracy"] == pytest.approx(float(np.median(values)))
  assert results["spread"]["accuracy"]["min"] == min(values)
  assert results["spread"]["accuracy"]["max"] == max(values)
  assert results["kept_run"]["chosen_as"] == "median" and results["accuracy"] == pytest.approx(
      sorted(values, reverse=True)[1])  # the median seed's own run is the kept model
  assert len(results["runs"]) == 3 and os.path.isdir(out / "runs" / "bs4_lr0.001_seed2")
  table = _read_tsv(out / "RTE.tsv")
  assert table[0] == ["index", "prediction"] and [r[0] for r in table[1:]] == ["0", "1"]
  assert {r[1] for r in table[1:]} <= {"entailment", "not_entailment"}
  markdown = (out / "results.md").read_text(encoding="utf-8")
  assert "| 4 | 0.001 |" in markdown
  assert "Best configuration (by median)" in markdown

  clash = call_module("roberta_tf.finetune", args[0], f"--model_dir={tmp_path / 'x'}",
                      "--task=regression")
  assert clash.returncode != 0 and "--glue_task=rte sets --task; leave it out" in clash.stderr


def test_stsb_regression_predictions_are_clipped_scores(pretrained, tmp_path):
  cfg = FinetuneConfig.from_dict(dict(
      task="", model_dir=str(tmp_path / "stsb"), train_file="", eval_file="", glue_task="stsb",
      data_dir=os.path.join(GLUE, "STS-B"), init_from=pretrained, max_seq_len=64, batch_size=4,
      epochs=1, seeds=1))
  results = sweep_runner.run_sweep(cfg)
  assert results["metric"] == "pearson" and {"pearson", "spearman"} <= set(results)
  table = _read_tsv(os.path.join(cfg.model.model_dir, "STS-B.tsv"))
  scores = [float(r[1]) for r in table[1:]]
  assert len(scores) == 2 and all(0.0 <= s <= 5.0 for s in scores)
  assert all(len(r[1].split(".")[1]) == 3 for r in table[1:])
