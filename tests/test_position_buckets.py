"""The held-out loss by position bucket (pretraining/position_buckets.py, `evaluate`)."""

import glob
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from roberta_tf import models
from roberta_tf.data import pipeline
from roberta_tf.models import registry
from roberta_tf.pretraining import mlm_evaluation, position_buckets
from roberta_tf.pretraining.objective import model_inputs
from tests.conftest import HF_TINY
from tests.harness import FIXTURE_VOCAB_SIZE, call_module


def test_bucket_names_and_what_the_report_leaves_out():
  assert position_buckets.bucket_names(position_buckets.DEFAULT_EDGES) == [
      "0-512", "512-1K", "1K-2K", "2K-4K", "4K-8K", "8K+"]
  edges = (16, 32, 48)
  # The last bucket (48+) holds nothing: left out; the others' means in position order.
  got = position_buckets.report([6.0, 3.0, 8.0, 0.0], [2.0, 1.0, 4.0, 0.0], edges)
  assert got == {"loss_by_position": {"0-16": 3.0, "16-32": 3.0, "32-48": 2.0},
                 "masked_tokens_by_position": {"0-16": 2.0, "16-32": 1.0, "32-48": 4.0}}
  assert position_buckets.report([6.0, 0.0, 0.0, 0.0], [2.0, 0.0, 0.0, 0.0], edges) == {}
  assert not position_buckets.edges_ok((16, 16)) and not position_buckets.edges_ok(())


def _hand_buckets(model_dir, shards, edges):
  """The loss by bucket from each masked token's cross-entropy, computed here in NumPy over
  the batches `evaluate` reads (no training section: 15% masks of seed 0, every sequence)."""
  config = models.read_config(model_dir)
  model = models.load(model_dir)
  dataset = pipeline.build_dataset(shards, "validation", training=False,
                                   per_replica_batch_size=32, max_seq_len=64, masking=None,
                                   model_config=config, seed=0, shuffle_buffer=0)
  sums, counts = {}, {}
  for batch in dataset:
    logits = model(model_inputs(batch), training=False).numpy().astype(np.float64)
    log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(
        -1, keepdims=True)) - logits.max(-1, keepdims=True)
    ids, weights = batch["mask_ids"].numpy(), batch["mask_weights"].numpy()
    for (b, p), pos in np.ndenumerate(batch["mask_positions"].numpy()):
      if weights[b, p]:
        lo = max([0, *[e for e in edges if e <= pos]])
        sums[lo] = sums.get(lo, 0.0) - log_probs[b, p, ids[b, p]]
        counts[lo] = counts.get(lo, 0) + 1
  return {lo: sums[lo] / counts[lo] for lo in sorted(sums)}, counts


def test_evaluate_reports_the_loss_by_position_computed_by_hand(train_shards, tmp_path):
  """A random tiny ModernBERT (init std 0.5, so tokens' losses differ widely) on the 64-token
  test shards, buckets 0-8, 8-32, 32+ (in position order, which is not the names' order): the
  result file, the console and TensorBoard give the per-bucket means of the per-token losses
  computed here."""
  config = registry.preset("modernbert", "tiny", vocab_size=FIXTURE_VOCAB_SIZE, max_seq_len=64,
                           pad_id=1, bos_id=0, eos_id=2, hidden_size=64, num_heads=2,
                           intermediate_size=96, local_attention=16, initializer_range=0.5)
  model_dir = str(tmp_path / "model")
  models.save(model_dir, registry.build_pretrainer(config),
              files={n: os.path.join(HF_TINY, n) for n in ("vocab.json", "merges.txt")})
  out = tmp_path / "result.json"
  run = call_module("roberta_tf.evaluate", f"--model_dir={model_dir}",
                    f"--eval_data={train_shards}", "--position_buckets=8,32",
                    f"--output_file={out}", "--nounigram")
  assert run.returncode == 0, run.stderr[-2000:]
  held_out = json.loads(out.read_text())["held_out"]
  expected, counts = _hand_buckets(model_dir, train_shards, (8, 32))
  assert list(held_out["loss_by_position"]) == ["0-8", "8-32", "32+"]
  np.testing.assert_allclose(list(held_out["loss_by_position"].values()),
                             list(expected.values()), rtol=1e-5)
  assert list(held_out["masked_tokens_by_position"].values()) == list(counts.values())
  spread = max(expected.values()) - min(expected.values())
  assert spread > 0.05, expected  # the buckets differ: a mix-up would show
  total = sum(held_out["loss_by_position"][k] * held_out["masked_tokens_by_position"][k]
              for k in held_out["loss_by_position"])
  assert total / held_out["masked_tokens"] == pytest.approx(held_out["loss"], rel=1e-5)
  assert "loss by position: 0-8 " in run.stdout
  runs = glob.glob(os.path.join(model_dir, "evaluate", "*"))
  assert len(runs) == 1
  acc = event_accumulator.EventAccumulator(runs[0], size_guidance={"tensors": 0})
  acc.Reload()
  board = {tag: float(tf.make_ndarray(acc.Tensors(tag)[-1].tensor_proto))
           for tag in acc.Tags()["tensors"]}
  assert board["mlm_by_position/8-32"] == pytest.approx(expected[8], rel=1e-5)
  assert board["mlm/loss"] == pytest.approx(held_out["loss"], rel=1e-6)


def test_packed_rows_bucket_by_the_position_in_each_document():
  """A row of two documents (`document_ids`, separate_documents shards): a masked token counts
  at its position in its own document, so the second document's tokens fall in the first
  bucket again (with positions in the row they would not)."""
  config = registry.preset("modernbert", "tiny", vocab_size=64, max_seq_len=16, pad_id=1,
                           bos_id=0, eos_id=2, hidden_size=32, num_heads=2,
                           intermediate_size=48, local_attention=4)
  evaluator = mlm_evaluation.Evaluator(tf.distribute.get_strategy(),
                                       registry.build_pretrainer(config), position_edges=(4,))
  batch = {"input_ids": tf.constant([[0, 5, 6, 7, 8, 2, 0, 9, 10, 11, 2, 1]]),
           "padding_mask": tf.constant([[1] * 11 + [0]]),
           "document_ids": tf.constant([[0] * 6 + [1] * 6]),
           "mask_positions": tf.constant([[2, 5, 7, 9]]),  # doc positions 2, 5, 1, 3
           "mask_ids": tf.constant([[6, 2, 9, 11]]),
           "mask_weights": tf.constant([[1.0, 1.0, 1.0, 1.0]])}
  got = evaluator([batch])
  assert got["masked_tokens_by_position"] == {"0-4": 3.0, "4+": 1.0}, got
  del batch["document_ids"]  # one document: row positions 2, 5, 7, 9
  assert evaluator([batch])["masked_tokens_by_position"] == {"0-4": 1.0, "4+": 3.0}
