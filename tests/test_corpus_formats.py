"""data_prep/corpus.py's formats and paths: Parquet corpora (one row a document, read a row group
at a time) are JSONL's twins, and every input form (files, globs, directories, comma lists)
works on URLs (ram://, TF's in-process file system: tested in this process)."""

import functools
import gzip
import json
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from data_prep import corpus, sentence_encoders, stdlib_corpus, train_tokenizer
from data_prep import shard_builder as bs
from data_prep.shard_settings import ShardSettings
from data_prep.vocab_settings import VocabSettings
from roberta_tf.common import files
from tests.conftest import TESTDATA

SMALL = os.path.join(TESTDATA, "python_docs_small.jsonl.gz")
VOCAB = os.path.join(TESTDATA, "hf_roberta_tiny")


@functools.cache
def _texts():
  """The small corpus's document texts (20), one with a "\\r\\n" and an empty one added."""
  with gzip.open(SMALL, "rt", encoding="utf-8") as f:
    texts = [json.loads(line)["text"] for line in f if line.strip()]
  return texts[:10] + ["first line\r\nsecond line\n\n  \nthird", ""] + texts[10:]


@functools.cache
def _encoder():
  return sentence_encoders.make_encoder("hf", sentence_encoders.load_vocab(VOCAB))


@pytest.fixture
def ram():
  """A fresh ram:// folder name (ram:// lives as long as the process)."""
  return f"ram://{uuid.uuid4().hex}"


def _write_jsonl(path, texts):
  with files.open(path, "w") as f:
    f.writelines(json.dumps({"id": i, "text": t}) + "\n" for i, t in enumerate(texts))


def _write_parquet(path, columns, row_group_size=4, schema=None):
  with files.open(path, "wb") as f:
    pq.write_table(pa.table(columns, schema=schema), f, row_group_size=row_group_size)


def _twins(root, texts=None):
  """(jsonl, parquet) paths under ``root`` (a directory or ram:// URL) with the same documents;
  the Parquet file has several row groups and another column before the text."""
  texts = texts if texts is not None else _texts()
  files.makedirs(root)
  jsonl, parquet = files.join(root, "docs.jsonl"), files.join(root, "docs.parquet")
  _write_jsonl(jsonl, texts)
  _write_parquet(parquet, {"id": list(range(len(texts))), "text": texts})
  return jsonl, parquet


def _build(input_spec, out, **kwargs):
  kwargs = {"max_seq_len": 64, "num_shards": 2, "validation_fraction": 0.2, "seed": 3,
            "group_bytes": 5000, **kwargs}
  return bs.build_shards(ShardSettings(input=input_spec, vocab_dir=VOCAB, output_dir=out,
                                       encoder="hf", progress=False, **kwargs),
                         encode=_encoder())


def _shards(out):
  return {n: files.read_bytes(files.join(out, n)) for n in sorted(files.listdir(out))
          if n.endswith(".tfrecord")}


def _vocab(out):
  return {n: files.read_bytes(files.join(out, n)) for n in ("vocab.json", "merges.txt")}


def test_parquet_reads_the_documents_of_its_jsonl_twin(tmp_path):
  jsonl, parquet = _twins(str(tmp_path))
  stats = corpus.CorpusStats()
  docs = list(corpus.iter_documents([parquet], stats=stats))
  assert docs == list(corpus.iter_documents([jsonl]))
  assert len(docs) == 21  # the empty text is no document, as in .jsonl
  assert ["first line", "second line", "third"] in docs
  assert stats.bytes_read == stats.total_bytes == os.path.getsize(parquet)
  assert stats.documents == 21 and stats.null_texts == 0


def test_parquet_and_its_jsonl_twin_give_the_same_shards_and_vocabulary(tmp_path, ram):
  jsonl, parquet = _twins(str(tmp_path / "src"))
  _, ram_parquet = _twins(f"{ram}/src")
  outputs = {"jsonl": str(tmp_path / "jsonl"), "parquet": str(tmp_path / "parquet"),
             "ram": f"{ram}/shards"}
  for spec, out in zip((jsonl, parquet, ram_parquet), outputs.values(), strict=True):
    info = _build(spec, out)
  assert info["source"]["documents"] == {"train": 16, "validation": 5}
  shards = {k: _shards(out) for k, out in outputs.items()}
  assert len(shards["jsonl"]) == 3
  assert shards["jsonl"] == shards["parquet"] == shards["ram"]
  assert _vocab(outputs["ram"]) == _vocab(VOCAB)  # the vocabulary beside the shards

  vocabs = {}
  for name, spec, out in (("jsonl", jsonl, str(tmp_path / "v_jsonl")),
                          ("parquet", parquet, str(tmp_path / "v_parquet")),
                          ("ram", ram_parquet, f"{ram}/vocab")):
    counts = train_tokenizer.train(VocabSettings(input=spec, output_dir=out, vocab_size=400,
                                                  progress=False))
    assert counts["documents"] == 21
    vocabs[name] = _vocab(out)
  assert vocabs["jsonl"] == vocabs["parquet"] == vocabs["ram"]
  assert not os.path.exists("ram:")  # nothing went to a local "ram:" folder


def test_parquet_found_by_directories_and_globs(tmp_path, ram):
  jsonl, parquet = _twins(str(tmp_path / "a"))
  assert corpus.resolve_inputs(str(tmp_path)) == [jsonl, parquet]
  assert corpus.resolve_inputs(f"{tmp_path}/*/*.parquet") == [parquet]
  ram_jsonl, ram_parquet = _twins(f"{ram}/a")
  assert corpus.resolve_inputs(ram) == [ram_jsonl, ram_parquet]
  assert corpus.resolve_inputs(f"{ram}/*/*.parquet") == [ram_parquet]


