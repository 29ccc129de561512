"""`convert_checkpoint --to_hf` writes a complete Hugging Face folder: the tokenizer files
(golden), usual file modes, and, where transformers + torch are installed, HF's own
`pipeline("fill-mask")` on it gives our SavedModel's fill_mask top-5 (long texts included)."""

import importlib.util
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.models import registry
from roberta_tf.serving import mlm_export
from tests.conftest import TESTDATA
from tests.harness import call_module, module_env, run_script

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

GOLDEN = os.path.join(TESTDATA, "hf_tokenizer_files")
FILES = ["config.json", "merges.txt", "model.safetensors", "special_tokens_map.json",
         "tokenizer_config.json", "vocab.json"]
HAVE_HF = all(importlib.util.find_spec(m) for m in ("transformers", "torch"))

# Spaces, a tab, a newline before <mask>; a text starting with it; two in one text; and texts
# longer than the model's max_seq_len (64) with the <mask> within the first 62 tokens.
LONG = " ".join(["More words follow here, and then some more."] * 12)
TEXTS = ["The capital of France is <mask>.", "a  <mask> b", "The\t<mask> statement defines it.",
         "Line one\n<mask> two.", "<mask> starts the text.", "Two <mask> in one <mask>.",
         f"The <mask> of the word. {LONG}", f"{LONG[:150]} <mask> {LONG}"]

# transformers' fill-mask pipeline and tokenizer on the folder, in a fresh process (torch).
_HF = r"""
import json, sys
from transformers import pipeline
fill = pipeline("fill-mask", model=sys.argv[1], top_k=5, device="cpu")
out = {"model_max_length": fill.tokenizer.model_max_length, "ids": [], "top": []}
for text in json.loads(sys.argv[2]):
  out["ids"].append(fill.tokenizer(text, truncation=True)["input_ids"])
  preds = fill(text, tokenizer_kwargs={"truncation": True})
  preds = preds if isinstance(preds[0], list) else [preds]  # one list per <mask>
  out["top"].append([[(p["token"], p["score"]) for p in mask] for mask in preds])
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def folders(tmp_path_factory, hf_tiny_dir):
  """(model dir, --to_hf folder, SavedModel) of the tiny fixture with a sharpened MLM head."""
  root = tmp_path_factory.mktemp("hf_folder")
  pretrainer = registry.load_hf(hf_tiny_dir)
  # A random model's top-5 probabilities lie within ~1e-5 of each other, so TF and torch may
  # order near-ties differently. A larger LayerNorm scale before the tied decoder spreads them.
  gamma = pretrainer.mlm_head.intermediate_layer_norm.gamma
  gamma.assign(gamma * 40.0)
  model_dir, hf_dir = str(root / "model"), str(root / "hf")
  models.save(model_dir, pretrainer)
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(hf_tiny_dir, name), model_dir)
  result = call_module("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={model_dir}",
                       f"--hf_dir={hf_dir}")
  assert result.returncode == 0, result.stderr[-3000:]
  assert "tokenizer_config.json" in result.stdout
  export_dir = mlm_export.export_saved_model(model_dir, str(root / "saved_model"), top_k=5)
  return model_dir, hf_dir, export_dir


def test_tokenizer_files_are_golden_and_modes_usual(folders):
  _, hf_dir, _ = folders
  assert sorted(os.listdir(hf_dir)) == FILES
  for name in ("tokenizer_config.json", "special_tokens_map.json"):
    with open(os.path.join(hf_dir, name), encoding="utf-8") as got, open(
        os.path.join(GOLDEN, name), encoding="utf-8") as want:
      assert got.read() == want.read(), name
  umask = os.umask(0)
  os.umask(umask)
  modes = {name: oct(os.stat(os.path.join(hf_dir, name)).st_mode & 0o777) for name in FILES}
  assert modes == dict.fromkeys(FILES, oct(0o666 & ~umask))


@pytest.mark.skipif(not HAVE_HF, reason="transformers and torch are not installed "
                    "(requirements-bench.txt)")
def test_hf_fill_mask_pipeline_gives_our_top5(folders):
  _, hf_dir, export_dir = folders
  proc = run_script(_HF, hf_dir, json.dumps(TEXTS), timeout=600,
                    env=module_env(CUDA_VISIBLE_DEVICES=""))
  assert proc.returncode == 0, proc.stderr[-3000:]
  hf = json.loads(proc.stdout.strip().splitlines()[-1])
  assert hf["model_max_length"] == 64

  loaded = tf.saved_model.load(export_dir)
  ids = loaded.signatures["tokenize"](text=tf.constant(TEXTS))
  ours = {k: v.numpy() for k, v in loaded.signatures["fill_mask"](
      text=tf.constant(TEXTS)).items()}
  for i, text in enumerate(TEXTS):
    # Same ids (truncated the same way: the first max_seq_len - 2 tokens, then </s>).
    n = int(ids["padding_mask"][i].numpy().sum())
    assert ids["input_ids"][i, :n].numpy().tolist() == hf["ids"][i], text
    assert int(ours["num_masks"][i]) == len(hf["top"][i]), text
    for m, hf_top in enumerate(hf["top"][i]):
      assert ours["top_ids"][i, m].tolist() == [t for t, _ in hf_top], (text, m)
      np.testing.assert_allclose(ours["top_probs"][i, m], [p for _, p in hf_top], atol=1e-5)
      gaps = -np.diff(ours["top_probs"][i, m])
      assert gaps.min() > 1e-4, "near-ties: the comparison would not test the order"
  assert len(hf["ids"][-1]) == len(hf["ids"][-2]) == 64  # truncated
