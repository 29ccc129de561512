"""roberta_tf.common.files: one API for local paths and URLs (ram://, TF's in-memory file
system, stands in for gs:// here)."""

import gzip
import os
import re
import uuid

import pytest

from roberta_tf.common import files
from tests import ram_filesystem


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


@pytest.mark.parametrize("path, message", [
    ("nosuch://b/x", r"no file system handles 'nosuch://' here \(registered: .*ram://"),
    ("RAM://exp", r"a URL's scheme is lower-case: write ram://exp$"),
    ("ram:/m", r"a URL takes two slashes after its scheme: write ram://m \(for a local folder "
               r"named 'ram:', \./ram:/m\)$"),
    ("gs:/", r"no path after the scheme: write gs://<directory>$"),
    ("file:/tmp/x", r"a file URL takes three slashes: write file:///tmp/x \(or /tmp/x\) \(for a "
                    r"local folder named 'file:', \./file:/tmp/x\)$"),
    ("ram://", r"no path after the scheme: write ram://<directory>$"),
    # One slash on a scheme no file system handles: not `write scheme://` (which fails next).
    ("scheme:/", r"no file system handles 'scheme://' here \(registered: .*\)$"),
    ("Scheme:/x", r"no file system handles 'scheme://' here \(.*\) \(for a local folder named "
                  r"'Scheme:', \./Scheme:/x\)$"),
])
def test_a_path_that_names_no_usable_place_is_one_line_naming_the_flag(path, message):
  with pytest.raises(files.PathError, match=f"^--model_dir={re.escape(path)}: {message}"):
    files.check(path, "--model_dir")


def test_usable_paths_pass_the_check_unchanged():
  for path in ("ram://x", "ram:///x", "relative/dir", "./ram:/m", "/abs/a:b", "run:1"):
    assert files.check(path, "--model_dir") == path


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


def test_ram_quirks_are_corrected_by_the_test_stand_in_only():
  """Production code takes what TF's ram:// says (files_gfile); tests/ram_filesystem.py
  corrects its answers for the tests. Fails once TF's ram:// no longer has the quirk (then the
  stand-in can go)."""
  root = _root()
  with files.open(files.join(root, "d", "x.tmp", "f"), "w") as f:
    f.write("1")
  assert not files.exists(files.join(root, "d", "x"))
  ram_filesystem.uninstall()
  try:
    assert files.exists(files.join(root, "d", "x"))  # a prefix of a stored name "exists"
    assert files.listdir(root) == []  # "d", made by writing a file in it, is not listed
  finally:
    ram_filesystem.install()
  assert files.listdir(root) == ["d"]
