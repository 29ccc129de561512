"""Documents packed without attending across (issue 61 point 2): `separate_documents` shards keep
each document's start (data_prep/packing.py, data/example_spec.py), batches carry per-token
document ids, and ModernBERT gives each document of a packed row the logits it gives it alone
(local and global layers, several blocks and chunks); a packed run resumes exactly; a RoBERTa
model refuses such shards. FULL-SENTENCES' own blocks: tests/test_packing.py."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.data import example_spec, pipeline
from roberta_tf.data.masking import MaskingConfig
from roberta_tf.data.vocab_info import VocabInfo
from roberta_tf.models import registry
from roberta_tf.models.modernbert import modernbert_config, rotary_embedding, windowed_attention
from roberta_tf.models.modernbert.windowed_attention import attend, attend_reference
from roberta_tf.pretraining import run as pretraining
from roberta_tf.pretraining.train_config import TrainConfig
from tests.conftest import HF_TINY
from tests.domain_text import domain_lines
from tests.harness import call_module, crashed_copy
from tests.test_train_resume import _checkpoint, _train_loss

BOS, PAD, EOS = 0, 1, 2
STEPS = 6


@pytest.fixture
def small_blocks(monkeypatch):
  """Local query blocks of 4 and global chunks of 5: a 20-token row spans several of each."""
  monkeypatch.setattr(windowed_attention, "LOCAL_BLOCK", 4)
  monkeypatch.setattr(windowed_attention, "GLOBAL_CHUNK", 5)


def test_document_positions_restart_at_each_document():
  ids = tf.constant([[0, 0, 0, 1, 1, 2, 2, 2], [0] * 8, [0, 1, 1, 1, 1, 1, 1, 1]])
  assert rotary_embedding.document_positions(ids).numpy().tolist() == [
      [0, 1, 2, 0, 1, 0, 1, 2], list(range(8)), [0, 0, 1, 2, 3, 4, 5, 6]]


@pytest.mark.parametrize("radius", [None, 1, 2, 4])
def test_attend_keeps_documents_apart_as_the_reference(small_blocks, radius):
  rng = np.random.default_rng(radius or 0)
  q, k, v = (tf.constant(rng.normal(size=(2, 2, 20, 8)).astype(np.float32)) for _ in range(3))
  mask = np.ones((2, 20), np.int32)
  mask[1, 15:] = 0
  documents = np.array([[0] * 3 + [1] * 9 + [2] * 8, [0] * 11 + [1] * 9], np.int32)
  got = attend(q, k, v, mask, radius, document_ids=documents)
  want = attend_reference(q, k, v, mask, radius, document_ids=documents)
  real = mask[:, None, :, None].astype(bool)
  np.testing.assert_allclose(np.where(real, got, 0), np.where(real, want, 0), atol=1e-5)
  # The reference itself: document 1 of row 0 attends as the rows of its tokens alone.
  alone = attend_reference(q[:1, :, 3:12], k[:1, :, 3:12], v[:1, :, 3:12], mask[:1, 3:12], radius)
  np.testing.assert_allclose(want[:1, :, 3:12], alone, atol=1e-6)


def _tiny_modernbert():
  """3 layers: 0 and 2 global, 1 local with radius 2; weights large enough that the context
  moves the logits by far more than float32 rounding."""
  config = modernbert_config.preset(
      "tiny", vocab_size=60, hidden_size=16, num_heads=2, intermediate_size=24, num_layers=3,
      global_attn_every_n_layers=2, local_attention=4, initializer_range=0.3, pad_id=PAD,
      bos_id=BOS, eos_id=EOS, max_seq_len=64)
  return registry.build_pretrainer(config)


def _logits(model, ids, mask, documents=None):
  x = {"input_ids": np.asarray(ids, np.int32), "padding_mask": np.asarray(mask, np.int32),
       "mask_positions": np.tile(np.arange(len(ids[0]), dtype=np.int32), (len(ids), 1))}
  if documents is not None:
    x["document_ids"] = np.asarray(documents, np.int32)
  return model(x).numpy()


def test_a_row_of_documents_gives_each_its_logits_alone(small_blocks):
  rng = np.random.default_rng(0)
  docs = [np.concatenate([[BOS], rng.integers(5, 60, n), [EOS]]) for n in (4, 9, 13, 6)]
  rows = [docs[:3], docs[3:]]  # [6, 11, 15] and [8] tokens, padded to 32
  length = 32
  ids = np.full((2, length), PAD)
  documents = np.zeros((2, length), np.int32)
  for r, row in enumerate(rows):
    at = 0
    for d, doc in enumerate(row):
      ids[r, at:at + len(doc)], documents[r, at:] = doc, d
      at += len(doc)
  mask = (ids != PAD).astype(np.int32)
  model = _tiny_modernbert()
  packed = _logits(model, ids, mask, documents)
  crossed = _logits(model, ids, mask)
  worst, across = 0.0, 0.0
  for r, row in enumerate(rows):
    at = 0
    for doc in row:
      alone = _logits(model, doc[None], np.ones((1, len(doc))))[0]
      worst = max(worst, float(np.abs(packed[r, at:at + len(doc)] - alone).max()))
      across = max(across, float(np.abs(crossed[r, at:at + len(doc)] - alone).max()))
      at += len(doc)
  print(f"max |packed - alone| {worst:.2g}; without document ids {across:.2g}")
  assert worst <= 1e-5 and across > 1e-2


def _corpus(path):
  """Short documents (1-2 sentences): several share each 128-id row."""
  lines = domain_lines(240, seed=1)
  docs, i, rng = [], 0, np.random.default_rng(0)
  while i < len(lines):
    n = int(rng.integers(1, 3))
    docs.append("\n".join(lines[i:i + n]))
    i += n
  path.write_text("\n\n".join(docs) + "\n", encoding="utf-8")
  return str(path)


@pytest.fixture(scope="module")
def doc_shards(tmp_path_factory):
  tmp = tmp_path_factory.mktemp("doc_shards")
  out = str(tmp / "shards")
  run = call_module("data_prep.build_shards", f"--input={_corpus(tmp / 'corpus.txt')}",
                    f"--vocab_dir={HF_TINY}", f"--output_dir={out}", "--max_seq_len=128",
                    "--packing=separate_documents", "--num_shards=1",
                    "--validation_fraction=0.1", "--noprogress")
  assert run.returncode == 0, run.stderr[-2000:]
  return out


def test_shards_keep_document_starts_and_batches_carry_document_ids(doc_shards):
  info = json.load(open(os.path.join(doc_shards, "dataset_info.json"), encoding="utf-8"))
  assert info["packing"] == "separate_documents"
  path = os.path.join(doc_shards, info["splits"]["train"]["shards"][0]["file"])
  records = [r.numpy() for r in tf.data.TFRecordDataset(path)]
  ids, starts = example_spec.parse_documents_batch(tf.constant(records))
  assert example_spec.documents_are_valid(ids, starts, BOS, EOS).numpy().all()
  for row, row_starts in zip(ids.to_list(), starts.to_list(), strict=True):
    assert [i for i, t in enumerate(row) if t == BOS] == row_starts
  assert max(len(s) for s in starts.to_list()) >= 3  # rows do pack several documents
  bad = example_spec.serialize([BOS, 7, EOS, BOS, 8, EOS], document_starts=[0, 2])
  assert not example_spec.documents_are_valid(
      *example_spec.parse_documents_batch(tf.constant([bad])), BOS, EOS).numpy()[0]

  vocab = VocabInfo.for_dataset(doc_shards, info)
  config = pipeline.InputConfig(per_replica_batch_size=4, max_seq_len=128).for_eval()
  batch = next(iter(pipeline.build_pretraining_dataset(doc_shards, "train", vocab, config,
                                                       MaskingConfig(mask_prob=0.3))))
  documents, real = batch["document_ids"].numpy(), batch["padding_mask"].numpy()
  for r, row_starts in enumerate(starts.to_list()[:4]):  # eval order: the shard's order
    want = np.searchsorted(row_starts, np.arange(128), side="right") - 1
    np.testing.assert_array_equal(documents[r], want)
    assert real[r].sum() == len(ids[r])


def test_a_packed_modernbert_run_resumes_exactly(doc_shards, tmp_path):
  a, b = str(tmp_path / "a"), str(tmp_path / "b")

  def config(model_dir):  # test_model_families.py's resumed ModernBERT run, on packed shards
    return TrainConfig.from_dict(dict(
        family="modernbert", config="tiny", train_data=doc_shards, eval_data=doc_shards,
        model_dir=model_dir, max_seq_len=128, batch_size=4, train_steps=STEPS, warmup_steps=2,
        learning_rate=1e-3, seed=3, shuffle_buffer=50, log_every=1, checkpoint_every=3,
        eval_every=STEPS, eval_steps=2, keep_checkpoints=5, peak_flops=1e12,
        model_option=("hidden_size=32", "intermediate_size=48", "num_heads=2",
                      "local_attention=8")))
  assert pretraining.pretrain(config(a)).step == STEPS  # evaluates on the packed eval split
  crashed_copy(a, b, 3)
  assert pretraining.pretrain(config(b)).step == STEPS
  for step in range(4, STEPS + 1):
    assert abs(_train_loss(a, step) - _train_loss(b, step)) <= 1e-5, step
  expected, actual = _checkpoint(a), _checkpoint(b)
  assert sorted(expected) == sorted(actual)
  for key, value in expected.items():
    np.testing.assert_allclose(actual[key], value, rtol=0, atol=1e-5, err_msg=key)


def test_roberta_refuses_document_packed_shards(doc_shards, tmp_path):
  run = call_module("roberta_tf.train", "--config=tiny", f"--train_data={doc_shards}",
                    f"--model_dir={tmp_path / 'r'}", "--max_seq_len=128", "--batch_size=4",
                    "--train_steps=1", "--warmup_steps=0")
  assert run.returncode != 0
  last = run.stderr.strip().splitlines()[-1]
  assert last.startswith("error: ") and "'separate_documents' shards keep documents apart" in last
