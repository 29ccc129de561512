"""roberta_tf.ablate: the studies' arms, the paper-style table, and the runner end to end on a
tiny config (results.md rows, a PNG, finite values, a rerun that keeps finished runs)."""

import dataclasses
import json
import math
import os
import re
import uuid

import pytest

from roberta_tf.ablation import arm_specs, report, run_records, runner, studies
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


def test_arm_specs_parse_label_sizes_and_flags():
  label, sizes, flags = arm_specs.parse(
      "MB tiny, 2x: --family=modernbert --config=tiny --batch_size=8 --learning_rate=2e-3 "
      "'--model_option=local_attention=64'")
  assert label == "MB tiny, 2x" and sizes == {"batch_size": "8", "learning_rate": "2e-3"}
  assert flags == ("--family=modernbert", "--config=tiny", "--model_option=local_attention=64")
  assert arm_specs.parse("reference:") == ("reference", {}, ())
  for spec, message in (
      ("--family=modernbert", "start with its label"),
      (": --config=tiny", "start with its label"),
      ("a: config=tiny", r"'config=tiny' is not a --flag"),
      ("a: --seed=3", "--seed is set by the study"),
      ("a: --train_minutes=60", "--train_minutes is set by the study"),
      ("a: --batch_size=0", r"--batch_size='0' must be a positive number"),
      ("a: --learning_rate=fast", r"--learning_rate='fast' must be a positive number"),
      ("a: '--config=tiny", "No closing quotation")):
    with pytest.raises(arm_specs.ArmSpecError, match=message):
      arm_specs.parse(spec)


def test_modern_study_is_quickstart_against_its_arms_at_equal_wall_clock():
  study = studies.build("modern", steps=400, base_batch=32, base_lr=1e-3, minutes=12,
                        extra_arms=("mine: --config=tiny --batch_size=8 --learning_rate=3e-3",))
  ref, mine = study.arms[0], study.arms[-1]
  assert ref.name.startswith("quickstart") and len(study.arms) == len(arm_specs.MODERN_ARMS) + 1
  # The quickstart's batch 16, peak 1e-3, a 20% warmup of its 2,000 nominal steps, whatever
  # --base_batch and --warmup_fraction say.
  assert ref.train_flags(0.25)[:5] == ["--batch_size=16", "--grad_accum_steps=1",
                                       "--train_steps=2000", "--learning_rate=0.001",
                                       "--warmup_steps=400"]
  assert mine.train_flags(0.25) == [
      "--batch_size=8", "--grad_accum_steps=1", "--train_steps=4000", "--learning_rate=0.003",
      "--warmup_steps=800", "--eval_every=500", "--train_minutes=12", "--dropout=0.0",
      "--config=tiny"]
  families = {a.name: ("--family=modernbert" in a.flags) for a in study.arms}
  assert families[ref.name] is False and sum(families.values()) >= 4
  assert {f"{arm_specs.MASK_FLAG}=0.3", f"{arm_specs.MASK_FLAG}=0.15"} <= {
      f for a in study.arms for f in a.flags}
  recipe = studies.build("recipe", 400, 32, 1e-3, minutes=3, extra_arms=("x: --config=tiny",))
  assert recipe.arms[-1].train_flags(0.25)[:3] == ["--batch_size=32", "--grad_accum_steps=1",
                                                   "--train_steps=400"]
  with pytest.raises(studies.StudyError, match=r"--extra_arm: two arms named 'mine'"):
    studies.build("modern", 400, 32, 1e-3, minutes=1, extra_arms=("mine:", "mine: --config=x"))
  with pytest.raises(studies.StudyError, match=r"--extra_arm: arm 'a': --seed is set"):
    studies.build("modern", 400, 32, 1e-3, minutes=1, extra_arms=("a: --seed=1",))
  with pytest.raises(studies.StudyError, match=r"not --study=masking"):
    studies.build("masking", 400, 32, 1e-3, extra_arms=("a:",))
  with pytest.raises(studies.StudyError, match=r"--study=modern compares arms at equal wall"):
    studies.build("modern", 400, 32, 1e-3)


