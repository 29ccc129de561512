"""Faults between processes (issue 36), each with real processes on localhost: a peer killed
with -9 is named by the survivor, a peer that never starts is waited for with a bound (and
SIGTERM stops the wait), a second fine-tuning command on a running directory is refused while
the first finishes, a resume with another schedule says so (or is refused), and a binary's
output is its own lines only.
"""

import json
import os
import re
import signal
import subprocess
import time

import pytest

from tests import finetune_fixtures as fx
from tests.harness import call_module, free_port, module_env, start_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

TRAIN = ["--config=tiny", "--max_seq_len=64", "--batch_size=8", "--warmup_steps=2",
         "--learning_rate=1e-3", "--dropout=0", "--log_every=1", "--shuffle_buffer=100"]
# Any line a binary prints that is not its own: TF's and absl's C++ log format and its notices.
CHATTER = re.compile(r"^([IWEF]\d{4} |WARNING: All log messages before absl|To enable the "
                     r"following instructions|.*oneDNN custom operations)")


def _error_lines(text):
  return [line for line in text.splitlines() if line.startswith("error:")]


def _cluster(n):
  return [f"localhost:{free_port()}" for _ in range(n)]


def _worker(train_shards, model_dir, addresses, index, *extra):
  tf_config = {"cluster": {"worker": addresses}, "task": {"type": "worker", "index": index}}
  return start_module("roberta_tf.train", f"--train_data={train_shards}",
                      f"--model_dir={model_dir}", *TRAIN, "--strategy=multi_worker", *extra,
                      env=module_env(TF_CONFIG=json.dumps(tf_config), PYTHONUNBUFFERED="1"),
                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def _read_until(proc, pattern, lines):
  for line in proc.stdout:
    lines.append(line)
    if re.search(pattern, line):
      return True
  return False


@pytest.mark.timeout(300)
@pytest.mark.parametrize("victim", [1, 0], ids=["non_chief_killed", "chief_killed"])
def test_a_peer_killed_with_sigkill_is_named_by_the_survivor(train_shards, tmp_path, victim):
  addresses, model_dir = _cluster(2), str(tmp_path / "model")
  procs = [_worker(train_shards, model_dir, addresses, i, "--train_steps=400",
                   "--checkpoint_every=3") for i in range(2)]
  survivor = procs[1 - victim]
  try:
    lines = []
    assert _read_until(survivor, r"^step 5/", lines), "".join(lines)[-3000:]
    procs[victim].kill()
    killed = time.monotonic()
    out = "".join(lines) + survivor.communicate(timeout=120)[0]
    took = time.monotonic() - killed
  finally:
    for p in procs:
      p.kill()
  assert survivor.returncode == 1 and took < 60, (took, out[-3000:])
  errors = _error_lines(out)
  assert len(errors) == 1 and "Traceback" not in out, out[-3000:]
  assert f"worker {victim} ({addresses[victim]})" in errors[0], errors
  assert "restart every worker of the cluster with the same command" in errors[0], errors
  assert re.search(r"it resumes from ckpt-\d+ in ", errors[0]), errors


@pytest.mark.timeout(120)
def test_a_peer_that_never_starts_is_named_after_a_bounded_wait(train_shards, tmp_path):
  addresses = _cluster(2)
  start = time.monotonic()
  out = _worker(train_shards, str(tmp_path / "m"), addresses, 0, "--train_steps=5",
                "--peer_timeout=6").communicate(timeout=90)[0]
  took = time.monotonic() - start
  assert f"waiting for worker 1 ({addresses[1]}) to start" in out, out
  errors = _error_lines(out)
  assert len(errors) == 1 and f"worker 1 ({addresses[1]}), never reached" in errors[0], out
  assert "--peer_timeout" in errors[0] and took < 60, (took, errors)
  assert not os.path.exists(tmp_path / "m")  # nothing written


@pytest.mark.timeout(120)
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["sigterm", "ctrl_c"])
def test_sigterm_or_ctrl_c_stop_the_wait_within_seconds(train_shards, tmp_path, sig):
  addresses = _cluster(2)
  proc = _worker(train_shards, str(tmp_path / "m"), addresses, 1, "--train_steps=5")
  lines = []
  assert _read_until(proc, "waiting for worker 0", lines), "".join(lines)
  proc.send_signal(sig)
  sent = time.monotonic()
  out = "".join(lines) + proc.communicate(timeout=60)[0]
  assert time.monotonic() - sent < 10, out
  assert proc.returncode != 0 and len(_error_lines(out)) == 1, out
  assert ("stopped by SIGTERM" if sig == signal.SIGTERM else "stopped by Ctrl-C") in out, out


