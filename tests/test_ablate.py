"""roberta_tf.ablate: the studies' arms, the paper-style table, and the runner end to end on a
tiny config (results.md rows, a PNG, finite values, a rerun that keeps finished runs)."""

import dataclasses
import json
import math
import os
import uuid

import pytest

from roberta_tf.ablation import report, runner, studies
from roberta_tf.ablation.settings import StudySettings
from roberta_tf.common import files, options
from tests.conftest import REPO, TESTDATA
from tests.harness import call_module


def test_masking_arms_share_the_budget():
  study = studies.build("masking", steps=400, base_batch=32, base_lr=1e-3)
  assert [a.name for a in study.arms] == ["dynamic", "static, 2 copies"]
  assert {a.batch_size * a.train_steps for a in study.arms} == {400 * 32}
  assert "--masking=static" in study.arms[1].flags and "--dupe_factor=2" in study.arms[1].flags
  # A subset the run reads ~8 times: 12,800 sequences x 128 tokens x ~4 bytes / 8 epochs.
  assert study.corpus_mb == pytest.approx(0.819, abs=1e-3)


def test_batch_size_arms_follow_the_papers_table():
  study = studies.build("batch_size", steps=1600, base_batch=8, base_lr=1e-4)
  assert [(a.batch_size, a.train_steps) for a in study.arms] == [(8, 1600), (64, 200), (256, 50)]
  assert [a.learning_rate for a in study.arms] == pytest.approx([1e-4, 7e-4, 1e-3])
  flags = study.arms[2].train_flags(warmup_fraction=0.25)
  assert "--grad_accum_steps=8" in flags and "--warmup_steps=12" in flags  # 256 = 8 x 32


def test_input_format_arms_and_equal_tokens_per_update():
  study = studies.build("input_format", steps=200, base_batch=32, base_lr=1e-3)
  assert [(a.name, a.packing) for a in study.arms] == [
      ("FULL-SENTENCES", "full_sentences"), ("DOC-SENTENCES", "doc_sentences"),
      ("SEGMENT-PAIR + NSP", "segment_pair"), ("SENTENCE-PAIR + NSP", "sentence_pair")]
  # Tokens per sequence as the default run's shards had them: shorter sequences, bigger batch,
  # a multiple of its accumulation steps (micro-batches <= 32, equal).
  scaled = studies.equalize_tokens(study, {"full_sentences": 121.8, "doc_sentences": 117.3,
                                           "segment_pair": 107.1, "sentence_pair": 25.2})
  assert [(a.batch_size, a.grad_accum_steps) for a in scaled.arms] == [
      (32, 1), (34, 2), (36, 2), (155, 5)]
  assert "--grad_accum_steps=5" in scaled.arms[3].train_flags(0.25)
  assert {a.train_steps for a in scaled.arms} == {200}
  masking = studies.build("masking", 10, 8, 1e-4)
  assert studies.equalize_tokens(masking, {}) is masking  # only input_format scales


def test_unknown_studies_are_refused():
  with pytest.raises(studies.StudyError, match="unknown"):
    studies.build("dropout", 10, 8, 1e-4)


def test_arms_are_selected_by_name_in_the_studys_order():
  study = studies.build("input_format", steps=200, base_batch=32, base_lr=1e-3)
  picked = studies.select(study, ["SENTENCE-PAIR + NSP", "FULL-SENTENCES"])
  assert [a.name for a in picked.arms] == ["FULL-SENTENCES", "SENTENCE-PAIR + NSP"]
  assert studies.select(study, []) is study
  with pytest.raises(studies.StudyError, match=r"--arm: no arm 'static' in this study \(its "
                     r"arms: FULL-SENTENCES, DOC-SENTENCES"):
    studies.select(study, ["static"])


def test_table_rows_are_mean_and_half_range():
  rows = [{"arm": "a", "seed": s, "perplexity": p, "problem_value": v, "problem_metric": "accuracy",
           "tokens": 4096, "batch_size": 8, "train_steps": 4, "learning_rate": 1e-4,
           "curve": []} for s, p, v in ((0, 100.0, 0.5), (1, 110.0, 0.7))]
  md = report.table("masking", rows)
  assert "| a | 105.0 ± 5.0 | 0.600 ± 0.100 | 4,096 | 8 | 4 | 0.0001 | 0, 1 |" in md


