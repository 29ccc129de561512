"""Fine-tuning runs end to end (tiny model, synthetic data): every problem type, the LR sweep,
early stopping, mixed precision (bf16, fp16 with loss scaling), 2-replica mirrored ==
1 replica (via the binary, which also exports), and a run whose files are all on ram:// (TF's
in-memory file system, standing for gs:// and the like) == the same run on local disk."""

import json
import os
import signal
import subprocess
import uuid

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.common import files
from roberta_tf.finetuning import finetuned_dir, problem_loading, run_state, sweep_runner
from roberta_tf.finetuning.events import FineTuningEvents
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.squad import eval as squad_eval
from roberta_tf.training.sigterm import SigtermFlag
from roberta_tf.training.task import TrainingError
from tests import finetune_fixtures as fx
from tests.conftest import REPO
from tests.harness import call_module, module_env, run_module, start_module


@pytest.fixture(scope="module")
def data(tmp_path_factory, hf_tiny_dir):
  root = tmp_path_factory.mktemp("finetune_data")
  paths = {"pretrained": fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained"))}
  for split, n, seed in (("train", 96, 0), ("dev", 32, 1)):
    rows = fx.sentiment_rows(n, seed)
    paths[f"{split}.tsv"] = fx.write_table(str(root / f"{split}.tsv"), rows)
    paths[f"{split}.csv"] = fx.write_table(str(root / f"{split}.csv"), rows)
    paths[f"{split}.race"] = fx.write_race(str(root / f"{split}_race.jsonl"), 3, seed)
    paths[f"{split}.squad"] = fx.write_squad(str(root / f"{split}_squad.json"), 4, seed,
                                             version_2=True)
  return paths


def _config(data, tmp_path, problem_type, **overrides):
  train, dev = {"classification": ("train.tsv", "dev.tsv"), "regression": ("train.csv", "dev.csv"),
                "multiple_choice": ("train.race", "dev.race"),
                "extractive_qa": ("train.squad", "dev.squad")}[problem_type]
  values = dict(task=problem_type, model_dir=str(tmp_path / "out"), train_file=data[train],
                eval_file=data[dev], init_from=data["pretrained"], max_seq_len=48, batch_size=16,
                epochs=2, learning_rate=1e-3, text_fields=("sentence", "sentence2"),
                max_query_len=12, doc_stride=16, max_answer_len=6, seeds=1)
  values.update(overrides)
  return FinetuneConfig.from_dict(values)


def _predict(model, problem):
  return [{k: v.numpy() for k, v in model(batch, training=False).items()}
          for batch in problem.eval_dataset(16)]


@pytest.fixture(scope="module")
def sweep(data, tmp_path_factory):
  """A two-rate sweep on the pair problem (no dropout, so the mirrored run can match it)."""
  cfg = _config(data, tmp_path_factory.mktemp("sweep"), "classification",
                learning_rates=(1e-7, 2e-3), epochs=8, dropout=0.0)
  return cfg, sweep_runner.run_sweep(cfg)


@pytest.mark.slow
def test_classification_sweep_keeps_the_best_lr_and_writes_the_model_dir(data, sweep):
  cfg, results = sweep
  runs = {r["learning_rate"]: r for r in results["runs"]}
  assert sorted(runs) == [1e-7, 2e-3]
  assert results["learning_rate"] == 2e-3  # 1e-7 cannot move the model in 48 steps
  assert runs[2e-3]["metrics"]["accuracy"] > runs[1e-7]["metrics"]["accuracy"]
  assert results["accuracy"] >= 0.9  # the sentiment word decides the label
  assert results["metric"] == "accuracy" and sorted(results["runs"][0]["metrics"]) == [
      "accuracy", "f1", "mcc"]
  history = runs[2e-3]["history"]
  assert [h["epoch"] for h in history] == list(range(1, 9)) and history[-1]["step"] == 8 * 6
  with open(os.path.join(cfg.model.model_dir, "eval_results.json")) as f:
    assert json.load(f)["accuracy"] == results["accuracy"]
  # The model dir reloads (float32) and gives exactly the kept run's dev metrics.
  model, model_config, info = finetuned_dir.load(cfg.model.model_dir)
  assert info.labels == ("neg", "pos") and info.text_fields == ("sentence", "sentence2")
  assert info.max_seq_len == 48 and model_config.max_seq_len == 64
  problem = problem_loading.load_problem(cfg, finetuned_dir.load_tokenizer(data["pretrained"]))
  assert problem.evaluate(_predict(model, problem)).metrics == pytest.approx(runs[2e-3]["metrics"])
  assert os.path.isdir(os.path.join(cfg.model.model_dir, "runs", "bs16_lr1e-07_seed0"))


@pytest.mark.slow
def test_early_stopping_and_no_silent_overwrite(data, tmp_path):
  cfg = _config(data, tmp_path, "classification", learning_rate=1e-9, epochs=5,
                early_stopping_patience=1)
  results = sweep_runner.run_sweep(cfg)
  history = results["runs"][0]["history"]
  # A learning rate of 1e-9 cannot change a prediction: no epoch beats the first, patience 1.
  assert len(history) == 2 and results["epoch"] == 1
  with pytest.raises(ValueError, match="not empty; pass --overwrite"):
    sweep_runner.run_sweep(cfg)


@pytest.mark.slow
def test_regression_from_csv(data, tmp_path):
  cfg = _config(data, tmp_path, "regression", text_fields=("sentence",), label_field="score",
                learning_rate=2e-3, epochs=8)
  results = sweep_runner.run_sweep(cfg)
  assert sorted(results["runs"][0]["metrics"]) == ["mse", "pearson", "spearman"]
  assert results["pearson"] > 0.8 and results["metric"] == "pearson"


@pytest.mark.slow
def test_multiple_choice(data, tmp_path):
  cfg = _config(data, tmp_path, "multiple_choice", epochs=1)
  results = sweep_runner.run_sweep(cfg)
  assert results["metric"] == "accuracy"
  model, _, info = finetuned_dir.load(cfg.model.model_dir)
  assert info.num_choices == 4
  problem = problem_loading.load_problem(cfg, finetuned_dir.load_tokenizer(data["pretrained"]))
  outputs = _predict(model, problem)
  assert outputs[0]["logits"].shape == (12, 4)  # 3 passages x 4 questions, 4 options each
  # The reported accuracy is the saved model's, scored against the file's own answer letters.
  with open(data["dev.race"], encoding="utf-8") as f:
    gold = ["ABCD".index(a) for line in f for a in json.loads(line)["answers"]]
  predicted = np.concatenate([o["logits"] for o in outputs]).argmax(-1)
  assert results["accuracy"] == pytest.approx(np.mean(predicted == np.array(gold)))


@pytest.mark.slow
@pytest.mark.parametrize("null", ["classifier", "span_score"])
def test_extractive_qa_v2_writes_official_predictions(data, tmp_path, null):
  """SQuAD v2 with the paper's answerability classifier (default) or BERT's null span score."""
  cfg = _config(data, tmp_path, "extractive_qa", epochs=1, metric="exact_match",
                squad_v2_null=null)
  results = sweep_runner.run_sweep(cfg)
  model, _, info = finetuned_dir.load(cfg.model.model_dir)
  assert info.answer_classifier == (null == "classifier")
  problem = problem_loading.load_problem(cfg, finetuned_dir.load_tokenizer(data["pretrained"]))
  outputs = _predict(model, problem)
  assert ("answerable_logits" in outputs[0]) == (null == "classifier")
  assert problem.evaluate(outputs).metrics == pytest.approx(
      {k: v for k, v in results.items()
       if k in problem.metric_names() or "total" in k or "thresh" in k})
  for key in ("exact", "f1", "total", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1",
              "best_exact", "best_exact_thresh", "best_f1", "best_f1_thresh"):
    assert key in results, key
  assert results["metric"] == "exact_match"
  with open(os.path.join(cfg.model.model_dir, "predictions.json")) as f:
    predictions = json.load(f)
  with open(data["dev.squad"]) as f:
    gold = {qa["id"]: [a["text"] for a in qa["answers"]]
            for p in json.load(f)["data"][0]["paragraphs"] for qa in p["qas"]}
  assert sorted(predictions) == sorted(gold)
  official = squad_eval.evaluate(gold, predictions, version_2=True)
  assert {k: results[k] for k in official} == pytest.approx(official)
  assert results["NoAns_total"] == 4 and results["HasAns_total"] == 16


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["mixed_bfloat16", "mixed_float16"])
def test_mixed_precision_trains_and_saves_float32(data, tmp_path, precision):
  cfg = _config(data, tmp_path, "classification", precision=precision, epochs=8,
                learning_rate=2e-3)
  results = sweep_runner.run_sweep(cfg)
  assert all(np.isfinite(h["train_loss"]) for h in results["runs"][0]["history"])
  assert results["accuracy"] >= 0.8
  reader = tf.train.load_checkpoint(cfg.model.model_dir)
  dtypes = set(reader.get_variable_to_dtype_map().values()) - {tf.string, tf.int64}
  assert dtypes == {tf.float32}


