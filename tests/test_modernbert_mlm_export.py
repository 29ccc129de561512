"""The MLM export (`roberta_tf.export`) of an imported ModernBERT model dir, in float32 and
bfloat16: every signature on raw "[MASK]" texts and on hostile ones, through the TF2 loader
(both precisions), the TF1 (TF Serving's) loader in a fresh process (float32) and the
`saved_model_cli` console script (bfloat16's fill_mask);
fill_mask gives our model's top 5 (its full_logits) and, where transformers is installed, its
fill-mask pipeline's top 5 on the same HF folder; bfloat16 gives float32's top 5 on the
fixture texts and its values within bf16 rounding."""

import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from tests import serving_loaders
from tests.conftest import TESTDATA
from tests.harness import call_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

HF_FIXTURE = os.path.join(TESTDATA, "modernbert_tiny")
MAX_SEQ_LEN = 64  # the exports' truncation length: the long texts below exceed it
TEXTS = ["the film was [MASK] , I think", "Alice owns a [MASK].",
         "The weather was mild and nothing [MASK] that day.", "Two [MASK] in [MASK] text."]
# Hostile texts, each with what the export documents for it (docs/modernbert.md, "Serving").
HOSTILE = ["",                                     # [CLS] [SEP]; no mask; pll 0 of 0 tokens
           "   ",                                  # one token (a space run); no mask
           "no mask in this one",                  # num_masks 0, only empty slots
           "[MASK][MASK]",                         # two masks side by side: two slots
           "[MASK]",                               # the mask alone
           "the [MASK] " + "word " * 100,          # truncated; its mask is read
           "word " * 100 + "the [MASK] end",       # truncated; its mask is cut off: 0 masks
           "\ufffd\ufffd bad [MASK] bytes"]        # what b"\xff\xfe bad [MASK] bytes" reads as
ALL = TEXTS + HOSTILE  # one call a signature: each signature's first call is the cost
SIGNATURES = ("fill_mask", "encode", "tokenize", "score")
PRECISIONS = ("float32", "bfloat16")


@pytest.fixture(scope="module")
def export(tmp_path_factory):
  """(model dir, {precision: export dir}, {loader: {precision: {"<sig>/<output>": array}}},
  {precision: the export loaded here}): every signature on ALL (TEXTS, then HOSTILE) and
  mlm_logits on their ids, through the TF2 loader in this process (both precisions) and the
  TF1 (session) loader in a fresh one that imports neither roberta_tf nor tensorflow_text
  (float32)."""
  root = tmp_path_factory.mktemp("mb_mlm_export")
  model_dir = str(root / "M")
  proc = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={HF_FIXTURE}",
                     f"--model_dir={model_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  exports = {p: str(root / f"SM_{p}") for p in PRECISIONS}
  for precision, export_dir in exports.items():
    proc = call_module("roberta_tf.export", f"--model_dir={model_dir}",
                       f"--export_dir={export_dir}", f"--max_seq_len={MAX_SEQ_LEN}",
                       f"--precision={precision}")
    assert proc.returncode == 0, proc.stderr[-2000:]
  here = {p: tf.saved_model.load(d) for p, d in exports.items()}
  ids = {k: v.numpy().tolist()
         for k, v in here["float32"].signatures["tokenize"](text=tf.constant(ALL)).items()}
  calls = [(sig, sig, {"text": ALL}) for sig in SIGNATURES]
  calls.append(("mlm_logits", "mlm_logits", ids))
  # The session loader on the float32 export; the bfloat16 one goes through saved_model_cli
  # (the same session path) below: each signature's first call costs seconds a loader.
  loaded = serving_loaders.loader_runs({exports["float32"]: calls}, str(root / "out.npz"),
                                       loaders=("tf1",))
  loaded = {"tf1": {"float32": loaded["tf1"][exports["float32"]]}, "tf2": {}}
  for precision, module in here.items():
    loaded["tf2"][precision] = {
        f"{key}/{k}": v.numpy()
        for key, sig, inputs in calls
        for k, v in module.signatures[sig](**{n: tf.constant(x) for n, x in inputs.items()}
                                           ).items()}
  return model_dir, exports, loaded, here


