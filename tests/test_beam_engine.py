"""Tests for data_prep/beam_engine.py: --engine=beam writes the local engine's files, byte for byte.

Real Beam runners in this process (DirectRunner, one worker) and in worker processes
(DirectRunner multi_processing, two workers, through the binary), on a corpus written here:
several files of both formats, split into several document groups each. And the pipeline on
``mem://``, a Beam file system of this test only (a dict): every file the pipeline touches goes
through Beam's FileSystems, none through a local path API or tf.io.gfile (neither knows
``mem://``).
"""

import gzip
import io
import json
import os
import threading

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.io.filesystem import BeamIOError, FileMetadata, FileSystem

from data_prep import beam_engine, sentence_encoders
from data_prep import shard_builder as bs
from data_prep.shard_settings import ShardSettings
from tests.conftest import TESTDATA
from tests.harness import call_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

VOCAB = os.path.join(TESTDATA, "hf_roberta_tiny")
FLAGS = {"max_seq_len": 64, "num_shards": 3, "num_validation_shards": 2,
         "validation_fraction": 0.25, "seed": 5, "group_bytes": 4000}


def _corpus(root):
  """Three .jsonl(.gz) files and a .txt file from the small docs corpus, under ``root``."""
  with gzip.open(os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), "rt") as f:
    docs = [json.loads(line)["text"] for line in f if line.strip()]
  os.makedirs(root)
  for i in range(3):
    with gzip.open(os.path.join(root, f"part{i}.jsonl.gz"), "wt") as f:
      f.writelines(json.dumps({"text": d}) + "\n" for d in docs[i::4])
  with open(os.path.join(root, "part3.txt"), "w", encoding="utf-8") as f:
    f.write("\n\n".join(d.strip() for d in docs[3::4]) + "\n")
  return root


def _settings(src, out, **kwargs):
  return ShardSettings(input=src, vocab_dir=VOCAB, output_dir=str(out), progress=False, **kwargs)


def _files(out):
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


def test_beam_writes_the_local_engines_files_with_one_and_two_workers(tmp_path):
  src = _corpus(str(tmp_path / "corpus"))
  local = bs.build_shards(_settings(src, tmp_path / "local", **FLAGS))
  assert local["splits"]["validation"]["num_sequences"] > 0
  assert local["source"]["documents"]["train"] > 10
  # Several groups per file: blocks of many groups meet in every shard.
  assert local["source"]["input_bytes"] > 4 * FLAGS["group_bytes"]
  expected = _files(tmp_path / "local")

  # A sort buffer of a few records: Beam sorts many key-range buckets per shard, the local
  # engine one; the bytes are the same.
  bs.build_shards(_settings(src, tmp_path / "beam1", engine="beam", sort_bytes=3000,
                            beam_options="--runner=DirectRunner --direct_num_workers=1", **FLAGS))
  assert _files(tmp_path / "beam1") == expected

  flags = [f"--{k}={v}" for k, v in FLAGS.items()]
  r = call_module("data_prep.build_shards", f"--input={src}", f"--vocab_dir={VOCAB}",
                  f"--output_dir={tmp_path / 'beam2'}", "--engine=beam", *flags,
                  "--beam_options=--runner=DirectRunner --direct_num_workers=2 "
                  "--direct_running_mode=multi_processing")
  assert r.returncode == 0, r.stderr[-3000:]
  assert "train:" in r.stdout
  assert _files(tmp_path / "beam2") == expected  # dataset_info.json included


def test_beam_writes_the_local_engines_pair_shards(tmp_path):
  """The NSP ablation's pairs draw coins per (seed, split, group): the same bytes either way."""
  src = _corpus(str(tmp_path / "corpus"))
  flags = {**FLAGS, "packing": "segment_pair"}
  local = bs.build_shards(_settings(src, tmp_path / "local", **flags))
  assert local["packing"] == "segment_pair" and local["splits"]["train"]["num_sequences"] > 50
  bs.build_shards(_settings(src, tmp_path / "beam", engine="beam",
                            beam_options="--runner=DirectRunner --direct_num_workers=1", **flags))
  assert _files(tmp_path / "beam") == _files(tmp_path / "local")


