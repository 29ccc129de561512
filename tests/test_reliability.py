"""A run is never lost, a failure is one line, bad data is refused (issue 25), binary by binary.

Each case runs the binary through the harness: in this process (its stdout and stderr captured,
Python's warnings printed there as a fresh interpreter would print them), or in its own process
where the case needs one (invalid UTF-8 argv, a file-size limit, this process's pid, a signal).
The data: one tiny vocab + shard dir + 4-step model built once for the module (checkpoints
ckpt-2, ckpt-3, ckpt-4; a case damages its own copy). "One line" means: exit code != 0 and
exactly one stderr line that is not TF's unsuppressible start-up chatter (`_NOISE`), starting
with `error:`, no traceback.
"""

import collections
import contextlib
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import warnings

import pytest

from tests.conftest import HF_TINY, TESTDATA
from tests.harness import (
  call_module,
  module_env,
  run_command,
  run_module,
  run_script,
  start_command,
  start_module,
)

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

CORPUS = os.path.join(TESTDATA, "python_docs_small.jsonl.gz")
# TF/absl lines printed before (or regardless of) TF_CPP_MIN_LOG_LEVEL on a machine without GPU.
_NOISE = re.compile(r"^(WARNING: All log messages before absl::InitializeLog|[IWEF]\d{4} |"
                    r"To enable the following instructions)")

Result = collections.namedtuple("Result", "rc out err lines")


def _env(**extra):
  """TF at log level 2: what `_NOISE` is written against."""
  return module_env(TF_CPP_MIN_LOG_LEVEL="2", **extra)


@contextlib.contextmanager
def _warnings_to_stderr():
  """Python's warnings, filtered as a fresh interpreter filters them (DeprecationWarning and its
  kin ignored), printed on the current sys.stderr (the harness's capture during an in-process
  call), not recorded by pytest: a stray warning is a second stderr line here too."""
  with warnings.catch_warnings():
    warnings.resetwarnings()
    warnings.simplefilter("default")
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning,
                     ResourceWarning):
      warnings.simplefilter("ignore", category)
    warnings.showwarning = lambda message, category, filename, lineno, file=None, line=None: (
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line)))
    yield


def run_binary(module, *args, in_process=True, limit_file_bytes=None):
  """The binary's Result; lines = its stderr without TF's start-up noise. In this process
  (harness.call_module), or with in_process=False in a child process, its output read as UTF-8
  with bad bytes replaced: what argv items that are bytes (invalid UTF-8) and limit_file_bytes
  (the child's file-size limit: a write past it fails as on a full disk) need."""
  if in_process:
    if limit_file_bytes is not None:
      raise ValueError("limit_file_bytes limits a child process: give in_process=False")
    with _warnings_to_stderr():
      proc = call_module(module, *args)
    out, err = proc.stdout, proc.stderr
  else:
    proc = run_module(module, *args, env=_env(), text=False, file_size_limit=limit_file_bytes)
    out, err = (s.decode("utf-8", "replace") for s in (proc.stdout, proc.stderr))
  lines = [line for line in err.splitlines() if line.strip() and not _NOISE.match(line)]
  return Result(proc.returncode, out, err, lines)


def assert_one_error_line(r: Result, *needles) -> str:
  assert r.rc != 0, r.out[-2000:]
  assert "Traceback" not in r.err, r.err[-3000:]
  assert len(r.lines) == 1 and r.lines[0].startswith("error: "), r.lines
  for needle in needles:
    assert needle in r.lines[0], (needle, r.lines[0])
  return r.lines[0]


def assert_ok(r: Result) -> Result:
  assert r.rc == 0, (r.out[-2000:], r.err[-3000:])
  return r


