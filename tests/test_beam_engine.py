"""Tests for data_prep/beam_engine.py: --engine=beam writes the local engine's files, byte for byte.

Real Beam runners in this process (DirectRunner, one worker) and in worker processes
(DirectRunner multi_processing, two workers, through the binary), on a corpus written here:
several files of both formats, split into several document groups each.
"""

import gzip
import json
import os

import pytest

from data_prep import shard_builder as bs
from tests.conftest import TESTDATA
from tests.harness import run_module

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


def _files(out):
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


def test_beam_writes_the_local_engines_files_with_one_and_two_workers(tmp_path):
  src = _corpus(str(tmp_path / "corpus"))
  local = bs.build_shards(src, VOCAB, str(tmp_path / "local"), encoder="tf", **FLAGS)
  assert local["splits"]["validation"]["num_sequences"] > 0
  assert local["source"]["documents"]["train"] > 10
  # Several groups per file: blocks of many groups meet in every shard.
  assert local["source"]["input_bytes"] > 4 * FLAGS["group_bytes"]
  expected = _files(tmp_path / "local")

  # A sort buffer of a few records: Beam sorts many key-range buckets per shard, the local
  # engine one; the bytes are the same.
  bs.build_shards(src, VOCAB, str(tmp_path / "beam1"), encoder="tf", engine="beam",
                  beam_options="--runner=DirectRunner --direct_num_workers=1", sort_bytes=3000,
                  **FLAGS)
  assert _files(tmp_path / "beam1") == expected

  flags = [f"--{k}={v}" for k, v in FLAGS.items()]
  r = run_module("data_prep.build_shards", f"--input={src}", f"--vocab_dir={VOCAB}",
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
  local = bs.build_shards(src, VOCAB, str(tmp_path / "local"), encoder="tf", **flags)
  assert local["packing"] == "segment_pair" and local["splits"]["train"]["num_sequences"] > 50
  bs.build_shards(src, VOCAB, str(tmp_path / "beam"), encoder="tf", engine="beam",
                  beam_options="--runner=DirectRunner --direct_num_workers=1", **flags)
  assert _files(tmp_path / "beam") == _files(tmp_path / "local")
