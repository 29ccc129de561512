"""Tests for data_prep/build_shards.py: the shard + dataset_info.json contract, end to end."""

import collections
import functools
import gzip
import json
import os
import uuid

import numpy as np
import pytest
import tensorflow as tf

from data_prep import corpus, sentence_encoders
from data_prep import shard_builder as bs
from data_prep.shard_settings import ShardSettings
from roberta_tf.common import files
from roberta_tf.data import dataset_info
from roberta_tf.tokenization import vocab_files
from tests.conftest import TESTDATA
from tests.harness import call_module

SMALL = os.path.join(TESTDATA, "python_docs_small.jsonl.gz")
VOCAB = os.path.join(TESTDATA, "hf_roberta_tiny")
BOS, EOS = 0, 2


@functools.cache
def _encoder(kind):
  """One encoder of each kind for the whole file (the TF tokenizer takes seconds to trace)."""
  return sentence_encoders.make_encoder(kind, sentence_encoders.load_vocab(VOCAB))


def _settings(input_spec, vocab_dir, out, **kwargs) -> ShardSettings:
  return ShardSettings(input=input_spec, vocab_dir=vocab_dir, output_dir=str(out), progress=False,
                       **kwargs)


def _build(out, input_spec=SMALL, encoder="tf", **kwargs):
  kwargs = {"max_seq_len": 64, "num_shards": 4, **kwargs}
  return bs.build_shards(_settings(input_spec, VOCAB, out, encoder=encoder, **kwargs),
                         encode=_encoder(encoder))


def _records(path, compression="none"):
  ds = tf.data.TFRecordDataset(path, compression_type=bs.shard_writer.COMPRESSIONS[compression])
  return [list(tf.train.Example.FromString(r.numpy()).features.feature["input_ids"].int64_list
               .value) for r in ds]


def _split_records(out, split, compression="none"):
  info = dataset_info.read(str(out))
  return [_records(f, compression) for f in dataset_info.split_files(str(out), info, split)]


def _files(out):
  return {name: open(os.path.join(out, name), "rb").read() for name in sorted(os.listdir(out))}


@pytest.fixture(scope="module")
def small_docs():
  """The small corpus's documents, each a list of sentence id lists (the HF peer's ids)."""
  encode = _encoder("hf")  # the peer's ids; the shards are written with the TF tokenizer's
  docs = []
  for doc in corpus.iter_documents(corpus.resolve_inputs(SMALL)):
    values, splits = encode(doc)
    docs.append([values[splits[i]:splits[i + 1]].tolist() for i in range(len(doc))])
  return docs


def test_contract_and_dataset_info(tmp_path):
  info = _build(tmp_path, validation_fraction=0.2, seed=1)
  assert dataset_info.read(str(tmp_path)) == {
      k: v for k, v in info.items() if k not in ("elapsed_s", "cpu_s", "setup_s")}
  assert info["vocab"] == {"sha256": vocab_files.file_sha256(os.path.join(VOCAB, "vocab.json")),
                           "merges_sha256": vocab_files.file_sha256(
                               os.path.join(VOCAB, "merges.txt")), "size": 8000}
  assert info["special_ids"] == {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 4}
  assert (info["max_seq_len"], info["packing"], info["compression"]) == (
      64, "full_sentences", "none")
  assert info["source"]["vocab_file"] == "vocab.json" and info["source"]["vocab_dir"] == VOCAB
  docs = info["source"]["documents"]
  assert docs["train"] > 0 and docs["validation"] > 0 and docs["train"] + docs["validation"] == 20
  assert sorted(os.listdir(tmp_path)) == ["dataset_info.json", "merges.txt",
                                          "train-00000-of-00004.tfrecord",
                                          "train-00001-of-00004.tfrecord",
                                          "train-00002-of-00004.tfrecord",
                                          "train-00003-of-00004.tfrecord",
                                          "validation-00000-of-00001.tfrecord", "vocab.json"]
  assert info["shuffle"] == {"scheme": "global_hash", "seed": 1}
  for split, split_info in info["splits"].items():
    shards = _split_records(tmp_path, split)
    sizes = [len(s) for s in shards]
    # Routed by hash: multinomial sizes (within 5 sd of n / shards).
    mean = sum(sizes) / len(sizes)
    assert all(abs(n - mean) <= 5 * np.sqrt(mean) for n in sizes), sizes
    for records, shard in zip(shards, split_info["shards"]):
      assert shard["num_sequences"] == len(records)
      assert shard["num_tokens"] == sum(len(r) for r in records)
      for r in records:
        assert 3 <= len(r) <= 64 and r[0] == BOS and r[-1] == EOS
    n = sum(sizes)
    t = sum(len(r) for s in shards for r in s)
    assert (split_info["num_sequences"], split_info["num_tokens"]) == (n, t)
    assert split_info["packing_efficiency"] == pytest.approx(t / (n * 64), abs=1e-6)
  assert info["splits"]["train"]["packing_efficiency"] > 0.8  # whole sentences, 62-id blocks
  dataset_info.check_compatible(info, vocab_size=8000, max_positions=66, where=str(tmp_path))