def train_args(model_dir, shards, steps, *extra):
  return ["--flagfile=flags/tiny.flags", f"--train_data={shards}", f"--eval_data={shards}",
          f"--model_dir={model_dir}", "--max_seq_len=64", "--batch_size=8", "--warmup_steps=1",
          f"--train_steps={steps}", "--checkpoint_every=1", "--log_every=1", "--eval_steps=2",
          "--keep_checkpoints=3", *extra]


Tiny = collections.namedtuple("Tiny", "vocab shards model")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  """A 1,000-token vocab of the test corpus, its shards (2 train + 1 validation, 64 tokens) and
  a tiny model trained 4 steps with a checkpoint every step (ckpt-2..4 kept)."""
  root = tmp_path_factory.mktemp("reliability")
  vocab, shards, model = (str(root / n) for n in ("vocab", "shards", "model"))
  assert_ok(run_binary("data_prep.train_tokenizer", f"--input={CORPUS}", "--vocab_size=1000",
                       f"--output_dir={vocab}", "--noprogress"))
  assert_ok(run_binary("data_prep.build_shards", f"--input={CORPUS}", f"--vocab_dir={vocab}",
                       f"--output_dir={shards}", "--max_seq_len=64", "--num_shards=2",
                       "--validation_fraction=0.1", "--noprogress"))
  assert_ok(run_binary("roberta_tf.train", *train_args(model, shards, 4)))
  assert sorted(os.path.basename(p) for p in glob.glob(f"{model}/ckpt-*.index")) == [
      "ckpt-2.index", "ckpt-3.index", "ckpt-4.index"]
  return Tiny(vocab, shards, model)


@pytest.fixture(scope="module")
def exported(tiny, tmp_path_factory):
  path = str(tmp_path_factory.mktemp("exported") / "saved_model")
  assert_ok(run_binary("roberta_tf.export", f"--model_dir={tiny.model}",
                       f"--export_dir={path}", "--max_seq_len=24"))
  return path


def copy_model(tiny, tmp_path, name="model") -> str:
  dst = str(tmp_path / name)
  shutil.copytree(tiny.model, dst)
  return dst


def copy_shards(tiny, tmp_path) -> str:
  dst = str(tmp_path / "shards")
  shutil.copytree(tiny.shards, dst)
  return dst


def truncate(path, size):
  with open(path, "r+b") as f:
    f.truncate(size)


def flip_byte(path, offset):
  with open(path, "r+b") as f:
    f.seek(offset)
    b = f.read(1)
    f.seek(offset)
    f.write(bytes([b[0] ^ 0xFF]))


def ckpt_data(model_dir, step):
  return os.path.join(model_dir, f"ckpt-{step}.data-00000-of-00001")


# --- 1. A model dir with checkpoints is never started over ------------------------------------

def test_missing_checkpoint_index_resumes_from_the_newest_on_disk(tiny, tmp_path):
  model = str(tmp_path / "copied")
  os.makedirs(model)
  for path in glob.glob(f"{tiny.model}/ckpt-*") + glob.glob(f"{tiny.model}/*.json"):
    shutil.copy(path, model)  # the checkpoint files and config, not the 'checkpoint' index
  os.makedirs(f"{model}/ckpt-7_temp")  # what a save killed half-way leaves
  r = assert_ok(run_binary("roberta_tf.train", *train_args(model, tiny.shards, 5)))
  assert "'checkpoint' index file was missing or unreadable: rebuilt the index" in r.out, r.out
  assert f"resumed from {model}/ckpt-4 at step 4" in r.out, r.out
  assert "ckpt-7_temp" in r.out and not os.path.exists(f"{model}/ckpt-7_temp")
  assert "trained to step 5" in r.out
  # ckpt-3 and ckpt-4 stay (keep 3: ckpt-2 rotates out when ckpt-5 is saved, as uninterrupted)
  assert all(os.path.isfile(f"{model}/ckpt-{s}.index") for s in (3, 4, 5))


