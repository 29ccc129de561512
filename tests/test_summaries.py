"""TensorBoard summaries: grouped tags with descriptions, read back by TensorBoard's own reader."""

import os

import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator

from roberta_tf.training import summaries as summaries_lib


def _read(path):
  """{tag: (description, {step: value})} of one run directory."""
  acc = event_accumulator.EventAccumulator(path, size_guidance={"tensors": 0})
  acc.Reload()
  return {tag: (acc.SummaryMetadata(tag).summary_description,
                {e.step: float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)})
          for tag in acc.Tags()["tensors"]}


def test_pretraining_tags_groups_and_the_unigram_run(tmp_path):
  s = summaries_lib.Summaries(str(tmp_path))
  s.scalars("train", 5, {"loss": 2.0, "perplexity": 7.4, "grad_norm": 1.5,
                         "tokens_per_sec": 1e4, "learning_rate": 1e-4})
  s.scalars("eval", 5, {"loss": 3.0, "perplexity": 20.1, "mlm_accuracy": 0.3,
                        "unigram_perplexity": 900.0})
  # The NSP ablation: training's "loss" is MLM + NSP, "mlm_loss" the MLM part.
  s.scalars("train", 6, {"loss": 2.5, "mlm_loss": 2.1, "nsp_loss": 0.4, "nsp_accuracy": 0.8})
  train, evaluation = _read(str(tmp_path / "train")), _read(str(tmp_path / "eval"))
  unigram = _read(str(tmp_path / "eval" / "unigram"))
  assert sorted(train) == ["mlm/loss", "mlm/perplexity", "nsp/accuracy", "nsp/loss",
                           "optim/grad_norm", "optim/learning_rate", "optim/total_loss",
                           "perf/tokens_per_sec"]
  assert train["mlm/loss"][1] == {5: 2.0, 6: pytest.approx(2.1)}
  assert train["optim/total_loss"][1] == {6: 2.5}
  assert sorted(evaluation) == ["mlm/accuracy", "mlm/loss", "mlm/perplexity"]
  assert unigram["mlm/perplexity"][1] == {5: 900.0}  # the same chart as eval's perplexity
  for run in (train, evaluation, unigram):
    for tag, (description, _) in run.items():
      assert len(description) > 20, tag


def test_finetuning_tags(tmp_path):
  s = summaries_lib.Summaries(str(tmp_path), tags=summaries_lib.FINETUNING)
  s.scalars("train", 10, {"loss": 0.6, "learning_rate": 2e-5, "skipped_steps": 0.0})
  s.scalars("eval", 10, {"accuracy": 0.7, "mcc": 0.4, "f1": 0.66})
  assert sorted(_read(str(tmp_path / "train"))) == [
      "optim/learning_rate", "optim/skipped_steps", "task/loss"]
  evaluation = _read(str(tmp_path / "eval"))
  assert sorted(evaluation) == ["task/accuracy", "task/f1", "task/mcc"]
  assert evaluation["task/accuracy"][0].startswith("Dev-set accuracy")
  assert not os.path.exists(tmp_path / "eval" / "unigram")


def test_disabled_writes_nothing(tmp_path):
  s = summaries_lib.Summaries(str(tmp_path / "run"), enabled=False)
  s.scalars("train", 1, {"loss": 1.0})
  assert not os.path.exists(tmp_path / "run")