@pytest.mark.slow
def test_mirrored_two_cpus_matches_one_replica(sweep, tmp_path):
  """The binary under MirroredStrategy on 2 logical CPUs takes the same steps as one replica
  (the sweep's 2e-3 run): each replica divides its loss sum by the GLOBAL example count and
  keras AdamW sums the replicas' gradients, so the update is the global batch mean."""
  cfg, one = sweep
  args = ["--task=classification", f"--init_from={cfg.model.init_from}",
          f"--train_file={cfg.train_file}", f"--eval_file={cfg.eval_file}",
          f"--model_dir={tmp_path / 'two'}", "--text_fields=sentence,sentence2",
          "--max_seq_len=48", "--batch_size=16", "--epochs=8", "--learning_rate=2e-3",
          "--dropout=0", "--strategy=mirrored", "--cpu_replicas=2", "--seeds=1",
          f"--export_dir={tmp_path / 'saved_model'}"]
  proc = run_module("roberta_tf.finetune", *args)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "2 replica(s)" in proc.stdout
  with open(tmp_path / "two" / "eval_results.json") as f:
    two = json.load(f)
  want = next(r for r in one["runs"] if r["learning_rate"] == 2e-3)
  np.testing.assert_allclose([h["train_loss"] for h in two["runs"][0]["history"]],
                             [h["train_loss"] for h in want["history"]], rtol=2e-4)
  assert two["accuracy"] == pytest.approx(want["metrics"]["accuracy"], abs=1 / 32 + 1e-9)
  assert os.path.isfile(tmp_path / "saved_model" / "saved_model.pb")  # --export_dir