def test_newest_index_gone_resumes_from_the_older_one_and_keeps_the_damaged_files(tiny, tmp_path):
  model = copy_model(tiny, tmp_path)
  os.remove(f"{model}/ckpt-4.index")
  size = os.path.getsize(ckpt_data(model, 4))
  r = assert_ok(run_binary("roberta_tf.train", *train_args(model, tiny.shards, 4)))
  assert "ckpt-4 is damaged (ckpt-4.index is missing)" in r.out, r.out
  assert f"resumed from {model}/ckpt-3 at step 3" in r.out, r.out
  assert os.path.getsize(f"{model}/damaged/ckpt-4.data-00000-of-00001") == size
  assert all(os.path.isfile(f"{model}/ckpt-{s}.index") for s in (2, 3, 4))


def test_damaged_newest_data_resumes_from_the_older_one(tiny, tmp_path):
  """10 bytes short: the index's sizes still fit, the read finds it (test_no_complete_... has a
  truncation the size check finds before any read)."""
  model = copy_model(tiny, tmp_path)
  size = os.path.getsize(ckpt_data(model, 4)) - 10
  truncate(ckpt_data(model, 4), size)
  r = assert_ok(run_binary("roberta_tf.train", *train_args(model, tiny.shards, 4)))
  assert "ckpt-4 is damaged (ckpt-4.data-00000-of-00001 could not be read" in r.out, r.out
  assert f"resumed from {model}/ckpt-3 at step 3" in r.out, r.out
  assert os.path.getsize(f"{model}/damaged/ckpt-4.data-00000-of-00001") == size


def test_no_complete_checkpoint_is_refused_until_overwrite(tiny, tmp_path):
  model = copy_model(tiny, tmp_path)
  for step in (2, 3):
    for path in glob.glob(f"{model}/ckpt-{step}.*"):
      os.remove(path)
  truncate(ckpt_data(model, 4), 1_000_000)
  before = {p: os.path.getsize(p) for p in glob.glob(f"{model}/*")}
  line = assert_one_error_line(run_binary("roberta_tf.train", *train_args(model, tiny.shards, 2)),
                               "no complete checkpoint", "ckpt-4.data-00000-of-00001",
                               "--overwrite")
  assert "truncated" in line
  assert {p: os.path.getsize(p) for p in glob.glob(f"{model}/*")} == before  # nothing written
  r = assert_ok(run_binary("roberta_tf.train", *train_args(model, tiny.shards, 2),
                           "--overwrite"))
  assert "resumed" not in r.out and "--overwrite: deleted" in r.out
  assert sorted(os.path.basename(p) for p in glob.glob(f"{model}/ckpt-*.index")) == [
      "ckpt-1.index", "ckpt-2.index"]


def test_a_second_trainer_on_the_same_model_dir_is_refused(tiny, tmp_path):
  from roberta_tf.training import checkpointing  # pylint: disable=import-outside-toplevel
  model = copy_model(tiny, tmp_path)
  with checkpointing.DirectoryLock(model):
    assert_one_error_line(run_binary("roberta_tf.train", *train_args(model, tiny.shards, 5)),
                          "in use by another training process")
  assert not os.path.exists(f"{model}/ckpt-5.index")


def test_ctrl_c_saves_the_step_and_exits_cleanly(tiny, tmp_path):
  model = str(tmp_path / "interrupted")
  proc = start_module(
      "roberta_tf.train",
      *train_args(model, tiny.shards, 500, "--checkpoint_every=1000", "--eval_steps=1"),
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(PYTHONUNBUFFERED="1"))
  try:
    for line in proc.stdout:
      if line.startswith("step 2/"):
        proc.send_signal(signal.SIGINT)
        break
    out, err = proc.communicate(timeout=120)
  finally:
    if proc.poll() is None:
      proc.kill()
  assert proc.returncode == 0, err[-3000:]
  saved = re.search(r"SIGINT: saved step (\d+); exiting cleanly", out)
  assert saved, out[-2000:]
  assert os.path.isfile(f"{model}/ckpt-{saved.group(1)}.index")
  assert not glob.glob(f"{model}/*_temp")