@pytest.mark.parametrize("packing", ["full_sentences", "doc_sentences"])
def test_nothing_lost_or_repeated_and_validation_takes_whole_documents(
    tmp_path, small_docs, packing):
  # Several document groups (packed independently), read back in corpus order: one shard per
  # split, unshuffled (the shuffle only reorders: test_shuffle_is_deterministic_and_only_reorders).
  info = _build(tmp_path, packing=packing, validation_fraction=0.3, seed=3, shuffle_blocks=False,
                num_shards=1, num_validation_shards=1, group_bytes=5000)
  assert info["shuffle"]["scheme"] == "corpus"
  # Precondition: no special id inside the text, so stripping them strips only separators.
  assert not {BOS, EOS} & {i for d in small_docs for s in d for i in s}
  content = {}
  for split in ("train", "validation"):
    [blocks] = _split_records(tmp_path, split)
    if packing == "doc_sentences":
      assert all(EOS not in b[1:-1] for b in blocks)
    content[split] = [i for b in blocks for i in b[1:-1] if i != EOS]
  # Each document, in corpus order, is the next run of ids of exactly one split's content.
  at = {"train": 0, "validation": 0}
  counts = collections.Counter()
  for doc in small_docs:
    ids = [i for s in doc for i in s]
    split = next(s for s in at if content[s][at[s]:at[s] + len(ids)] == ids)
    at[split] += len(ids)
    counts[split] += 1
  assert at == {s: len(c) for s, c in content.items()}
  assert dict(counts) == info["source"]["documents"]
  assert counts["validation"] > 0


def test_shuffle_is_deterministic_and_only_reorders(tmp_path):
  kw = {"validation_fraction": 0, "group_bytes": 5000}
  plain = _build(tmp_path / "plain", shuffle_blocks=False, **kw)
  a = _build(tmp_path / "a", **kw)
  _build(tmp_path / "b", **kw)
  assert _files(tmp_path / "a") == _files(tmp_path / "b")  # dataset_info.json included
  assert "validation" not in a["splits"]
  ordered = _split_records(tmp_path / "plain", "train")
  shuffled = _split_records(tmp_path / "a", "train")
  # The same shards (routing is by key either way), each in another order.
  assert [sorted(s) for s in ordered] == [sorted(s) for s in shuffled]
  assert all(o != s for o, s in zip(ordered, shuffled, strict=True))
  assert plain["splits"]["train"]["num_tokens"] == a["splits"]["train"]["num_tokens"]
  _build(tmp_path / "c", seed=7, **kw)
  reseeded = [r for s in _split_records(tmp_path / "c", "train") for r in s]
  assert sorted(reseeded) == sorted(r for s in shuffled for r in s)
  assert reseeded != [r for s in shuffled for r in s]


def test_the_sort_buffer_bounds_memory_not_the_output(tmp_path):
  # A tiny buffer: every shard is cut into key-range buckets (recursively), sorted one by one.
  kw = {"validation_fraction": 0.2, "group_bytes": 5000, "num_shards": 2}
  _build(tmp_path / "mem", **kw)
  _build(tmp_path / "ext", sort_bytes=2000, **kw)
  assert _files(tmp_path / "ext") == _files(tmp_path / "mem")
  assert "_build_shards.tmp" not in os.listdir(tmp_path / "ext")