def test_a_done_run_is_read_back_with_its_old_keys_renamed(tmp_path):
  """A result.json written before task_metric/task_value became problem_*: a rerun reads it
  (and does not train) with today's keys."""
  (tmp_path / "result.json").write_text(json.dumps({"arm": "a", "task_metric": "accuracy",
                                                    "task_value": 0.5}), encoding="utf-8")
  assert runner.run_arm(None, 0, {}, str(tmp_path), StudySettings(), 1.0) == {
      "arm": "a", "problem_metric": "accuracy", "problem_value": 0.5}


def test_study_settings_are_study_jsons_keys_and_check_their_flags():
  """An earlier study's study.json compares equal key by key (work dirs made before the
  settings object still resume); each option's check names its flag."""
  assert list(dataclasses.asdict(StudySettings())) == [
      "config", "warmup_fraction", "vocab_size", "train_flags", "task_train", "task_dev",
      "task_text_field", "task_label_field", "task_epochs", "task_learning_rate",
      "minimal_pairs", "pairs_per_paradigm"]
  for field, value, message in (
      ("vocab_size", 0, r"^--vocab_size must be > 0, got 0$"),
      ("warmup_fraction", 1.0, r"^--warmup_fraction must be in \[0, 1\), got 1.0$"),
      ("task_learning_rate", 0.0, r"^--task_learning_rate must be > 0, got 0.0$"),
      ("pairs_per_paradigm", -1, r"^--pairs_per_paradigm must be >= 0, got -1$")):
    with pytest.raises(ValueError, match=message):
      options.check_options(StudySettings(**{field: value}))


def test_results_and_settings_in_a_work_dir_on_a_url(tmp_path):
  """A --work_dir on ram:// (TF's in-memory file system, standing for gs://): results.json,
  results.md and the plot are there and equal the local ones; study.json guards it as locally,
  and --overwrite's cleanup removes the study's outputs there."""
  rows = [{"arm": "a", "seed": 0, "perplexity": 100.0, "problem_value": 0.5,
           "problem_metric": "accuracy", "tokens": 4096, "batch_size": 8, "train_steps": 4,
           "learning_rate": 1e-4, "curve": [[1000, 200.0], [2000, 100.0]]}]
  root = f"ram://ablate_{uuid.uuid4().hex[:8]}"
  files.makedirs(root)
  report.write("masking", rows, root)
  report.write("masking", rows, str(tmp_path))
  for name in ("results.json", "results.md"):
    assert files.read_text(files.join(root, name)) == (tmp_path / name).read_text(), name
  assert "![masking](masking.png)" in files.read_text(files.join(root, "results.md"))
  assert files.getsize(files.join(root, "masking.png")) > 1000
  settings = {"study": "masking", "seeds": 1}
  runner.check_settings(root, settings)
  assert files.read_json(files.join(root, "study.json")) == settings
  runner.check_settings(root, settings)  # the same study: accepted
  files.makedirs(files.join(root, "runs", "dynamic", "seed0"))
  with pytest.raises(runner.RunnerError, match=f"{root} holds a study run with other settings"):
    runner.check_settings(root, {**settings, "study": "batch_size"})
  runner.check_settings(root, {**settings, "study": "batch_size"}, overwrite=True)
  assert sorted(files.listdir(root)) == ["study.json"]
  assert not os.path.exists("ram:")
  files.rmtree(root)


def test_binary_refuses_an_unknown_url_scheme_naming_the_flag():
  out = call_module("roberta_tf.ablate", "--study=masking", "--work_dir=nofs://bucket/study")
  assert out.returncode == 1
  assert out.stderr.strip().splitlines()[-1].startswith(
      "error: --work_dir=nofs://bucket/study: no file system handles 'nofs://'"), out.stderr
  assert not os.path.exists(os.path.join(REPO, "nofs:"))


