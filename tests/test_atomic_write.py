"""roberta_tf.common.atomic_write: complete under the final name, or nothing new at all."""

import os

import pytest

from roberta_tf.common import atomic_write


def test_file_appears_complete_and_replaces_the_old_one(tmp_path):
  path = str(tmp_path / "config.json")
  atomic_write.write_json(path, {"b": 1, "a": [1, 2]})
  assert open(path, encoding="utf-8").read() == '{\n  "a": [\n    1,\n    2\n  ],\n  "b": 1\n}\n'
  atomic_write.write_text(path, "new")
  assert open(path, encoding="utf-8").read() == "new"
  assert os.listdir(tmp_path) == ["config.json"]


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
  path = str(tmp_path / "results.json")
  atomic_write.write_text(path, "old")
  with pytest.raises(RuntimeError, match="disk full"):
    with atomic_write.atomic_file(path) as f:
      f.write("half of the new con")
      raise RuntimeError("disk full")
  assert open(path, encoding="utf-8").read() == "old"
  assert os.listdir(tmp_path) == ["results.json"]
  with pytest.raises(TypeError):
    atomic_write.write_json(str(tmp_path / "bad.json"), {"x": object()})
  assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_directory_replaces_the_old_one_only_when_complete(tmp_path):
  target = str(tmp_path / "saved_model")
  with atomic_write.atomic_dir(target) as tmp:
    assert tmp != target and not os.path.exists(target)
    open(os.path.join(tmp, "a"), "w").close()
  assert os.listdir(target) == ["a"]
  with pytest.raises(KeyboardInterrupt):
    with atomic_write.atomic_dir(target) as tmp:
      open(os.path.join(tmp, "b"), "w").close()
      raise KeyboardInterrupt
  assert os.listdir(target) == ["a"]
  assert os.listdir(tmp_path) == ["saved_model"]
  with atomic_write.atomic_dir(target) as tmp:
    open(os.path.join(tmp, "c"), "w").close()
  assert os.listdir(target) == ["c"]


def test_copy_and_path_writers(tmp_path):
  src = tmp_path / "vocab.json"
  src.write_bytes(b"\x00\xffbytes")
  dst = str(tmp_path / "copy.json")
  atomic_write.copy_file(str(src), dst)
  assert open(dst, "rb").read() == b"\x00\xffbytes"
  with atomic_write.atomic_path(str(tmp_path / "w.bin")) as tmp:
    with open(tmp, "wb") as f:
      f.write(b"w")
    assert not os.path.exists(tmp_path / "w.bin")
  assert (tmp_path / "w.bin").read_bytes() == b"w"