def test_leftovers_of_a_killed_build_do_not_block_the_rerun(tmp_path):
  out = tmp_path / "out"
  (out / bs.SPILL_DIR).mkdir(parents=True)
  (out / bs.SPILL_DIR / "train-00000-of-00002.tfrecord").write_bytes(b"x" * 100)
  (out / "train-00001-of-00002.tfrecord.tmp").write_bytes(b"partial")
  _build(out, num_shards=2)
  assert sorted(os.listdir(out)) == ["dataset_info.json", "merges.txt",
                                     "train-00000-of-00002.tfrecord",
                                     "train-00001-of-00002.tfrecord",
                                     "validation-00000-of-00001.tfrecord", "vocab.json"]


def test_gzip_compression_holds_the_same_records(tmp_path):
  _build(tmp_path / "none")
  info = _build(tmp_path / "gz", compression="gzip")
  assert info["compression"] == "gzip"
  assert _split_records(tmp_path / "gz", "train", "gzip") == _split_records(
      tmp_path / "none", "train")


def test_input_forms_txt_jsonl_dir_glob_list(tmp_path):
  docs = [["First sentence of doc one.", "Second one."], ["Doc two, only line."],
          ["Third <mask> doc.", "ends here"]]
  src = tmp_path / "src"
  (src / "sub").mkdir(parents=True)
  (src / "a.txt").write_text("\n\n".join("\n".join(d) for d in docs[:2]) + "\n")
  with gzip.open(src / "sub" / "b.jsonl.gz", "wt") as f:
    f.write(json.dumps({"body": "\n".join(docs[2])}) + "\n")
  kw = {"validation_fraction": 0, "text_field": "body", "shuffle_blocks": False,
        "num_shards": 1}
  by_list = _build(tmp_path / "l", f"{src}/a.txt,{src}/sub/b.jsonl.gz", **kw)
  _build(tmp_path / "d", str(src), **kw)
  _build(tmp_path / "g", f"{src}/**/*.*", **kw)
  assert by_list["source"]["documents"]["train"] == 3
  assert _files(tmp_path / "l")["train-00000-of-00001.tfrecord"] == _files(
      tmp_path / "d")["train-00000-of-00001.tfrecord"] == _files(
          tmp_path / "g")["train-00000-of-00001.tfrecord"]
  # Packing crosses documents within a file's group, never across files: one block per file.
  [[a_block, b_block]] = _split_records(tmp_path / "l", "train")
  assert a_block.count(EOS) == 2  # the document separator + the final </s>
  assert b_block.count(EOS) == 1 and 4 in b_block  # <mask>


@pytest.mark.slow
def test_stdlib_input(tmp_path):
  info = _build(tmp_path, "stdlib", max_seq_len=512, num_shards=2)
  assert info["source"]["documents"]["train"] > 100
  assert info["splits"]["train"]["num_tokens"] > 100_000


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
  path = tmp_path / "bad.txt"
  path.write_bytes(b"caf\xe9 ok\nnext \xff\xfe line\n\nsecond doc\n")
  info = _build(tmp_path / "out", str(path), validation_fraction=0, num_shards=1)
  assert info["source"]["invalid_utf8"] == 3  # \xe9, \xff, \xfe
  assert "invalid UTF-8: 3" in bs.summary(info, "out")
  [[block]] = _split_records(tmp_path / "out", "train")
  assert block[1:4] == _encoder("hf")(["caf\ufffd ok"])[0].tolist()[:3]


@pytest.mark.timeout(60)
def test_ten_megabyte_line_is_split_and_finishes(tmp_path):
  words = " ".join(f"word{i % 997}" for i in range(1_300_000))[:10_000_000]
  path = tmp_path / "huge.txt"
  path.write_text("short line\n" + words + "\n")
  info = _build(tmp_path / "out", str(path), max_seq_len=512, validation_fraction=0)
  assert info["source"]["split_lines"] == 1
  assert info["splits"]["train"]["num_tokens"] > 2_000_000
  assert info["splits"]["train"]["packing_efficiency"] > 0.99


