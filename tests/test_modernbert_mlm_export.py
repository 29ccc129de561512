"""The MLM export (`roberta_tf.export`) of an imported ModernBERT model dir: `fill_mask` on raw
"[MASK]" texts, in a fresh process, gives our model's top 5 (its full_logits) and, where
transformers is installed, its fill-mask pipeline's top 5 on the same HF folder."""

import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from tests import serving_loaders
from tests.conftest import TESTDATA
from tests.harness import call_module

HF_FIXTURE = os.path.join(TESTDATA, "modernbert_tiny")
TEXTS = ["the film was [MASK] , I think", "Alice owns a [MASK].",
         "The weather was mild and nothing [MASK] that day."]


@pytest.fixture(scope="module")
def export(tmp_path_factory):
  root = tmp_path_factory.mktemp("mb_mlm_export")
  model_dir, export_dir = str(root / "M"), str(root / "SM")
  proc = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={HF_FIXTURE}",
                     f"--model_dir={model_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  proc = call_module("roberta_tf.export", f"--model_dir={model_dir}",
                     f"--export_dir={export_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  loaded = serving_loaders.loader_runs(
      {export_dir: [("f", "fill_mask", {"text": TEXTS}), ("t", "tokenize", {"text": TEXTS})]},
      str(root / "out.npz"))
  return model_dir, export_dir, loaded


def test_fill_mask_is_our_models_top5(export):
  model_dir, export_dir, loaded = export
  pretrainer = models.load(model_dir)
  for loader in ("tf2", "tf1"):
    fill = serving_loaders.outputs_of(loaded[loader][export_dir], "f")
    tokens = serving_loaders.outputs_of(loaded[loader][export_dir], "t")
    assert fill["num_masks"].tolist() == [1, 1, 1]
    probs = tf.nn.softmax(pretrainer.full_logits(tokens["input_ids"],
                                                 tokens["padding_mask"])).numpy()
    for row, position in enumerate(fill["mask_positions"][:, 0]):
      want = np.argsort(-probs[row, position])[:5]
      np.testing.assert_array_equal(fill["top_ids"][row, 0], want)
      np.testing.assert_allclose(fill["top_probs"][row, 0], probs[row, position, want],
                                 atol=1e-5, rtol=0)


def test_fill_mask_is_transformers_pipeline(export):
  _, export_dir, loaded = export
  pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  pipe = transformers.pipeline("fill-mask", model=HF_FIXTURE, top_k=5, device="cpu")
  fill = serving_loaders.outputs_of(loaded["tf2"][export_dir], "f")
  for row, text in enumerate(TEXTS):
    theirs = pipe(text)
    assert fill["top_ids"][row, 0].tolist() == [c["token"] for c in theirs], text
    np.testing.assert_allclose(fill["top_probs"][row, 0], [c["score"] for c in theirs],
                               atol=1e-4, rtol=0)