@pytest.mark.timeout(300)
def test_a_second_finetune_on_a_running_directory_is_refused(hf_tiny_dir, tmp_path):
  """The second run is refused while the first trains; the first is then stopped with SIGTERM
  (it would run for minutes) and saves its state as usual: the refusal changed nothing."""
  pretrained = fx.pretrained_model_dir(hf_tiny_dir, str(tmp_path / "pretrained"))
  train = fx.write_table(str(tmp_path / "train.tsv"), fx.sentiment_rows(320, 0))
  dev = fx.write_table(str(tmp_path / "dev.tsv"), fx.sentiment_rows(32, 1))
  model_dir = str(tmp_path / "finetuned")
  args = ["--task=classification", f"--init_from={pretrained}", f"--train_file={train}",
          f"--eval_file={dev}", f"--model_dir={model_dir}", "--text_fields=sentence,sentence2",
          "--max_seq_len=48", "--batch_size=16", "--epochs=100", "--learning_rate=2e-3",
          "--seeds=1", "--early_stopping_patience=0"]
  first = start_module("roberta_tf.finetune", *args, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, env=module_env(PYTHONUNBUFFERED="1"))
  try:
    lines = []
    assert _read_until(first, r"epoch 1/", lines), "".join(lines)[-3000:]
    second = call_module("roberta_tf.finetune", *args)
    assert first.poll() is None, "".join(lines)[-3000:]  # still training: the refusal was live
    first.send_signal(signal.SIGTERM)
    out = "".join(lines) + first.communicate(timeout=120)[0]
  finally:
    first.kill()
  assert second.returncode == 1, second.stderr[-2000:]
  errors = _error_lines(second.stderr)
  assert len(errors) == 1 and "in use by another fine-tuning process" in errors[0], errors
  assert first.returncode == 0 and "SIGTERM: lr 0.002 saved" in out, out[-3000:]
  assert os.path.isfile(os.path.join(model_dir, "runs", "bs16_lr0.002_seed0", "state",
                                     "progress.json"))
  assert not os.path.exists(os.path.join(model_dir, "eval_results.json"))


@pytest.mark.timeout(300)
def test_a_resume_with_another_schedule_says_so_or_is_refused(train_shards, tmp_path):
  model_dir = str(tmp_path / "model")
  common = [f"--train_data={train_shards}", f"--model_dir={model_dir}", *TRAIN,
            "--checkpoint_every=2"]
  first = call_module("roberta_tf.train", *common, "--train_steps=4")
  assert first.returncode == 0, first.stderr[-2000:]
  # Output is the binary's own lines only: no TF/absl start-up chatter.
  chatter = [line for line in (first.stdout + first.stderr).splitlines() if CHATTER.match(line)]
  assert not chatter, chatter
  longer = call_module("roberta_tf.train", *common, "--train_steps=8", "--learning_rate=5e-4")
  assert longer.returncode == 0, longer.stderr[-2000:]
  said = [line for line in (longer.stdout + longer.stderr).splitlines()
          if "changed schedule" in line]
  assert len(said) == 1, longer.stdout[-3000:]
  assert ("resuming at step 4 with a changed schedule (--learning_rate: 0.001 -> 0.0005; "
          "--train_steps: 4 -> 8): continuing on the new schedule from step 4") in said[0]
  assert "the learning rate is 0.000333 (the old schedule's: 0)" in said[0], said
  shorter = call_module("roberta_tf.train", *common, "--train_steps=6", "--learning_rate=5e-4")
  errors = _error_lines(shorter.stderr)
  assert shorter.returncode == 1 and len(errors) == 1, shorter.stderr[-2000:]
  assert "holds a checkpoint at step 8, past --train_steps=6" in errors[0], errors


@pytest.mark.timeout(120)
def test_ablate_takes_the_work_dir_lock(tmp_path):
  from roberta_tf.common.directory_lock import DirectoryLock  # pylint: disable=import-outside-toplevel
  work_dir = str(tmp_path / "study")
  with DirectoryLock(work_dir, "--work_dir"):
    r = call_module("roberta_tf.ablate", "--study=masking", f"--work_dir={work_dir}",
                    "--steps=1")
  errors = _error_lines(r.stderr)
  assert r.returncode == 1 and len(errors) == 1, r.stderr[-2000:]
  assert f"--work_dir={work_dir} is in use by another ablation process" in errors[0], errors
  assert not os.path.exists(work_dir)  # the holder created it, nothing was written into it