class MemFileSystem(FileSystem):
  """``mem://``: files in a dict of this process, for Beam's FileSystems (test only)."""

  FILES: dict[str, bytes] = {}
  _lock = threading.Lock()

  @classmethod
  def scheme(cls):
    return "mem"

  def join(self, basepath, *paths):
    return "/".join([basepath.rstrip("/"), *(p.strip("/") for p in paths)])

  def split(self, path):
    head, _, tail = path.rpartition("/")
    return head, tail

  def mkdirs(self, path):
    pass

  def has_dirs(self):
    return False

  def _list(self, dir_or_prefix):
    with self._lock:
      items = [(p, len(b)) for p, b in self.FILES.items() if p.startswith(dir_or_prefix)]
    for path, size in items:
      yield FileMetadata(path, size)

  def create(self, path, mime_type=None, compression_type=None):
    fs = self

    class Writer(io.BytesIO):
      def close(self):
        if not self.closed:
          with fs._lock:
            fs.FILES[path] = self.getvalue()
        super().close()

    return Writer()

  def open(self, path, mime_type=None, compression_type=None):
    with self._lock:
      if path not in self.FILES:
        raise BeamIOError("open failed", {path: FileNotFoundError(path)})
      return io.BytesIO(self.FILES[path])

  def copy(self, source_file_names, destination_file_names):
    with self._lock:
      for src, dst in zip(source_file_names, destination_file_names, strict=True):
        self.FILES[dst] = self.FILES[src]

  def rename(self, source_file_names, destination_file_names):
    with self._lock:
      for src, dst in zip(source_file_names, destination_file_names, strict=True):
        self.FILES[dst] = self.FILES.pop(src)

  def exists(self, path):
    return path in self.FILES

  def size(self, path):
    return len(self.FILES[path])

  def last_updated(self, path):
    return 0.0

  def metadata(self, path):
    return FileMetadata(path, self.size(path))

  def delete(self, paths):
    with self._lock:
      for path in paths:
        del self.FILES[path]


def test_the_pipeline_does_all_its_file_access_through_beams_file_systems(tmp_path):
  """Inputs (gzip JSONL, text, Parquet) on mem://, shards and sorted buckets written there:
  the local engine's bytes (gzip shards), and nothing left but the temporary shards."""
  src = _corpus(str(tmp_path / "corpus"))
  with gzip.open(os.path.join(src, "part0.jsonl.gz"), "rt") as f:
    texts = [json.loads(line)["text"] for line in f]
  os.remove(os.path.join(src, "part0.jsonl.gz"))
  pq.write_table(pa.table({"text": texts}), os.path.join(src, "part0.parquet"),
                 row_group_size=2)
  names = sorted(os.listdir(src))
  flags = {**FLAGS, "compression": "gzip"}
  local = bs.build_shards(_settings(src, tmp_path / "local", encoder="hf", **flags))
  MemFileSystem.FILES.clear()
  for name in names:
    with open(os.path.join(src, name), "rb") as f:
      MemFileSystem.FILES[f"mem://corpus/{name}"] = f.read()

  settings = _settings("mem://corpus", "mem://out", encoder="hf", engine="beam",
                       beam_options="--runner=DirectRunner --direct_num_workers=1", **flags)
  shard_stats, doc_counts, stats = beam_engine.run(
      [f"mem://corpus/{n}" for n in names], "mem://out", "mem://out/_build_shards.tmp",
      vocab=sentence_encoders.load_vocab(VOCAB), settings=settings)
  assert doc_counts == local["source"]["documents"]
  assert stats.total_bytes == sum(len(MemFileSystem.FILES[f"mem://corpus/{n}"]) for n in names)
  expected = {n: b for n, b in _files(tmp_path / "local").items() if n.endswith(".tfrecord")}
  assert {p for p in MemFileSystem.FILES if p.startswith("mem://out")} == {
      f"mem://out/{n}.tmp" for n in expected}  # the buckets and the result file are gone
  for name, data in expected.items():
    assert MemFileSystem.FILES[f"mem://out/{name}.tmp"] == data, name
  for split, shards in shard_stats.items():
    assert [s.num_sequences for s in shards] == [
        s["num_sequences"] for s in local["splits"][split]["shards"]]
  assert not os.path.exists("mem:")

  with pytest.raises(beam_engine.BeamPathError, match="--output_dir=ram://x: --engine=beam"):
    beam_engine.check_paths({"--input": ["mem://corpus/part1.jsonl.gz"],
                             "--output_dir": ["ram://x"]})
  with pytest.raises(beam_engine.BeamPathError, match="--output_dir=ram://o"):
    bs.build_shards(_settings(src, "ram://o", encoder="hf", engine="beam", **FLAGS))