def test_overwrite_refused_then_replaces_stale_shards(tmp_path):
  _build(tmp_path, num_shards=4)
  with pytest.raises(bs.BuildError, match="not empty; pass --overwrite"):
    _build(tmp_path, num_shards=2)
  _build(tmp_path, num_shards=2, overwrite=True)
  assert sorted(os.listdir(tmp_path)) == ["dataset_info.json", "merges.txt",
                                          "train-00000-of-00002.tfrecord",
                                          "train-00001-of-00002.tfrecord",
                                          "validation-00000-of-00001.tfrecord", "vocab.json"]


def test_failure_midway_leaves_nothing_that_looks_complete(tmp_path):
  bad = tmp_path / "z_corrupt.jsonl.gz"
  bad.write_bytes(gzip.compress(b'{"text": "fine"}\n' * 1000)[:-40] + b"garbage" * 10)
  spec = f"{SMALL},{bad}"
  with pytest.raises(corpus.CorpusError, match="z_corrupt.jsonl.gz"):
    _build(tmp_path / "new", spec)
  assert not (tmp_path / "new").exists()  # created by the run, removed with its temp files
  _build(tmp_path / "old")
  with pytest.raises(corpus.CorpusError):
    _build(tmp_path / "old", spec, overwrite=True)
  names = os.listdir(tmp_path / "old")
  assert "dataset_info.json" not in names and not any(n.endswith(".tmp") for n in names)


def test_tf_tokenizer_gives_the_same_shards_as_hf_tokenizers(tmp_path):
  _build(tmp_path / "hf", encoder="hf", validation_fraction=0.2)
  _build(tmp_path / "tf", encoder="tf", validation_fraction=0.2)
  assert _files(tmp_path / "hf") == _files(tmp_path / "tf")


def test_any_encoder_callable_plugs_in(tmp_path):
  # A list[str] -> list[list[int]] encoder: one id per UTF-8 byte (ids 5..260).
  byte_ids = sentence_encoders.from_lists(lambda ss: [[5 + b for b in s.encode()] for s in ss])
  path = tmp_path / "c.txt"
  path.write_text("ab\ncd\n\nef\n")
  bs.build_shards(_settings(str(path), VOCAB, tmp_path / "out", max_seq_len=6, num_shards=1,
                            validation_fraction=0, shuffle_blocks=False), encode=byte_ids)
  assert _split_records(tmp_path / "out", "train") == [
      [[BOS, 102, 103, 104, 105, EOS], [BOS, 106, 107, EOS]]]  # "abcd" fills a block


def _ram_copy(ram):
  """The fixture vocabulary and the small corpus under ``ram`` (a ram:// folder)."""
  files.makedirs(f"{ram}/vocab")
  files.makedirs(f"{ram}/corpus")
  for name in ("vocab.json", "merges.txt"):
    files.copy(os.path.join(VOCAB, name), f"{ram}/vocab/{name}")
  files.copy(SMALL, f"{ram}/corpus/small.jsonl.gz")


def _url_files(out):
  return {n: files.read_bytes(files.join(out, n)) for n in sorted(files.listdir(out))}


def _without_paths(info_bytes):
  """dataset_info.json's content less the paths it records (they name the inputs)."""
  info = json.loads(info_bytes)
  for key in ("input", "files", "vocab_dir"):
    del info["source"][key]
  return info