@pytest.mark.parametrize("umask", [0o022, 0o077])
def test_umask_mode_gives_a_private_temporary_the_usual_mode(tmp_path, umask):
  """safetensors' save_file writes 0600 files: umask_mode gives them what open() gives."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  from safetensors.numpy import save_file  # pylint: disable=import-outside-toplevel
  old = os.umask(umask)
  try:
    plain = atomic_write.write_text(str(tmp_path / "plain.txt"), "x")
    weights = str(tmp_path / "model.safetensors")
    with atomic_write.atomic_path(weights, umask_mode=True) as tmp:
      save_file({"a": np.zeros(2, np.float32)}, tmp)
  finally:
    os.umask(old)
  assert os.stat(weights).st_mode & 0o777 == os.stat(plain).st_mode & 0o777 == 0o666 & ~umask


# --- the same promises on a URL (ram://: TF's in-memory file system, a registered non-POSIX
# scheme like gs://), with atomic renames (ram://, hdfs://) and without (object stores) ---

def _ram(name):
  import uuid  # pylint: disable=import-outside-toplevel
  return f"ram://atomic-{uuid.uuid4().hex[:8]}/{name}"


@pytest.mark.parametrize("atomic_move", [True, False], ids=["rename", "object_store"])
def test_a_url_gets_the_whole_file_or_the_old_one(monkeypatch, atomic_move):
  from roberta_tf.common import files  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(files, "has_atomic_move", lambda path: atomic_move)
  path = _ram("config.json")
  atomic_write.write_json(path, {"a": 1})
  assert files.read_text(path) == '{\n  "a": 1\n}\n'
  with pytest.raises(RuntimeError, match="disk full"):
    with atomic_write.atomic_file(path) as f:
      f.write("half")
      raise RuntimeError("disk full")
  assert files.read_text(path) == '{\n  "a": 1\n}\n'
  assert files.listdir(files.dirname(path)) == ["config.json"]  # no temporary left there
  assert not os.path.exists("ram:")  # never a local folder named after the scheme


@pytest.mark.parametrize("atomic_move", [True, False], ids=["rename", "object_store"])
def test_a_url_directory_is_replaced_only_when_complete(monkeypatch, atomic_move):
  from roberta_tf.common import files  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(files, "has_atomic_move", lambda path: atomic_move)
  target = _ram("export")
  with atomic_write.atomic_dir(target) as tmp:
    os.makedirs(os.path.join(tmp, "variables"))
    for name in ("variables/variables.index", "saved_model.pb"):
      with open(os.path.join(tmp, name), "w", encoding="utf-8") as f:
        f.write(name)
  assert sorted(files.listdir(target)) == ["saved_model.pb", "variables"]
  assert files.read_text(files.join(target, "variables", "variables.index")) == (
      "variables/variables.index")
  with pytest.raises(KeyboardInterrupt):
    with atomic_write.atomic_dir(target) as tmp:
      open(os.path.join(tmp, "saved_model.pb"), "w", encoding="utf-8").close()
      raise KeyboardInterrupt
  assert files.read_text(files.join(target, "saved_model.pb")) == "saved_model.pb"
  assert files.listdir(files.dirname(target)) == ["export"]


def test_on_an_object_store_the_files_readers_look_for_go_last(monkeypatch):
  """No directory rename there: saved_model.pb (what a loader opens first) is uploaded after
  every other file, so a reader never finds it before the variables."""
  from roberta_tf.common import files  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(files, "has_atomic_move", lambda path: False)
  order = []
  real_copy = files.copy
  monkeypatch.setattr(files, "copy", lambda src, dst, overwrite=True: (
      order.append(files.basename(dst)), real_copy(src, dst, overwrite))[1])
  with atomic_write.atomic_dir(_ram("export")) as tmp:
    os.makedirs(os.path.join(tmp, "variables"))
    for name in ("saved_model.pb", "fingerprint.pb", "variables/variables.data-00000-of-00001",
                 "variables/variables.index", "assets.txt"):
      open(os.path.join(tmp, name), "w", encoding="utf-8").close()
  assert set(order[-2:]) == {"saved_model.pb", "fingerprint.pb"} and len(order) == 5


def test_the_lock_on_a_url_names_its_owner_and_a_stale_one_is_taken_over(capsys):
  import json  # pylint: disable=import-outside-toplevel
  import socket  # pylint: disable=import-outside-toplevel
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel

  from roberta_tf.common import directory_lock, files  # pylint: disable=import-outside-toplevel
  model_dir = _ram("model")
  lock = directory_lock.DirectoryLock(model_dir)
  with lock:
    owner = files.read_json(lock.lock_path)
    assert owner["host"] == socket.gethostname() and owner["pid"] == os.getpid()
    with pytest.raises(directory_lock.DirectoryBusyError,
                       match=rf"--model_dir={model_dir} is in use by another training process "
                             rf"\({model_dir}/.roberta_tf.lock names pid {os.getpid()} on host "
                             rf".*delete {model_dir}/.roberta_tf.lock"):
      with directory_lock.DirectoryLock(model_dir):
        pass
    assert files.read_json(lock.lock_path)["token"] == owner["token"]  # the holder's, still
  assert not files.exists(lock.lock_path)
  # Another host's lock is never broken here; this host's dead pid's lock is.
  dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                        capture_output=True, text=True, check=True).stdout.strip()
  files.makedirs(model_dir)
  for host, busy in (("another-host", True), (socket.gethostname(), False)):
    with files.open(lock.lock_path, "w") as f:
      json.dump({"host": host, "pid": int(dead), "started": 0, "token": "x"}, f)
    if busy:
      with pytest.raises(directory_lock.DirectoryBusyError, match="another-host"):
        with directory_lock.DirectoryLock(model_dir):
          pass
    else:
      with directory_lock.DirectoryLock(model_dir):
        assert files.read_json(lock.lock_path)["pid"] == os.getpid()
      assert "is gone; taking the lock over" in capsys.readouterr().err