# --- 2. One line instead of a traceback -------------------------------------------------------

@pytest.mark.parametrize("binary", ["evaluate", "export", "to_hf"])
def test_truncated_checkpoint_data_is_one_line_naming_the_file(tiny, tmp_path, binary):
  model = copy_model(tiny, tmp_path)
  truncate(ckpt_data(model, 4), 6_000_000)  # the index is fine; tensors are cut
  out = str(tmp_path / "out")
  args = {"evaluate": ("roberta_tf.evaluate", f"--model_dir={model}",
                       f"--eval_data={tiny.shards}"),
          "export": ("roberta_tf.export", f"--model_dir={model}", f"--export_dir={out}"),
          "to_hf": ("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={model}",
                    f"--hf_dir={out}")}[binary]
  assert_one_error_line(run_binary(*args), f"{model}/ckpt-4 is damaged",
                        "ckpt-4.data-00000-of-00001", f"--checkpoint={model}/ckpt-3")
  assert not os.path.exists(out) or not os.listdir(out)


@pytest.mark.parametrize("damage", ["truncated_train", "flipped_train", "empty_train",
                                    "flipped_validation"])
def test_damaged_shards_are_one_line_naming_the_shard(tiny, tmp_path, damage):
  shards = copy_shards(tiny, tmp_path)
  split = "validation" if damage.endswith("validation") else "train"
  shard = sorted(glob.glob(f"{shards}/{split}-*.tfrecord"))[-1]
  if damage.startswith("truncated"):
    truncate(shard, os.path.getsize(shard) // 2)
  elif damage.startswith("empty"):
    truncate(shard, 0)
  else:
    flip_byte(shard, os.path.getsize(shard) // 2)
  if damage == "truncated_train":  # train refuses it before the first step
    model = str(tmp_path / "model")
    assert_one_error_line(run_binary("roberta_tf.train", *train_args(model, shards, 3)), shard,
                          "--skip_corrupt_shards")
  # evaluate: the validation shard, or the unigram baseline's train shard (never counted from a
  # damaged shard, nor from another directory instead)
  line = assert_one_error_line(run_binary("roberta_tf.evaluate", f"--model_dir={tiny.model}",
                                          f"--eval_data={shards}"), shard)
  if damage == "flipped_train":
    assert "--nounigram" in line
    r = assert_ok(run_binary("roberta_tf.evaluate", f"--model_dir={tiny.model}",
                             f"--eval_data={shards}", "--nounigram"))
    assert "unigram" not in r.out


def test_full_disk_at_a_checkpoint_is_one_line_and_leaves_no_temp_dir(tiny, tmp_path):
  model = str(tmp_path / "model")
  line = assert_one_error_line(
      run_binary("roberta_tf.train", *train_args(model, tiny.shards, 2), in_process=False,
                 limit_file_bytes=3_000_000),  # a checkpoint's data file is ~6.6 MB
      f"cannot write {model}/ckpt-1", "file-size limit")
  assert ".tmp-" not in line and "_temp" not in line
  assert not glob.glob(f"{model}/ckpt-*")


def test_full_disk_at_an_export_names_the_export_dir_not_its_temp(tiny, tmp_path):
  out = str(tmp_path / "saved_model")
  line = assert_one_error_line(
      run_binary("roberta_tf.export", f"--model_dir={tiny.model}", f"--export_dir={out}",
                 in_process=False, limit_file_bytes=500_000), f"cannot write {out}")
  assert ".tmp-" not in line
  assert not glob.glob(f"{out}*")


def _tmpfs(path, size: str) -> bool:
  if os.geteuid() != 0 or not shutil.which("mount"):
    return False
  os.makedirs(path, exist_ok=True)
  mounted = run_command(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path])
  return mounted.returncode == 0


def test_no_space_left_at_an_export_on_a_full_tmpfs(tiny, tmp_path):
  mount = str(tmp_path / "tmpfs")
  if not _tmpfs(mount, "1m"):
    pytest.skip("mounting a tmpfs needs root")
  try:
    out = f"{mount}/saved_model"
    assert_one_error_line(run_binary("roberta_tf.export", f"--model_dir={tiny.model}",
                                     f"--export_dir={out}"),
                          f"cannot write {out}: no space left on the device")
    assert os.listdir(mount) == []
  finally:
    run_command(["umount", mount])


def test_fill_mask_keeps_every_text_and_reports_truncation(exported):
  long_text = "word " * 40 + "the <mask> end"  # beyond the export's 22 text tokens
  r = assert_ok(run_binary("roberta_tf.fill_mask", f"--saved_model={exported}",
                           "A <mask> here.", b"\xff\xfe bad <mask> bytes", long_text,
                           in_process=False))  # bytes: a process of its own
  assert "not valid UTF-8: 2 bytes replaced by U+FFFD" in r.out
  assert r.out.count("<mask> #1:") == 2  # the short valid text and the decoded one
  assert "truncated: " in r.out and "1 of its 1 <mask>s came after that" in r.out
  assert "(no <mask> in this text)" not in r.out


# --- 3. Bad data refused, no silent wrong answers ---------------------------------------------

def test_squad_answer_not_at_answer_start_is_refused_or_skipped(tmp_path):
  from roberta_tf.finetuning.squad import read as squad_read  # pylint: disable=import-outside-toplevel
  context = "Paris is the capital of France. Berlin is the capital of Germany."
  data = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": context, "qas": [
      {"id": "good", "question": "Capital of France?", "is_impossible": False,
       "answers": [{"text": "Paris", "answer_start": 0}]},
      {"id": "shifted", "question": "Capital of Germany?", "is_impossible": False,
       "answers": [{"text": "Berlin", "answer_start": 0}]}]}]}]}
  path = tmp_path / "train.json"
  path.write_text(json.dumps(data, indent=1))
  with pytest.raises(squad_read.SquadError) as e:
    squad_read.read_squad(str(path))
  line = next(i + 1 for i, text in enumerate(path.read_text().splitlines()) if '"shifted"' in text)
  assert (f"{path}:{line}: question shifted: answer 'Berlin' is not at answer_start 0"
          in str(e.value))
  assert "the text occurs at 32" in str(e.value) and "--skip_bad_examples" in str(e.value)
  skipped = []
  examples, _ = squad_read.read_squad(str(path), skip_bad=True, on_skip=skipped.append)
  assert [x.id for x in examples] == ["good"] and len(skipped) == 1