def test_fill_mask_is_our_models_top5(export):
  model_dir, _, loaded, _ = export
  pretrainer = models.load(model_dir)
  for loader in ("tf2", "tf1"):
    fill = serving_loaders.outputs_of(loaded[loader]["float32"], "fill_mask")
    tokens = serving_loaders.outputs_of(loaded[loader]["float32"], "tokenize")
    assert fill["num_masks"][:len(TEXTS)].tolist() == [1, 1, 1, 2]
    probs = tf.nn.softmax(pretrainer.full_logits(tokens["input_ids"],
                                                 tokens["padding_mask"])).numpy()
    for row, slot in zip(*np.nonzero(fill["mask_positions"] >= 0), strict=True):
      position = fill["mask_positions"][row, slot]
      want = np.argsort(-probs[row, position])[:5]
      np.testing.assert_array_equal(fill["top_ids"][row, slot], want)
      np.testing.assert_allclose(fill["top_probs"][row, slot], probs[row, position, want],
                                 atol=1e-5, rtol=0)
    logits = serving_loaders.outputs_of(loaded[loader]["float32"], "mlm_logits")["logits"]
    real = tokens["padding_mask"] > 0
    want = pretrainer.full_logits(tokens["input_ids"], tokens["padding_mask"]).numpy()
    np.testing.assert_allclose(logits[real], want[real], atol=1e-4, rtol=0)


def test_both_loaders_and_saved_model_cli_agree(export, tmp_path):
  """TF Serving's path (the TF1 session loader, float32) and `saved_model_cli run` (the console
  script TensorFlow installs, bfloat16) give tf.saved_model.load's outputs."""
  _, exports, loaded, _ = export
  tf1, tf2 = dict(loaded["tf1"]["float32"]), dict(loaded["tf2"]["float32"])
  # A sum of up to 62 log-probabilities (|pll| up to ~500): float32's rounding, relatively.
  np.testing.assert_allclose(tf1.pop("score/pll"), tf2.pop("score/pll"), rtol=1e-6, atol=1e-5)
  serving_loaders.assert_same(tf1, tf2)
  # The console script on the bfloat16 export (a process of its own; the float32 export went
  # the same session path in the TF1 loader above).
  got = serving_loaders.saved_model_cli_run(exports["bfloat16"], "fill_mask", {"text": TEXTS},
                                            str(tmp_path / "cli"))
  want = serving_loaders.outputs_of(loaded["tf2"]["bfloat16"], "fill_mask")
  serving_loaders.assert_same(got, {k: v[:len(TEXTS)] for k, v in want.items()})


