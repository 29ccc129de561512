"""roberta_tf.common.files: one API for local paths and URLs (ram://, TF's in-memory file
system, stands in for gs:// here)."""

import gzip
import os
import uuid

import pytest

from roberta_tf.common import files


def _root():
  return f"ram://files-{uuid.uuid4().hex[:8]}"


def test_names_of_a_url_are_never_made_local():
  assert files.join("gs://b/runs", "base", "ckpt-1") == "gs://b/runs/base/ckpt-1"
  assert files.join("gs://b/runs/", "x") == "gs://b/runs/x"
  assert files.dirname("gs://b/runs/base/") == "gs://b/runs"
  assert files.basename("gs://b/runs/base/") == "base"
  assert files.normalize("gs://b/x/") == "gs://b/x" and files.normalize("a/./b/") == "a/b"
  assert files.join("runs", "base") == os.path.join("runs", "base")
  assert files.scheme("gs://b") == "gs" and files.scheme("/tmp/x") == "" and files.is_url("ram://")


def test_an_unknown_scheme_is_refused_naming_the_flag():
  with pytest.raises(files.UnknownSchemeError,
                     match=r"^--model_dir=nosuch://b/x: no file system handles 'nosuch://' "
                           r"here \(registered: .*ram://"):
    files.check("nosuch://b/x", "--model_dir")
  assert files.check("ram://x", "--model_dir") == "ram://x"
  assert files.check("relative/dir") == "relative/dir"


def test_reading_and_writing_a_url_as_a_local_file(tmp_path):
  root = _root()
  text = files.join(root, "corpus", "a.txt")
  with files.open(text, "w") as f:  # parents are made by the write
    f.write("héllo\nworld\n")
  with files.open(text) as f:
    assert list(f) == ["héllo\n", "world\n"]
  with files.open(text, "w") as f:  # a shorter text over a longer one: nothing of the old left
    f.write("x")
  assert files.read_text(text) == "x"
  with files.open(files.join(root, "corpus", "b.txt.gz"), "wb") as f:
    with gzip.GzipFile(fileobj=f, mode="wb") as g:
      g.write(b"zipped\n")
  with files.open(files.join(root, "corpus", "b.txt.gz"), "rb") as f:
    assert gzip.GzipFile(fileobj=f).read() == b"zipped\n"
  assert files.getsize(text) == 1 and files.isfile(text) and not files.isdir(text)
  with pytest.raises(FileNotFoundError):
    files.read_text(files.join(root, "missing.txt"))
  with files.local_copy(files.join(root, "corpus")) as local:
    assert sorted(os.listdir(local)) == ["a.txt", "b.txt.gz"]
  assert not os.path.exists("ram:")


def test_listings_hold_what_is_there_and_nothing_else():
  """ram:// lists `_x` under `d` when `d_x` exists, and calls any prefix of a name a
  directory; a listing here says what a real store would."""
  root = _root()
  for name in ("ft/eval_results.json", "ft_export/saved_model.pb", "ft_export/variables/v.index",
               "deep/a/b/c.txt"):
    with files.open(files.join(root, name), "w") as f:
      f.write("1")
  assert sorted(files.listdir(files.join(root, "ft"))) == ["eval_results.json"]
  assert sorted(files.listdir(root)) == ["deep", "ft", "ft_export"]
  assert not files.exists(files.join(root, "ft_exp")) and not files.isdir(files.join(root, "f"))
  assert [(r[len(root):], d, n) for r, d, n in files.walk(files.join(root, "deep"))] == [
      ("/deep", ["a"], []), ("/deep/a", ["b"], []), ("/deep/a/b", [], ["c.txt"])]
  assert files.glob(files.join(root, "ft_export", "*.pb")) == [
      files.join(root, "ft_export", "saved_model.pb")]
  files.rmtree(files.join(root, "ft_export"))
  assert sorted(files.listdir(root)) == ["deep", "ft"]