@pytest.mark.slow
def test_binary_rejects_bad_input_without_leaving_results(data, tmp_path):
  out = tmp_path / "bad"
  proc = call_module(
      "roberta_tf.finetune", "--task=classification", f"--init_from={data['pretrained']}",
      f"--train_file={data['train.tsv']}", f"--eval_file={data['dev.tsv']}",
      f"--model_dir={out}", "--text_fields=premise")
  assert proc.returncode == 1
  assert "train.tsv:2: no field 'premise' (--text_fields)" in proc.stderr
  assert not os.path.exists(out / "eval_results.json")


def _nan_labels(data, tmp_path, rows_with_nan):
  """The regression training table with `rows_with_nan` scores replaced by NaN."""
  rows = fx.sentiment_rows(96, 0)
  for i in rows_with_nan:
    rows[i]["score"] = "nan"
  return fx.write_table(str(tmp_path / "train_nan.csv"), rows)


def test_a_non_finite_step_is_skipped_like_in_pretraining(data, tmp_path):
  """One NaN label poisons one update: the shared train step skips it (weights and Adam moments
  unchanged) and the run goes on; the epoch's loss is over the applied updates only."""
  cfg = _config(data, tmp_path, "regression", text_fields=("sentence",), label_field="score",
                train_file=_nan_labels(data, tmp_path, [5]), learning_rate=2e-3, epochs=2,
                dropout=0.0)
  results = sweep_runner.run_sweep(cfg)
  history = results["runs"][0]["history"]
  # 96 examples / 16 = 6 updates an epoch; the shuffled NaN row spoils exactly one per epoch.
  assert [h["skipped_steps"] for h in history] == [1, 2]
  assert all(np.isfinite(h["train_loss"]) for h in history)
  assert np.isfinite(results["mse"])