def test_ablate_refuses_zero_steps_and_a_bad_corpus_leaves_nothing(tmp_path):
  work = str(tmp_path / "study")
  assert_one_error_line(run_binary("roberta_tf.ablate", "--study=masking", f"--work_dir={work}",
                                   "--steps=0"), "--steps must be > 0, got 0")
  assert_one_error_line(run_binary("roberta_tf.ablate", "--study=masking", f"--work_dir={work}",
                                   "--corpus=/nonexistent/corpus.txt"), "/nonexistent/corpus.txt")
  assert not os.path.exists(os.path.join(work, "study.json"))


def test_an_unfinished_study_start_does_not_block_a_corrected_rerun(tmp_path, capsys):
  from roberta_tf.ablation import runner  # pylint: disable=import-outside-toplevel
  work = str(tmp_path)
  runner.check_settings(work, {"corpus": "wrong.txt"})
  os.makedirs(os.path.join(work, "vocab"))  # prep of the wrong corpus, no run yet
  runner.check_settings(work, {"corpus": "right.txt"})
  assert not os.path.exists(os.path.join(work, "vocab"))
  assert "replaced" in capsys.readouterr().out
  os.makedirs(os.path.join(work, "runs", "arm", "seed0"))  # a started run: now it is refused
  with pytest.raises(runner.RunnerError, match="--overwrite"):
    runner.check_settings(work, {"corpus": "other.txt"})
  runner.check_settings(work, {"corpus": "other.txt"}, overwrite=True)
  assert not os.path.exists(os.path.join(work, "runs"))
  with open(os.path.join(work, "study.json"), encoding="utf-8") as f:
    assert json.load(f) == {"corpus": "other.txt"}


