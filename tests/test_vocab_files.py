"""Tests for roberta_tf/tokenization/vocab_files.py: the one owner of vocab.json / merges.txt."""

import hashlib
import json
import os
import uuid

import pytest

from roberta_tf.common import files
from roberta_tf.tokenization import vocab_files
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from roberta_tf.tokenization.vocab_files import VocabFileError
from tests.conftest import HF_TINY


def _write(path, obj):
  path.write_text(json.dumps(obj), encoding="utf-8")
  return str(path)


def test_names_and_special_tokens():
  assert vocab_files.FILES == ("vocab.json", "merges.txt")
  assert vocab_files.SPECIAL_TOKENS == {"bos": "<s>", "pad": "<pad>", "eos": "</s>",
                                        "unk": "<unk>", "mask": "<mask>"}
  assert vocab_files.paths("d") == (os.path.join("d", "vocab.json"),
                                    os.path.join("d", "merges.txt"))


def test_read_vocab_fixture_and_hash():
  path = os.path.join(HF_TINY, "vocab.json")
  vocab = vocab_files.read_vocab(path, dense=True)
  assert len(vocab) == 8000 and vocab["<s>"] == 0 and vocab["<mask>"] == 4
  with open(path, "rb") as f:
    assert vocab_files.file_sha256(path) == hashlib.sha256(f.read()).hexdigest()


def test_read_vocab_gaps_allowed_unless_dense(tmp_path):
  specials = {t: i for i, t in enumerate(vocab_files.SPECIAL_TOKENS.values())}
  path = _write(tmp_path / "vocab.json", {**specials, "a": 7})
  assert vocab_files.read_vocab(path)["a"] == 7
  with pytest.raises(VocabFileError, match=r"ids are not exactly 0\.\.5"):
    vocab_files.read_vocab(path, dense=True)
  path = _write(tmp_path / "vocab.json", {"<s>": 0, "a": 1})
  assert vocab_files.read_vocab(path) == {"<s>": 0, "a": 1}
  with pytest.raises(VocabFileError, match="lacks the special tokens"):
    vocab_files.read_vocab(path, dense=True)


@pytest.mark.parametrize("content, message", [
    (b"\xff\xfe", "cannot read vocab file"),
    (b"[1, 2]", "not a JSON object of token -> id"),
    (b'{"a": true}', "not a JSON object of token -> id"),
    (b'{"a": -1}', "not a JSON object of token -> id"),
    (b'{"a": 0, "b": 0}', "two tokens the same id"),
])
def test_read_vocab_errors_name_the_file(tmp_path, content, message):
  path = tmp_path / "vocab.json"
  path.write_bytes(content)
  with pytest.raises(VocabFileError, match=message) as e:
    vocab_files.read_vocab(str(path))
  assert str(path) in str(e.value)


def test_read_merges(tmp_path):
  path = tmp_path / "merges.txt"
  path.write_text("#version: 0.2\na b\nab c\n", encoding="utf-8")
  assert vocab_files.read_merges(str(path)) == [("a", "b"), ("ab", "c")]
  path.write_text("#version: 0.2\na b c\n", encoding="utf-8")
  with pytest.raises(VocabFileError, match=r"merges.txt:2: expected 'left right'"):
    vocab_files.read_merges(str(path))
  with pytest.raises(VocabFileError, match="cannot read merges file"):
    vocab_files.read_merges(str(tmp_path / "missing.txt"))


def test_copy_vocab_files(tmp_path):
  src, dst = tmp_path / "src", tmp_path / "dst"
  src.mkdir()
  dst.mkdir()
  (src / "vocab.json").write_text("{}", encoding="utf-8")
  assert vocab_files.present(str(src)) == ["vocab.json"]
  assert vocab_files.copy_vocab_files(str(src), str(dst)) == ["vocab.json"]
  assert (dst / "vocab.json").read_text(encoding="utf-8") == "{}"
  assert sorted(os.listdir(dst)) == ["vocab.json"]  # no temporary file left
  assert vocab_files.copy_vocab_files(str(src), str(src)) == ["vocab.json"]  # onto itself


@pytest.fixture
def ram_dir():
  """A fresh directory on TF's in-memory file system (a URL, as gs://... is), removed after."""
  root = f"ram://vocab-files-{uuid.uuid4().hex[:8]}"
  files.makedirs(root)
  yield root
  files.rmtree(root, ignore_errors=True)


def test_vocab_files_on_a_url(ram_dir, tmp_path):
  """Read, hashed, copied (URL to URL, URL to disk, disk to URL) and built into a tokenizer on
  ram://: the same bytes and answers as the fixture's local files, and no local `ram:` dir."""
  cwd = os.listdir(".")
  src, mid, back = files.join(ram_dir, "src"), files.join(ram_dir, "mid"), str(tmp_path / "back")
  files.makedirs(src)
  assert vocab_files.copy_vocab_files(HF_TINY, src) == ["vocab.json", "merges.txt"]
  assert vocab_files.present(src) == ["vocab.json", "merges.txt"]
  assert vocab_files.paths(src) == (f"{src}/vocab.json", f"{src}/merges.txt")
  files.makedirs(mid)
  assert vocab_files.copy_vocab_files(src, mid) == ["vocab.json", "merges.txt"]
  assert vocab_files.copy_vocab_files(mid, mid + "/") == ["vocab.json", "merges.txt"]  # itself
  os.makedirs(back)
  vocab_files.copy_vocab_files(mid, back)
  for name in vocab_files.FILES:
    want = files.read_bytes(os.path.join(HF_TINY, name))
    assert files.read_bytes(files.join(mid, name)) == want
    assert files.read_bytes(os.path.join(back, name)) == want
  assert sorted(files.listdir(mid)) == ["merges.txt", "vocab.json"]  # no temporary left
  local_vocab, url_vocab = os.path.join(HF_TINY, "vocab.json"), files.join(mid, "vocab.json")
  assert vocab_files.read_vocab(url_vocab, dense=True) == vocab_files.read_vocab(local_vocab)
  assert vocab_files.file_sha256(url_vocab) == vocab_files.file_sha256(local_vocab)
  assert vocab_files.read_merges(files.join(mid, "merges.txt")) == vocab_files.read_merges(
      os.path.join(HF_TINY, "merges.txt"))
  text = ["Hello world, the <mask> is here."]
  assert (BytePairTokenizer.from_dir(mid)(text).numpy().tolist()
          == BytePairTokenizer.from_dir(HF_TINY)(text).numpy().tolist())
  assert vocab_files.present(files.join(ram_dir, "none")) == []
  with pytest.raises(VocabFileError, match=f"cannot read merges file '{ram_dir}/none/m.txt'"):
    vocab_files.read_merges(files.join(ram_dir, "none", "m.txt"))
  assert os.listdir(".") == cwd and not os.path.exists("ram:")