def test_parquet_reads_one_row_group_at_a_time(tmp_path, monkeypatch):
  _, parquet = _twins(str(tmp_path))
  seen = []
  iter_batches = pq.ParquetFile.iter_batches

  def spy(self, *args, **kwargs):
    seen.append((kwargs.get("row_groups"), kwargs.get("columns")))
    return iter_batches(self, *args, **kwargs)

  def whole_file(*_, **__):
    raise AssertionError("the whole file was read")

  monkeypatch.setattr(pq.ParquetFile, "iter_batches", spy)
  monkeypatch.setattr(pq.ParquetFile, "read", whole_file)
  monkeypatch.setattr(pq, "read_table", whole_file)
  docs = corpus.iter_documents([parquet])
  next(docs)
  assert seen == [([0], ["text"])]  # one row group, the text column only, so far
  list(docs)
  assert seen == [([g], ["text"]) for g in range(6)]  # 22 rows, 4 a group


def test_parquet_null_texts_are_skipped_and_counted_binary_columns_decoded(tmp_path):
  path = str(tmp_path / "nulls.parquet")
  _write_parquet(path, {"body": [b"caf\xe9 one", None, b"two\nthree", None]},
                 schema=pa.schema([("body", pa.binary())]))
  stats = corpus.CorpusStats()
  docs = list(corpus.iter_documents([path], text_field="body", stats=stats))
  assert docs == [["caf\ufffd one"], ["two", "three"]]
  assert (stats.null_texts, stats.invalid_utf8, stats.documents) == (2, 1, 2)
  info = _build(path, str(tmp_path / "out"), text_field="body", validation_fraction=0,
                num_shards=1)
  assert info["source"]["null_texts"] == 2
  assert "2 Parquet rows with a null text were skipped" in bs.summary(info, "out")


def test_parquet_errors_name_the_file(tmp_path):
  path = str(tmp_path / "cols.parquet")
  _write_parquet(path, {"id": [1, 2], "content": ["a", "b"]})
  with pytest.raises(corpus.CorpusError, match=r"cols.parquet: no column 'text' \(its columns: "
                     r"id, content; set --text_field\)"):
    list(corpus.iter_documents([path]))
  with pytest.raises(corpus.CorpusError, match="cols.parquet: column 'id' holds int64, not text"):
    list(corpus.iter_documents([path], text_field="id"))
  bad = tmp_path / "bad.parquet"
  bad.write_bytes(b"PAR1 this is not parquet")
  with pytest.raises(corpus.CorpusError, match="bad.parquet' is not a readable Parquet file"):
    list(corpus.iter_documents([str(bad)]))


def test_inputs_on_urls(ram):
  # ram:// lists only directories made with makedirs (a file's parents "exist" but list empty).
  files.makedirs(f"{ram}/a")
  files.makedirs(f"{ram}/b")
  _write_jsonl(f"{ram}/a/one.jsonl", ["one doc"])
  with files.open(f"{ram}/b/two.txt", "w") as f:
    f.write("line\n\nnext doc\n")
  assert corpus.resolve_inputs(ram) == [f"{ram}/a/one.jsonl", f"{ram}/b/two.txt"]
  assert corpus.resolve_inputs(f"{ram}/*/*.txt, {ram}/a/one.jsonl") == [
      f"{ram}/b/two.txt", f"{ram}/a/one.jsonl"]
  assert list(corpus.iter_documents(corpus.resolve_inputs(ram))) == [
      ["one doc"], ["line"], ["next doc"]]
  with pytest.raises(corpus.CorpusError, match=f"input file '{ram}/no.jsonl' does not exist"):
    corpus.resolve_inputs(f"{ram}/no.jsonl")
  with pytest.raises(corpus.CorpusError, match=f"glob '{ram}/\\*.txt' matches no file"):
    corpus.resolve_inputs(f"{ram}/*.txt")
  with pytest.raises(files.UnknownSchemeError, match="--input=nofs://x/a.txt: no file system"):
    corpus.resolve_inputs("nofs://x/a.txt")
  # A gzip file on a URL reads through the seekable file object.
  with files.open(f"{ram}/c.txt.gz", "wb") as f:
    f.write(gzip.compress(b"zipped line\n"))
  assert list(corpus.iter_documents([f"{ram}/c.txt.gz"])) == [["zipped line"]]
  assert not os.path.exists("ram:")


def test_stdlib_docstring_paragraphs_are_whole_texts():
  # What ast.get_docstring(clean=True) gives: wrapped prose, a bullet, an indented code line, a
  # doctest with output. Prose lines join with one space; code and doctest lines stay lines.
  docstring = ("Write the data.  The offsets must be\nsequential, and\n  the file\n\n"
               "- a bullet that\n  wraps\nUsage:\n    f(x)\n\n>>> f(1)\n2")
  first = stdlib_corpus.docstring_texts(docstring)
  assert first == ["Write the data. The offsets must be sequential, and", "  the file",
                   "- a bullet that wraps", "Usage:", "    f(x)", ">>> f(1)", "2"]
  texts = stdlib_corpus.document_texts([docstring, "Second\ndocstring."])
  # Each text after the first starts with whitespace: packed one after another (no separator),
  # no two words glue together.
  assert texts == first[:1] + ["  the file", " - a bullet that wraps", " Usage:", "    f(x)",
                               " >>> f(1)", " 2", " Second docstring."]
  assert "".join(texts).startswith("Write the data. The offsets must be sequential, and  the")