def test_a_shard_dir_is_not_a_tokenizer_corpus(tiny, tmp_path):
  assert_one_error_line(run_binary("data_prep.train_tokenizer", f"--input={tiny.shards}",
                                   "--vocab_size=300", f"--output_dir={tmp_path / 'v'}",
                                   "--noprogress"), "dataset_info.json", "not a corpus")
  assert not os.path.exists(tmp_path / "v" / "vocab.json")


def test_importing_an_hf_dir_without_vocab_files_warns(tmp_path):
  hf = tmp_path / "hf"
  hf.mkdir()
  for name in ("config.json", "model.safetensors"):
    shutil.copy(os.path.join(HF_TINY, name), hf)
  r = assert_ok(run_binary("roberta_tf.convert_checkpoint", f"--hf_dir={hf}",
                           f"--model_dir={tmp_path / 'model'}"))
  assert any(line.startswith(f"warning: {hf} has no vocab.json or merges.txt") for line in r.lines)


# --- 4. What a killed process leaves does not block the next run ------------------------------

def test_export_removes_a_killed_exports_temp_dir_but_not_a_live_ones(tiny, tmp_path):
  out = str(tmp_path / "saved_model")
  dead = run_script("import os; print(os.getpid())")
  assert dead.returncode == 0, dead.stderr
  live = start_command(["sleep", "120"])  # another writer, still running
  try:
    stale, running = f"{out}.tmp-{int(dead.stdout)}", f"{out}.tmp-{live.pid}"
    for path in (stale, running):
      os.makedirs(f"{path}/variables")
    assert_ok(run_binary("roberta_tf.export", f"--model_dir={tiny.model}",
                         f"--export_dir={out}"))
    assert not os.path.exists(stale) and os.path.isdir(running)
  finally:
    live.kill()
    live.wait()
  assert os.path.isfile(f"{out}/saved_model.pb")


# --- Further bad input: one line each ---------------------------------------------------------

def test_other_bad_inputs_are_one_line(tiny, tmp_path):
  broken = copy_model(tiny, tmp_path, "broken_config")
  with open(f"{broken}/config.json", "w", encoding="utf-8") as f:
    f.write('{"model": {')
  cases = [
      (("roberta_tf.train", "--flagfile=flags/no_such.flags"), "no_such.flags"),
      (("roberta_tf.evaluate", f"--model_dir={tiny.model}", f"--eval_data={tiny.shards}",
        "--no_such_flag=1"), "no_such_flag"),
      (("roberta_tf.evaluate", f"--model_dir={broken}", f"--eval_data={tiny.shards}"),
       "config.json is not valid JSON"),
      (("roberta_tf.evaluate", f"--model_dir={tiny.model}", f"--eval_data={tiny.shards}",
        f"--checkpoint={tiny.model}/ckpt-99"), "ckpt-99"),
      (("roberta_tf.export", f"--model_dir={tiny.model}", f"--export_dir={tmp_path / 'e'}",
        f"--checkpoint={tiny.model}"), "is a directory"),
      (("roberta_tf.evaluate", f"--model_dir={tiny.model}",
        f"--eval_data={tiny.shards}/dataset_info.json"), "dataset_info.json"),
      (("roberta_tf.fill_mask", f"--saved_model={tmp_path / 'none'}", "a <mask>"),
       str(tmp_path / "none")),
  ]
  for args, needle in cases:
    assert_one_error_line(run_binary(*args), needle)