def _every_nth_row(src, dst, n):
  """A smaller downstream table (the fine-tuning step is checked for running, not for skill)."""
  with open(src, encoding="utf-8") as f:
    rows = f.readlines()[::n]
  dst.write_text("".join(rows), encoding="utf-8")
  return dst


@pytest.mark.slow
def test_runner_end_to_end_and_rerun(tmp_path):
  """input_format, two of its arms (--arm): a block packing and a pair packing with NSP, each
  on its own shards, one shared held-out set (all four arms cost twice the CI time)."""
  work = tmp_path / "study"
  problem_dir = os.path.join(TESTDATA, "docs_sections")
  train = _every_nth_row(os.path.join(problem_dir, "train.jsonl"), tmp_path / "train.jsonl", 5)
  dev = _every_nth_row(os.path.join(problem_dir, "dev.jsonl"), tmp_path / "dev.jsonl", 5)
  cmd = ["--study=input_format", f"--work_dir={work}",
         f"--corpus={TESTDATA}/python_docs_small.jsonl.gz", "--config=tiny", "--steps=4",
         "--base_batch=8", "--seeds=0", "--task_epochs=1", f"--task_train={train}",
         f"--task_dev={dev}", "--vocab_size=600", "--parallel=2", "--arm=FULL-SENTENCES",
         "--arm=SEGMENT-PAIR + NSP"]
  out = call_module("roberta_tf.ablate", *cmd)
  assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
  assert "ETA" in out.stdout
  md = (work / "results.md").read_text()
  for arm in ("FULL-SENTENCES", "SEGMENT-PAIR + NSP"):
    assert f"| {arm} |" in md
  assert "DOC-SENTENCES" not in md and not (work / "shards_doc_sentences").exists()
  assert "NSP accuracy on each pair arm's own held-out pairs" in md
  assert (work / "input_format.png").stat().st_size > 1000
  results = json.loads((work / "results.json").read_text())
  assert len(results) == 2
  for r in results:
    assert math.isfinite(r["perplexity"]) and 0 <= r["problem_value"] <= 1
    assert r["tokens"] == r["batch_size"] * 4 * 128 and len(r["curve"]) >= 2
    assert ("nsp_accuracy" in r) == (r["packing"] in ("segment_pair", "sentence_pair"))
  # Every arm's update holds about the reference arm's real tokens (within batch rounding).
  per_update = [r["real_tokens"] / r["train_steps"] for r in results]
  assert max(per_update) / min(per_update) < 1.35, per_update
  # Every arm is evaluated on the same held-out set, the FULL-SENTENCES shards: by training
  # (the curve) and by roberta_tf.evaluate (the table), 2 commands per arm.
  assert out.stdout.count(f"--eval_data={work / 'shards'} ") == 4
  again = call_module("roberta_tf.ablate", *cmd)
  assert again.returncode == 0 and again.stdout.count("(done before)") == 2
  assert json.loads((work / "results.json").read_text()) == results
  other = call_module("roberta_tf.ablate", *(c.replace("--steps=4", "--steps=5") for c in cmd))
  assert other.returncode == 1 and "other settings (arms" in other.stderr


def test_recipe_study_arms_run_at_equal_wall_clock():
  study = studies.build("recipe", steps=400, base_batch=32, base_lr=1e-3, minutes=3)
  assert study.arms[0].name.startswith("faithful") and len(study.arms) == 8
  for arm in study.arms:
    flags = arm.train_flags(0.25)
    warmup = f"--warmup_steps={arm.train_steps // 4}"  # a quarter, also of a smaller batch's
    assert "--train_minutes=3" in flags and warmup in flags, flags
    assert "--dropout=0.0" in flags  # as the quickstart flagfile
  budget = study.arms[-1]
  assert {"--model_option=pre_layer_norm=true", "--model_option=use_bias=false",
          "--model_option=gated_ffn=true", "--mask_rate=0.4"} <= set(
      budget.flags) and budget.learning_rate == 2e-3
  with pytest.raises(studies.StudyError, match="--minutes > 0"):
    studies.build("recipe", 400, 32, 1e-3)