def test_urls_for_input_vocab_and_output_give_the_local_files(tmp_path):
  ram = f"ram://{uuid.uuid4().hex}"
  _ram_copy(ram)
  kw = {"max_seq_len": 64, "num_shards": 2, "validation_fraction": 0.2, "compression": "gzip",
        "sort_bytes": 5000}  # a small sort buffer: the local spill files are bucketed
  bs.build_shards(_settings(SMALL, VOCAB, tmp_path / "local", **kw), encode=_encoder("tf"))
  expected = _files(tmp_path / "local")
  info = bs.build_shards(_settings(f"{ram}/corpus", f"{ram}/vocab", f"{ram}/out", **kw),
                         encode=_encoder("tf"))
  assert info["source"]["files"] == [f"{ram}/corpus/small.jsonl.gz"]
  got = _url_files(f"{ram}/out")
  assert got.keys() == expected.keys()  # no spill folder or temporary file left there
  assert {n: b for n, b in got.items() if n != "dataset_info.json"} == {
      n: b for n, b in expected.items() if n != "dataset_info.json"}
  assert _without_paths(got["dataset_info.json"]) == _without_paths(
      expected["dataset_info.json"])
  assert dataset_info.read(f"{ram}/out")["splits"] == info["splits"]

  # The binary (in process): the same shards; an unknown scheme is refused in one line.
  r = _run_binary(f"--input={ram}/corpus/*.jsonl.gz", f"--vocab_dir={ram}/vocab",
                  f"--output_dir={ram}/bin", "--max_seq_len=64", "--num_shards=2",
                  "--validation_fraction=0.2", "--compression=gzip", "--encoder=hf",
                  "--noprogress")
  assert r.returncode == 0, r.stderr
  assert f"wrote {ram}/bin:" in r.stdout
  assert {n: b for n, b in _url_files(f"{ram}/bin").items() if n != "dataset_info.json"} == {
      n: b for n, b in expected.items() if n != "dataset_info.json"}
  r = _run_binary(f"--input={SMALL}", f"--vocab_dir={VOCAB}", "--output_dir=nofs://b/out")
  assert r.returncode == 1 and "--output_dir=nofs://b/out: no file system handles 'nofs://'" in (
      r.stderr), r.stderr

  # A failure leaves nothing that looks complete on the URL either.
  files.copy(SMALL, f"{ram}/corpus/a.jsonl.gz")
  with files.open(f"{ram}/corpus/z_corrupt.jsonl.gz", "wb") as f:
    f.write(gzip.compress(b'{"text": "fine"}\n' * 1000)[:-40] + b"garbage" * 10)
  with pytest.raises(corpus.CorpusError, match=f"{ram}/corpus/z_corrupt.jsonl.gz"):
    bs.build_shards(_settings(f"{ram}/corpus", f"{ram}/vocab", f"{ram}/new", **kw),
                    encode=_encoder("tf"))
  assert not files.exists(f"{ram}/new")
  with pytest.raises(corpus.CorpusError, match="z_corrupt"):
    bs.build_shards(_settings(f"{ram}/corpus", f"{ram}/vocab", f"{ram}/out", overwrite=True,
                              **kw), encode=_encoder("tf"))
  names = files.listdir(f"{ram}/out")
  assert "dataset_info.json" not in names and not any(n.endswith(".tmp") for n in names)
  assert not os.path.exists("ram:")  # nothing went to a local "ram:" folder


def _run_binary(*args):
  return call_module("data_prep.build_shards", *args)


@pytest.mark.slow
def test_binary_success_and_bad_inputs(tmp_path):
  out = tmp_path / "out"
  empty = tmp_path / "empty.txt"
  empty.write_text("\n\n  \n")
  (tmp_path / "novocab").mkdir()
  common = [f"--vocab_dir={VOCAB}", "--max_seq_len=128"]  # the default encoder: tf
  ok = _run_binary(f"--input={SMALL}", f"--output_dir={out}", "--num_shards=2", *common)
  assert ok.returncode == 0, ok.stderr
  assert "train:" in ok.stdout and "packing efficiency" in ok.stdout
  assert "MB/s" in ok.stderr and "sequences" in ok.stderr  # the progress line
  assert dataset_info.read(str(out))["splits"]["train"]["num_sequences"] > 0
  cases = [
      ([f"--input={tmp_path}/missing.jsonl", f"--output_dir={tmp_path}/o1", *common],
       "missing.jsonl' does not exist"),
      ([f"--input={SMALL}", f"--output_dir={tmp_path}/o2", f"--vocab_dir={tmp_path}/novocab"],
       "novocab' has no vocab.json"),
      ([f"--input={empty}", f"--output_dir={tmp_path}/o3", *common], "holds no text"),
      ([f"--input={SMALL}", f"--output_dir={out}", *common], "not empty; pass --overwrite"),
  ]
  for args, message in cases:
    r = _run_binary(*args)
    assert r.returncode == 1 and message in r.stderr, (args, r.stderr)
  assert not any((tmp_path / o).exists() for o in ("o1", "o2", "o3"))
  assert np.array_equal(sorted(os.listdir(out)), ["dataset_info.json", "merges.txt",
                                                  "train-00000-of-00002.tfrecord",
                                                  "train-00001-of-00002.tfrecord",
                                                  "validation-00000-of-00001.tfrecord",
                                                  "vocab.json"])
