"""Input lanes (roberta_tf/data/training_stream.py): under multi-worker each input pipeline reads
only its share of the train shards, and every global step holds the same sequences (and masks)
for any number of pipelines, replicas and accumulation steps; one lane is the stream before
lanes, sequence for sequence.

The shards here are synthetic: record r of shard i is <s> 1000+i 2000+r ... </s>, so every row of
a masked batch names the record it was made from, and shards of unequal sizes make lanes of
unequal epochs.
"""

import collections
import dataclasses
import hashlib
import json
import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.data import dataset_info, example_spec
from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset
from roberta_tf.data.training_stream import effective_lanes
from roberta_tf.data.vocab_info import VocabInfo
from roberta_tf.pretraining import inputs
from roberta_tf.pretraining.train_config import TrainConfig
from tests.harness import run_script

S = 16
VOCAB = VocabInfo(vocab_size=8000, special_ids={"bos": 0, "pad": 1, "eos": 2, "unk": 3,
                                                "mask": 4})
COUNTS = (37, 52, 23, 41, 30, 45, 28, 33)  # 289 sequences
G = 48  # the global batch: sequences per step
CONFIG = InputConfig(per_replica_batch_size=G, max_seq_len=S, seed=5, shuffle_buffer=40,
                     global_batch_size=G)


def write_shards(out, counts=COUNTS, length=12):
  """Train shards of `counts` records of `length` ids, and their dataset_info.json."""
  os.makedirs(out, exist_ok=True)
  listed = []
  for i, n in enumerate(counts):
    name = f"train-{i:05d}-of-{len(counts):05d}.tfrecord"
    with tf.io.TFRecordWriter(os.path.join(out, name)) as w:
      for r in range(n):
        filler = [5000 + (i * 31 + r * 7 + j) % 2000 for j in range(length - 4)]
        w.write(example_spec.serialize([0, 1000 + i, 2000 + r, *filler, 2]))
    listed.append({"file": name, "num_sequences": n, "num_tokens": n * length})
  info = {"format_version": 1, "vocab": {"sha256": "0" * 64, "size": VOCAB.vocab_size},
          "special_ids": VOCAB.special_ids, "max_seq_len": max(S, length),
          "packing": "full_sentences", "compression": "none",
          "shuffle": {"scheme": dataset_info.GLOBAL_SHUFFLE, "seed": 0},
          "splits": {"train": {"num_sequences": sum(counts), "num_tokens": sum(counts) * length,
                               "shards": listed}}}
  dataset_info.write(out, info)
  return out


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  return write_shards(str(tmp_path_factory.mktemp("lane_shards")))


def names(batch):
  """(shard, record) of each row of a masked batch (the predictions put back)."""
  ids = np.array(batch["input_ids"])
  rows, slots = np.nonzero(np.asarray(batch["mask_weights"]) > 0)
  ids[rows, np.asarray(batch["mask_positions"])[rows, slots]] = np.asarray(
      batch["mask_ids"])[rows, slots]
  return [(int(r[1]) - 1000, int(r[2]) - 2000) for r in ids]


def rows(batch):
  """Each row of a masked batch whole: its record, its masked ids and its mask."""
  b = {k: v.numpy() for k, v in batch.items()}
  return [(name, *(b[k][i].tobytes() for k in sorted(b)))
          for i, name in enumerate(names(b))]


def pipeline_batches(shards, config, *, pipelines=1, replicas=1, accum=1, steps=4):
  """[pipeline][step] -> that pipeline's batches of the step (A x R/P of them)."""
  local = replicas // pipelines
  config = dataclasses.replace(config, per_replica_batch_size=G // (accum * replicas))
  out = []
  for p in range(pipelines):
    ctx = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=p,
                                     num_replicas_in_sync=replicas)
    it = iter(build_pretraining_dataset(shards, "train", VOCAB, config, input_context=ctx))
    out.append([[next(it) for _ in range(accum * local)] for _ in range(steps)])
  return out


def step_multisets(per_pipeline):
  """Per step: the sorted rows of every pipeline's batches of the step together."""
  return [sorted(row for pipeline in per_pipeline for batch in pipeline[t] for row in rows(batch))
          for t in range(len(per_pipeline[0]))]


def test_effective_lanes_divide_the_batch_and_the_shards_and_ignore_the_world_size():
  assert effective_lanes(8, 16, 256) == 8
  assert effective_lanes(8, 1, 256) == 1
  assert effective_lanes(8, 12, 256) == 4  # divides 12 and 256
  assert effective_lanes(8, 16, 24) == 8
  assert effective_lanes(8, 16, 12) == 4
  assert effective_lanes(8, 6, 9) == 3
  assert effective_lanes(1, 16, 256) == 1