def test_non_finite_steps_in_a_row_stop_the_run(data, tmp_path):
  cfg = _config(data, tmp_path, "regression", text_fields=("sentence",), label_field="score",
                train_file=_nan_labels(data, tmp_path, range(96)), epochs=2, max_bad_steps=3)
  with pytest.raises(TrainingError,
                     match=r"6 updates in a row \(>= --max_bad_steps=3\) had a non-finite"):
    sweep_runner.run_sweep(cfg)
  assert not os.path.exists(os.path.join(cfg.model.model_dir, "eval_results.json"))


@pytest.fixture(scope="module")
def regression_run(data, tmp_path_factory):
  """One epoch (6 updates) of the regression problem, dropout 0, on local disk: the reference of
  the accumulation and ram:// tests."""
  cfg = _config(data, tmp_path_factory.mktemp("acc1"), "regression", text_fields=("sentence",),
                label_field="score", learning_rate=2e-3, epochs=1, dropout=0.0)
  return cfg, sweep_runner.run_sweep(cfg)


def test_accumulation_equals_the_whole_batch(regression_run, tmp_path):
  """batch 16 as 1 x 16 or 4 x 4 micro-batches: the same updates (dropout 0, float32)."""
  cfg, whole = regression_run
  accumulated = sweep_runner.run_sweep(
      cfg.replace(model_dir=str(tmp_path / "acc4"), grad_accum_steps=4))
  np.testing.assert_allclose(accumulated["runs"][0]["history"][0]["train_loss"],
                             whole["runs"][0]["history"][0]["train_loss"], rtol=1e-5)
  np.testing.assert_allclose(accumulated["mse"], whole["mse"], rtol=1e-4)


def _flags(cfg):
  """The binary's flags for a _config(...) of the regression problem."""
  return ["--task=regression", f"--init_from={cfg.model.init_from}",
          f"--train_file={cfg.train_file}", f"--eval_file={cfg.eval_file}",
          f"--model_dir={cfg.model.model_dir}", "--text_fields=sentence",
          "--label_field=score", "--max_seq_len=48", "--batch_size=16",
          f"--epochs={cfg.epochs}", f"--learning_rate={cfg.optimizer.learning_rate}",
          "--dropout=0.0", "--max_query_len=12", "--doc_stride=16", "--max_answer_len=6",
          "--seeds=1"]


