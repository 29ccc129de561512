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