def test_paired_table_has_each_arms_ratio_to_the_reference_beside_it():
  def row(arm, seed, ppl, beside):
    return {"arm": arm, "seed": seed, "perplexity": ppl, "problem_value": None,
            "problem_metric": "-", "tokens": 4096, "batch_size": 16, "train_steps": 2,
            "learning_rate": 1e-3, "curve": [], "beside": beside}
  rows = [row("q", 0, 200.0, "a"), row("a", 0, 160.0, "q"), row("q", 0, 100.0, "b"),
          row("b", 0, 110.0, "q"), row("q", 1, 300.0, "a"), row("a", 1, 270.0, "q")]
  md = report.table("modern", rows)
  assert "| arm | held-out MLM ppl | / reference beside it | tokens |" in md  # no downstream
  assert "| a | 215.0 ± 55.0 | 0.850 ± 0.050 | 4,096 |" in md  # 0.8 and 0.9
  assert "| b | 110.0 | 1.100 | 4,096 |" in md
  assert "| q | 200.0 ± 100.0 | - | 4,096 |" in md and "| 0, 0, 1 (3 runs) |" in md
  assert "| / reference" not in report.table("modern", [r for r in rows if r["arm"] != "q"])


def test_a_run_record_keeps_the_figures_the_load_and_the_cpu(tmp_path):
  result = {"arm": "a", "seed": 1, "beside": "q", "flags": ["--train_minutes=4"],
            "perplexity": 150.0, "blimp": 0.52, "load": [3.1, 5.0], "curve": [[0, 9.0]],
            "train_steps": 300}
  path = tmp_path / "records" / "modern.jsonl"
  run_records.append(str(path), result, study="modern", corpus="kjv")
  run_records.append(str(path), {**result, "seed": 2}, study="modern",
                     corpus=os.path.join(str(tmp_path), "kjv.txt"))  # its name, not the path
  lines = [json.loads(line) for line in path.read_text().splitlines()]
  assert [r["seed"] for r in lines] == [1, 2] and "curve" not in lines[0]
  assert {k: lines[0][k] for k in ("study", "corpus", "arm", "beside", "perplexity", "load")} == {
      "study": "modern", "corpus": "kjv", "arm": "a", "beside": "q", "perplexity": 150.0,
      "load": [3.1, 5.0]}
  assert lines[1]["corpus"] == "kjv.txt" and re.search(r"family \d+ model \d+, \d+ CPUs",
                                                         lines[0]["cpu"])
  assert lines[0]["finished"].endswith("Z")


def test_a_work_dir_takes_new_arms_but_not_an_arm_redefined(tmp_path):
  work = str(tmp_path)
  arm = lambda name, lr: {"name": name, "learning_rate": lr, "packing": "full_sentences",
                          "warmup_fraction": None}
  runner.check_settings(work, {"study": "modern", "arms": [arm("q", 1e-3), arm("a", 2e-3)]})
  (tmp_path / "runs" / "q").mkdir(parents=True)
  runner.check_settings(work, {"study": "modern", "arms": [arm("q", 1e-3), arm("b", 3e-3)]})
  assert [a["name"] for a in json.loads((tmp_path / "study.json").read_text())["arms"]] == [
      "q", "a", "b"]
  with pytest.raises(runner.RunnerError, match=r"other settings \(arms"):
    runner.check_settings(work, {"study": "modern", "arms": [arm("q", 1e-3), arm("a", 1e-3)]})
  with pytest.raises(runner.RunnerError, match=r"other settings \(study"):
    runner.check_settings(work, {"study": "recipe", "arms": [arm("q", 1e-3)]})


def test_paired_runs_put_each_arm_beside_its_own_reference_run(tmp_path, capsys):
  """--paired's jobs and dirs, read back from finished runs (no training here): per seed, the
  reference once beside each other arm, in its own dir."""
  study = studies.select(studies.build("modern", 400, 32, 1e-3, minutes=1,
                                       extra_arms=("a: --config=tiny", "b: --config=medium")),
                         ["quickstart (RoBERTa small, post-LN, 15%)", "a", "b"])
  ref = study.arms[0]
  for seed in (0, 1):
    for arm in study.arms[1:]:
      for slug, run, beside in ((ref.slug, f"seed{seed}.beside.{arm.slug}", arm.name),
                                (arm.slug, f"seed{seed}", ref.name)):
        (tmp_path / "runs" / slug / run).mkdir(parents=True)
        (tmp_path / "runs" / slug / run / "result.json").write_text(json.dumps(
            {"arm": ref.name if slug == ref.slug else arm.name, "seed": seed,
             "beside": beside}), encoding="utf-8")
  results = runner._run_pairs(study.arms, [0, 1], str(tmp_path), {}, StudySettings(),
                              {"full_sentences": 1.0})
  assert [(r["seed"], r["beside"]) for r in results] == [
      (0, "a"), (0, ref.name), (0, "b"), (0, ref.name), (1, "a"), (1, ref.name), (1, "b"),
      (1, ref.name)]
  assert capsys.readouterr().out.count("(done before)") == 8
  with pytest.raises(runner.RunnerError, match="--paired needs two arms"):
    runner._run_pairs(study.arms[:1], [0], str(tmp_path), {}, StudySettings(), {})