def test_a_run_on_ram_equals_local_disk_and_resumes_there(regression_run, monkeypatch):
  """--train_file, --eval_file, --init_from and --model_dir all on ram:// (in this process
  only): a run stopped by a signal mid-epoch saves its state there, the binary (in-process)
  resumes it from there, and the result is the local-disk run's."""
  cfg, want = regression_run
  root = f"ram://finetune_{uuid.uuid4().hex[:8]}"
  files.makedirs(root)
  for name in ("train_file", "eval_file"):
    files.copy(getattr(cfg, name), files.join(root, os.path.basename(getattr(cfg, name))))
  files.copy_tree(cfg.model.init_from, files.join(root, "pretrained"))
  ram = cfg.replace(
      train_file=files.join(root, os.path.basename(cfg.train_file)),
      eval_file=files.join(root, os.path.basename(cfg.eval_file)),
      init_from=files.join(root, "pretrained"), model_dir=files.join(root, "out"))
  # A SIGTERM after update 3 of 6 (its flag raised as the handler would raise it).
  flags, batches = [], FineTuningEvents.batches

  class Flag(SigtermFlag):
    def __enter__(self):
      flags.append(self)
      return super().__enter__()

  def counted_batches(events, step):
    next_batch, taken = batches(events, step), [step]

    def next_counted():
      taken[0] += 1
      if taken[0] == 3:
        flags[-1].raised, flags[-1].name = True, "SIGTERM"
      return next_batch()
    return next_counted

  with monkeypatch.context() as m:
    m.setattr(sweep_runner, "SigtermFlag", Flag)
    m.setattr(FineTuningEvents, "batches", counted_batches)
    stopped = sweep_runner.run_sweep(ram)
  run_dir = files.join(ram.model.model_dir, "runs", stopped["run"])
  assert stopped["stopped_by_signal"]
  saved = files.read_json(files.join(run_dir, run_state.STATE_DIR, run_state.PROGRESS_FILE))
  assert sorted(saved) == ["best_epoch", "best_prefix", "checkpoint", "epoch_loss", "history"]
  assert run_state.RunProgress.from_json(saved).to_json(saved["checkpoint"]) == saved
  assert not files.exists(files.join(ram.model.model_dir, finetuned_dir.RESULTS_FILE))

  proc = call_module("roberta_tf.finetune", *_flags(ram))
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert "resumed at update 3" in proc.stdout, proc.stdout
  got = files.read_json(files.join(ram.model.model_dir, finetuned_dir.RESULTS_FILE))
  np.testing.assert_allclose([h["train_loss"] for h in got["runs"][0]["history"]],
                             [h["train_loss"] for h in want["runs"][0]["history"]], rtol=1e-5)
  np.testing.assert_allclose(got["mse"], want["mse"], rtol=1e-5)
  assert got["epoch"] == want["epoch"] and got["init_from"] == ram.model.init_from
  # The model dir is complete there; the run's state is gone; nothing went to a local "ram:".
  assert finetuned_dir.read_problem_info(ram.model.model_dir).labels == ()
  assert {"config.json", "checkpoint", "vocab.json", "merges.txt", "results.md"} <= set(
      files.listdir(ram.model.model_dir))
  assert not files.exists(files.join(run_dir, run_state.STATE_DIR))
  assert not os.path.exists("ram:") and not os.path.exists(os.path.join(REPO, "ram:"))
  files.rmtree(root)


def test_progress_json_of_earlier_runs_reads_and_writes_back_the_same():
  """progress.json as runs wrote it before RunProgress (a dict): read, then written back the
  same, so the state dirs of earlier runs resume."""
  doc = {"history": [{"epoch": 1, "step": 4, "train_loss": 0.5, "skipped_steps": 0,
                      "dev": {"f1": 0.25}, "seconds": 1.5}],
         "epoch_loss": [1.25, 6.0], "best_epoch": 1, "best_prefix": "/r/best-1",
         "best_test": {"f1": 0.5}, "checkpoint": "ckpt-6"}
  progress = run_state.RunProgress.from_json(doc)
  assert (progress.loss_sum, progress.loss_count, progress.best_test) == (1.25, 6.0, {"f1": 0.5})
  assert progress.to_json("ckpt-6") == doc
  fresh = {k: v for k, v in doc.items() if k != "best_test"}
  assert run_state.RunProgress.from_json(fresh).to_json("ckpt-6") == fresh
  assert run_state.RunProgress().to_json("ckpt-0") == {
      "history": [], "epoch_loss": [0.0, 0.0], "best_epoch": 0, "best_prefix": "",
      "checkpoint": "ckpt-0"}


def test_binary_refuses_an_unknown_url_scheme_naming_the_flag(data, tmp_path):
  proc = call_module("roberta_tf.finetune", "--task=classification",
                     f"--init_from={data['pretrained']}", f"--train_file={data['train.tsv']}",
                     f"--eval_file={data['dev.tsv']}", "--model_dir=nofs://bucket/out")
  assert proc.returncode == 1
  assert proc.stderr.strip().splitlines()[-1].startswith(
      "error: --model_dir=nofs://bucket/out: no file system handles 'nofs://'"), proc.stderr
  assert not os.path.exists("nofs:") and not os.path.exists(os.path.join(REPO, "nofs:"))