@pytest.mark.timeout(240)
@pytest.mark.parametrize("lanes, splits", [  # (pipelines, replicas, accumulation steps)
    (8, [(2, 2, 2), (4, 8, 1)]),
    (4, [(3, 3, 2)]),  # 3 does not divide 4: every pipeline reads every lane
])
def test_every_split_of_a_step_holds_the_same_sequences_and_masks(shards, lanes, splits):
  config = dataclasses.replace(CONFIG, lanes=lanes)
  single = step_multisets(pipeline_batches(shards, config, steps=3))
  for t, step in enumerate(single):
    # Each step takes G/L sequences of every lane (lane l: shards l, l + L, ...).
    assert collections.Counter(row[0][0] % lanes for row in step) == {
        lane: G // lanes for lane in range(lanes)}, t
  for pipelines, replicas, accum in splits:
    got = step_multisets(pipeline_batches(shards, config, pipelines=pipelines,
                                          replicas=replicas, accum=accum, steps=3))
    for t in range(3):
      assert got[t] == single[t], (pipelines, replicas, accum, t)


def test_a_pipeline_reads_its_lanes_only_and_each_lane_epoch_once(shards):
  config = dataclasses.replace(CONFIG, lanes=4)
  split = pipeline_batches(shards, config, pipelines=2, replicas=2, steps=9)
  for p, pipeline in enumerate(split):
    seen = [row[0] for step in pipeline for batch in step for row in rows(batch)]
    assert {shard % 4 for shard, _ in seen} == {2 * p, 2 * p + 1}
    for lane in (2 * p, 2 * p + 1):  # 108 sequences of the lane: its first epoch, in full
      lane_seen = [s for s in seen if s[0] % 4 == lane]
      size = sum(COUNTS[lane::4])
      assert sorted(lane_seen[:size]) == sorted(
          (i, r) for i in range(lane, len(COUNTS), 4) for r in range(COUNTS[i]))
      assert lane_seen[:size] != sorted(lane_seen[:size])  # shuffled


@pytest.mark.timeout(180)
@pytest.mark.parametrize("pipelines", [1, 2])
def test_a_stream_started_at_a_position_is_the_tail_of_one_started_at_0(shards, pipelines):
  # Lane position 5*48/4 = 60: lane 2 (shards 2 and 6, 51 sequences) is in its epoch 1, inside
  # a window of 40/4 = 10.
  config = dataclasses.replace(CONFIG, lanes=4)
  straight = pipeline_batches(shards, config, pipelines=pipelines, replicas=2, accum=2, steps=8)
  resumed = pipeline_batches(shards, dataclasses.replace(config, start=5 * G),
                             pipelines=pipelines, replicas=2, accum=2, steps=3)
  for p in range(pipelines):
    for t in range(3):
      for a, b in zip(straight[p][5 + t], resumed[p][t], strict=True):
        for k in a:
          np.testing.assert_array_equal(a[k].numpy(), b[k].numpy(), err_msg=f"{p} {t} {k}")
  with pytest.raises(ValueError, match="a multiple of lanes"):
    dataclasses.replace(config, start=G + 3)


def _digest(batches):
  h = hashlib.sha256()
  for b in batches:
    for k in sorted(b):
      h.update(k.encode())
      h.update(np.ascontiguousarray(b[k].numpy()).tobytes())
  return h.hexdigest()[:16]


# Recorded from the stream before lanes (pipeline.py's _training_stream at 4f8d529): a digest
# of every masked batch (ids, masks), and the first records (shard * 1000 + record) as a guide.
GOLDEN_ONE_LANE = {
    "shuffled": (dict(), None, 80, "1cf1d2c76544623d",
                 [32, 36, 1, 4, 3002, 3012, 3008, 3005, 0, 35, 16, 3010]),
    "start": (dict(start=101), None, 10, "071a3cb49bdb08cb",
              [5039, 6005, 5037, 5040, 5034, 5024, 6016, 5041, 6020, 6006, 6021, 6018]),
    "start_epoch1": (dict(start=289 + 45), None, 10, "39d438a70b586c07",
                     [2004, 5014, 5039, 5024, 5035, 7020, 7016, 7028, 2011, 7004, 7010, 7012]),
    "no_shuffle": (dict(shuffle_buffer=0), None, 40, "9fee6d7978acec97",
                   [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]),
    "pipeline0": (dict(), 0, 6, "c9443bf5525b5b6a",
                  [32, 36, 1, 4, 3002, 3012, 3008, 3005, 0, 35, 16, 3010]),
    "pipeline1": (dict(), 1, 6, "3ab22d46c3ab00f4",
                  [12, 29, 11, 18, 31, 8, 2, 3009, 25, 21, 27, 22]),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", sorted(GOLDEN_ONE_LANE))
def test_one_lane_is_the_stream_before_lanes(shards, case):
  overrides, pipeline, n, digest, first = GOLDEN_ONE_LANE[case]
  config = InputConfig(**{"per_replica_batch_size": 8, "max_seq_len": S, "seed": 5,
                          "shuffle_buffer": 50, **overrides})
  ctx = None if pipeline is None else tf.distribute.InputContext(
      num_input_pipelines=2, input_pipeline_id=pipeline, num_replicas_in_sync=4)
  ds = build_pretraining_dataset(shards, "train", VOCAB, config, input_context=ctx)
  batches = [b for _, b in zip(range(n), ds)]
  order = [s * 1000 + r for b in batches for s, r in names({k: v.numpy() for k, v in b.items()})]
  assert order[:12] == first
  assert _digest(batches) == digest


# In a fresh process: the bytes (rchar of /proc/self/io: every read(2)/pread(2), page cache or
# not) this process reads while pipeline p of P yields `steps` steps, for P=1 and both of P=2.
_READS = r"""
import dataclasses, json, sys
import tensorflow as tf
from roberta_tf.data.pipeline import build_pretraining_dataset
from tests.test_worker_share import CONFIG, G, VOCAB

def rchar():
  with open("/proc/self/io") as f:
    return int(next(line for line in f if line.startswith("rchar:")).split()[1])

shards, steps, lanes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def read(pipelines, p, steps=steps):
  config = dataclasses.replace(CONFIG, lanes=lanes, per_replica_batch_size=G // pipelines,
                               max_seq_len=100)
  ctx = tf.distribute.InputContext(num_input_pipelines=pipelines, input_pipeline_id=p,
                                   num_replicas_in_sync=pipelines)
  ds = build_pretraining_dataset(shards, "train", VOCAB, config, input_context=ctx)
  before = rchar()
  it = iter(ds)
  for _ in range(steps):
    next(it)
  read = rchar() - before
  del it
  return read
read(1, 0, steps=2)  # the first iteration's one-time reads
print(json.dumps({"1": read(1, 0), "2/0": read(2, 0), "2/1": read(2, 1)}))
"""


@pytest.mark.timeout(180)
def test_each_of_two_pipelines_reads_about_half_the_bytes_of_one(tmp_path):
  # 16 shards of ~13 KB, 8 lanes of 2 (~120 sequences); 20 steps read each lane once.
  counts = [58, 61, 60, 57, 62, 59, 60, 61, 58, 60, 59, 62, 61, 57, 60, 59]
  shards = write_shards(str(tmp_path / "big"), counts, length=100)
  total = sum(os.path.getsize(os.path.join(shards, f)) for f in os.listdir(shards)
              if f.endswith(".tfrecord"))
  result = run_script(_READS, shards, 20, 8, timeout=170)
  assert result.returncode == 0, result.stderr[-3000:]
  reads = json.loads(result.stdout.strip().splitlines()[-1])
  assert reads["1"] >= total, (reads, total)  # every shard (and read-ahead)
  for p in ("2/0", "2/1"):
    assert reads[p] <= 0.6 * reads["1"], (p, reads)
  assert reads["2/0"] + reads["2/1"] <= 1.1 * reads["1"], reads


def _fake_run(model_dir, training):
  """A model dir with a checkpoint index and config.json's "training" section."""
  os.makedirs(model_dir, exist_ok=True)
  open(os.path.join(model_dir, "ckpt-3.index"), "wb").close()
  with open(os.path.join(model_dir, "config.json"), "w", encoding="utf-8") as f:
    json.dump({"model": {}, "training": training}, f)


def test_a_run_keeps_its_lanes_and_a_run_from_before_lanes_resumes_with_one(shards, tmp_path):
  info = dataset_info.read(shards)  # 8 shards
  cfg = lambda d, **kw: TrainConfig.from_dict(dict(  # noqa: E731
      model_dir=str(tmp_path / d), train_data=shards, batch_size=48, **kw))
  assert inputs.input_lanes(cfg("new"), info) == 8
  assert inputs.input_lanes(cfg("new", input_lanes=6), info) == 4  # divides 8 and 48
  _fake_run(str(tmp_path / "old"), {"batch_size": 48, "seed": 0})  # written before lanes
  assert inputs.input_lanes(cfg("old"), info) == 1
  assert inputs.input_lanes(cfg("old", overwrite=True), info) == 8
  _fake_run(str(tmp_path / "two"), {"batch_size": 48, "input_lanes": 2})
  assert inputs.input_lanes(cfg("two", input_lanes=8), info) == 2
  # A resume at a batch the recorded lanes do not divide: the lanes both divide.
  _fake_run(str(tmp_path / "eight"), {"batch_size": 48, "input_lanes": 8})
  assert inputs.input_lanes(cfg("eight").replace(batch_size=36), info) == 4
