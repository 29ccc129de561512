"""Text-embedding fine-tuning end to end (tiny model, synthetic question/answer pairs with hard
negatives, a BEIR-layout dev set): it learns, and the candidates span the global batch: two
MultiWorkerMirroredStrategy workers on localhost, each with half the batch, train exactly as
one process with the whole batch (same losses, same dev metrics)."""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.finetuning import sweep_runner
from roberta_tf.finetuning.embedding import embed_problem
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from tests import finetune_fixtures as fx
from tests.harness import free_port, module_env, start_module

FLAGS = dict(task="embedding", text_fields=("query", "document", "negative"), max_seq_len=24,
             batch_size=16, epochs=2, learning_rate=1e-3, seeds=1, batching="random", dropout=0.0)


@pytest.fixture(scope="module")
def run(tmp_path_factory, hf_tiny_dir):
  root = tmp_path_factory.mktemp("embedding")
  paths = {"pretrained": fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained")),
           "train": fx.write_table(str(root / "train.jsonl"),
                                   fx.embedding_rows(64, 0, negatives=True)),
           "dev": fx.write_beir(str(root / "dev"), 24, 1)}
  cfg = FinetuneConfig.from_dict(dict(
      model_dir=str(root / "one"), train_file=paths["train"], eval_file=paths["dev"],
      init_from=paths["pretrained"], **FLAGS))
  return paths, sweep_runner.run_sweep(cfg)


def test_it_learns_to_retrieve(run):
  _, results = run
  history = results["runs"][0]["history"]
  assert results["metric"] == "ndcg_at_10"
  assert history[-1]["train_loss"] < history[0]["train_loss"] < np.log(2 * 16)
  assert results["ndcg_at_10"] > 0.5 and results["recall_at_100"] == 1.0, results


def test_the_loss_is_the_cross_entropy_over_every_candidate():
  """One replica: anchors against all positives then all negatives (sentence-transformers'
  MultipleNegativesRankingLoss), scaled cosines; the symmetric loss adds positives->anchors."""
  rng = np.random.default_rng(0)
  e = tf.math.l2_normalize(tf.constant(rng.normal(size=(4, 3, 5)), tf.float32), axis=-1)
  a, p, n = e[:, 0].numpy(), e[:, 1].numpy(), e[:, 2].numpy()
  logits = 20.0 * a @ np.concatenate([p, n]).T
  log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
  want = -log_softmax[np.arange(4), np.arange(4)].sum()
  np.testing.assert_allclose(embed_problem.ranking_loss_sum(e, 20.0).numpy(), want,
                             rtol=1e-5)
  back = 20.0 * p @ a.T
  back_want = -(back - np.log(np.exp(back).sum(1, keepdims=True)))[np.arange(4), np.arange(4)]
  np.testing.assert_allclose(embed_problem.ranking_loss_sum(e, 20.0, symmetric=True).numpy(),
                             0.5 * (want + back_want.sum()), rtol=1e-5)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_two_workers_train_as_one_with_the_combined_batch(run, tmp_path):
  paths, one = run
  ports = [free_port(), free_port()]
  args = [f"--{k}={','.join(v) if isinstance(v, tuple) else v}" for k, v in FLAGS.items()]
  procs = []
  for index in range(2):
    tf_config = {"cluster": {"worker": [f"localhost:{p}" for p in ports]},
                 "task": {"type": "worker", "index": index}}
    procs.append(start_module(
        "roberta_tf.finetune", *args, "--strategy=multi_worker",
        f"--init_from={paths['pretrained']}", f"--train_file={paths['train']}",
        f"--eval_file={paths['dev']}", f"--model_dir={tmp_path / 'two'}",
        env=module_env(TF_CONFIG=json.dumps(tf_config)), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT))
  outputs = [p.communicate(timeout=280)[0] for p in procs]
  assert [p.returncode for p in procs] == [0, 0], outputs[0][-3000:] + outputs[1][-3000:]
  assert "2 replica(s)" in outputs[0]
  with open(os.path.join(tmp_path, "two", "eval_results.json"), encoding="utf-8") as f:
    two = json.load(f)
  got, want = two["runs"][0]["history"], one["runs"][0]["history"]
  np.testing.assert_allclose([h["train_loss"] for h in got], [h["train_loss"] for h in want],
                             rtol=1e-4)
  for name in ("ndcg_at_10", "mrr_at_10"):
    np.testing.assert_allclose([h["dev"][name] for h in got], [h["dev"][name] for h in want],
                               atol=1e-6)