def test_model_dir_checks_and_cleanup_on_a_url():
  """check_writable and prepare on ram://: only what a fine-tuning run wrote is removed."""
  root = f"ram://finetuned_dir_{uuid.uuid4().hex[:8]}"
  files.makedirs(files.join(root, "runs", "bs16_lr1e-05_seed0"))
  for name in ("eval_results.json", "ckpt-3.index", "vocab.json", "notes.txt"):
    with files.open(files.join(root, name), "w") as f:
      f.write("{}")
  with pytest.raises(ValueError, match=f"--model_dir='{root}' is not empty"):
    finetuned_dir.check_writable(root, overwrite=False)
  with pytest.raises(ValueError, match="is the --init_from/--vocab_dir directory"):
    finetuned_dir.check_writable(root + "/", overwrite=True, protected=(root,))
  finetuned_dir.check_writable(root, overwrite=True)
  finetuned_dir.prepare(root)
  assert files.listdir(root) == ["notes.txt"]
  files.rmtree(root)


@pytest.mark.slow
def test_sigterm_then_rerun_resumes_to_the_uninterrupted_result(data, sweep, tmp_path):
  """The binary gets a real SIGTERM during the sweep: it saves, exits 0, leaves no
  eval_results.json; other settings on that directory are refused; the same command resumes and
  ends where the uninterrupted sweep (the `sweep` fixture, in-process) ended."""
  cfg, want = sweep
  out = tmp_path / "out"
  args = ["--task=classification", f"--init_from={cfg.model.init_from}",
          f"--train_file={cfg.train_file}", f"--eval_file={cfg.eval_file}",
          f"--model_dir={out}", "--max_seq_len=48", "--batch_size=16", "--epochs=8",
          "--learning_rates=1e-7,2e-3", "--dropout=0.0", "--text_fields=sentence,sentence2",
          "--max_query_len=12", "--doc_stride=16", "--max_answer_len=6", "--seeds=1"]
  env = module_env(TF_CPP_MIN_LOG_LEVEL="2")
  proc = start_module("roberta_tf.finetune", *args, stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, env=env)
  lines = []
  for line in proc.stdout:
    lines.append(line)
    if "epoch 1/8" in line:
      proc.send_signal(signal.SIGTERM)
      break
  lines += proc.stdout.readlines()
  assert proc.wait(timeout=300) == 0, "".join(lines)
  log = "".join(lines)
  assert "SIGTERM: lr 1e-07 saved" in log and "same command resumes" in log, log
  assert not os.path.exists(out / "eval_results.json")
  assert os.path.isfile(out / "runs" / "bs16_lr1e-07_seed0" / "state" / "progress.json")

  other = cfg.replace(model_dir=str(out), epochs=3)
  with pytest.raises(ValueError, match="unfinished sweep with other settings \\(epochs\\)"):
    sweep_runner.run_sweep(other)

  proc = call_module("roberta_tf.finetune", *args)  # in this process: no signal now
  assert proc.returncode == 0, proc.stdout + proc.stderr
  assert "resuming the unfinished sweep" in proc.stdout and "resumed at update" in proc.stdout
  with open(out / "eval_results.json", encoding="utf-8") as f:
    got = json.load(f)
  for run, ref in zip(got["runs"], want["runs"], strict=True):
    assert run["learning_rate"] == ref["learning_rate"] and run["epoch"] == ref["epoch"]
    np.testing.assert_allclose([h["train_loss"] for h in run["history"]],
                               [h["train_loss"] for h in ref["history"]], rtol=1e-5)
    np.testing.assert_allclose([h["dev"]["accuracy"] for h in run["history"]],
                               [h["dev"]["accuracy"] for h in ref["history"]])
  assert not os.path.exists(out / "runs" / "bs16_lr1e-07_seed0" / "state")  # dropped at the end