def test_bfloat16_is_float32_within_bf16_rounding(export):
  """Same keys, dtypes, shapes, ids and mask bookkeeping; fill-mask top 5 equal on the fixture
  texts; every float within 3% of the output's scale (the bound RoBERTa's bf16 export is
  held to in tests/test_export.py: bf16 keeps 8 significant bits, ~0.4% a rounding, and the
  tiny model's 5 layers at init std 0.2 add up a few of them). Found: top probabilities
  within 3e-4 of float32's, about 1% of a value."""
  _, exports, loaded, _ = export
  dtypes = tf.train.load_checkpoint(os.path.join(exports["bfloat16"], "variables",
                                                 "variables")).get_variable_to_dtype_map()
  stored = [d.name for d in dtypes.values()]
  assert stored.count("bfloat16") >= 5 * 4, stored  # Wqkv, Wo, Wi, Wo' of 5 layers
  fp32, bf16 = loaded["tf2"]["float32"], loaded["tf2"]["bfloat16"]
  assert fp32.keys() == bf16.keys()
  for key, want in fp32.items():
    got = bf16[key]
    assert (got.dtype, got.shape) == (want.dtype, want.shape), key
    if want.dtype.kind != "f":  # the top 5 of the hostile texts may swap near-ties
      rows = len(TEXTS) if key.endswith(("/top_ids", "/top_tokens")) else len(ALL)
      np.testing.assert_array_equal(got[:rows], want[:rows], err_msg=key)
      continue
    scale = max(np.abs(want).max(), 1.0)
    assert np.abs(got - want).max() <= 0.03 * scale, (key, np.abs(got - want).max(), scale)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_hostile_texts_give_the_documented_bounded_result(export, precision):
  _, _, loaded, _ = export
  got = {sig: {k: v[len(TEXTS):] for k, v in
               serving_loaders.outputs_of(loaded["tf2"][precision], sig).items()}
         for sig in SIGNATURES}
  ids, mask = got["tokenize"]["input_ids"], got["tokenize"]["padding_mask"]
  lengths = mask.sum(axis=1)
  assert ids.shape == (len(HOSTILE), MAX_SEQ_LEN)  # the longest text, cut to max_seq_len
  assert lengths.tolist() == [2, 3, lengths[2], 4, 3, MAX_SEQ_LEN, MAX_SEQ_LEN, lengths[7]]
  rows = np.arange(len(HOSTILE))
  assert (ids[:, 0] == 1020).all() and (ids[rows, lengths - 1] == 1021).all()  # [CLS] .. [SEP]
  fill = got["fill_mask"]
  assert fill["num_masks"].tolist() == [0, 0, 0, 2, 1, 1, 0, 1]
  slots = fill["mask_positions"]
  assert slots.shape == (len(HOSTILE), 2) and slots[3].tolist() == [1, 2]
  filled = slots >= 0
  assert (ids[rows[:, None].repeat(2, 1)[filled], slots[filled]] == 1023).all()  # [MASK]
  assert (fill["top_ids"][~filled] == -1).all() and (fill["top_probs"][~filled] == 0).all()
  assert (fill["top_tokens"][~filled] == b"").all()
  assert (fill["top_probs"][filled] > 0).all() and (fill["top_ids"][filled] >= 0).all()
  assert got["score"]["num_tokens"].tolist() == (lengths - 2).tolist()
  assert got["score"]["pll"][0] == 0 and (got["score"]["pll"][1:] < 0).all()
  for out in got.values():
    for value in out.values():
      assert value.dtype.kind != "f" or np.isfinite(value).all()
  assert got["encode"]["sequence_output"].shape[:2] == ids.shape


def test_invalid_utf8_reads_as_its_replacement_characters(export):
  """Bytes that are not UTF-8 reach a signature only as bytes (JSON cannot carry them to the
  loaders' process): each maximal invalid run reads as U+FFFD, as Python's
  decode("utf-8", "replace") (and so HF's tokenizer of that text) has it."""
  loaded = export[3]["float32"]
  texts = tf.constant([b"\xff\xfe bad [MASK] bytes", HOSTILE[-1].encode(), b"ok \xc3"])
  tok = loaded.signatures["tokenize"](text=texts)
  np.testing.assert_array_equal(tok["input_ids"][0], tok["input_ids"][1])
  fill = loaded.signatures["fill_mask"](text=texts)
  np.testing.assert_array_equal(fill["top_ids"][0], fill["top_ids"][1])
  assert fill["num_masks"].numpy().tolist() == [1, 1, 0]
  tokenizers = pytest.importorskip("tokenizers")
  hf = tokenizers.Tokenizer.from_file(os.path.join(HF_FIXTURE, "tokenizer.json"))
  want = hf.encode(b"ok \xc3".decode("utf-8", "replace")).ids
  row = tok["input_ids"][2].numpy()
  assert row[:tok["padding_mask"][2].numpy().sum()].tolist() == want


def test_fill_mask_is_transformers_pipeline(export):
  _, _, loaded, _ = export
  pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  pipe = transformers.pipeline("fill-mask", model=HF_FIXTURE, top_k=5, device="cpu")
  for precision in PRECISIONS:
    fill = serving_loaders.outputs_of(loaded["tf2"][precision], "fill_mask")
    for row, text in enumerate(TEXTS):
      theirs = pipe(text)
      theirs = theirs if isinstance(theirs[0], list) else [theirs]  # one list per mask
      assert len(theirs) == fill["num_masks"][row], text
      for slot, candidates in enumerate(theirs):
        assert fill["top_ids"][row, slot].tolist() == [c["token"] for c in candidates], text
        np.testing.assert_allclose(fill["top_probs"][row, slot],
                                   [c["score"] for c in candidates],
                                   atol=1e-4 if precision == "float32" else 1e-3, rtol=0)
