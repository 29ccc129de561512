"""ModernBERT (roberta_tf/models/modernbert/): parity with transformers' ModernBertForMaskedLM on
the committed fixture (tests/testdata/modernbert_tiny, made by its make_model_fixture.py; HF
eager, float32): a padded batch whose texts span several local windows and one 8,100-token
text; HF import -> export -> re-import; transformers loading our export (where installed);
mixed_bfloat16."""

import importlib.util
import json
import os

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from roberta_tf.models import registry
from roberta_tf.models.modernbert import (
  modernbert_config,
  modernbert_hf_config,
  modernbert_hf_tasks,
  modernbert_hf_weights,
)
from roberta_tf.models.modernbert.modernbert_layers import ModernBertLayer
from roberta_tf.models.modernbert.modernbert_pretrainer import ModernBertPretrainer
from roberta_tf.models.modernbert.windowed_attention import attend
from roberta_tf.models.roberta.hf_weights import HFCheckpointError
from tests.conftest import REPO
from tests.harness import module_env, run_script
from tests.layer_testing import run_layer_test

FIXTURE = os.path.join(REPO, "tests", "testdata", "modernbert_tiny")
HAVE_HF = all(importlib.util.find_spec(m) for m in ("transformers", "torch"))


@pytest.fixture(scope="module")
def expected():
  return dict(np.load(os.path.join(FIXTURE, "expected.npz")))


@pytest.fixture(scope="module")
def imported():
  return registry.load_hf(FIXTURE)


def _batch_outputs(pretrainer, expected):
  """(logits, last_hidden_state) at the real positions of the fixture's padded batch."""
  ids, mask = expected["batch_input_ids"], expected["batch_attention_mask"]
  hidden = pretrainer.encoder({"input_ids": ids, "padding_mask": mask})["sequence_output"]
  real = mask.astype(bool)
  return pretrainer.full_logits(ids, mask).numpy()[real], hidden.numpy()[real]


def test_padded_batch_matches_transformers(imported, expected):
  logits, hidden = _batch_outputs(imported, expected)
  logits_err = np.abs(logits - expected["batch_logits"]).max()
  hidden_err = np.abs(hidden - expected["batch_last_hidden_state"]).max()
  print(f"padded batch max |diff|: logits {logits_err:.3g}, last_hidden_state {hidden_err:.3g}")
  assert logits_err < 1e-4 and hidden_err < 1e-4


def test_long_text_matches_transformers(imported, expected):
  ids = expected["long_input_ids"].astype(np.int32)[None]
  mask = np.ones_like(ids)
  hidden = imported.encoder({"input_ids": ids, "padding_mask": mask})["sequence_output"]
  hidden = hidden.numpy()[0]
  logits = imported.full_logits(ids, mask).numpy()[0]
  at = expected["long_positions"]
  errors = {
      "logits": np.abs(logits[at] - expected["long_logits"]).max(),
      "last_hidden_state": np.abs(hidden[at] - expected["long_last_hidden_state"]).max(),
      "logsumexp (all positions)": np.abs(
          tf.reduce_logsumexp(logits, -1).numpy() - expected["long_logsumexp"]).max(),
      # Projections on fixed random vectors: sums of V (H) per-element differences.
      "logits @ r / sqrt(V)": np.abs(logits @ expected["check_vocab"]
                                     - expected["long_logit_checks"]).max() / np.sqrt(1024),
      "hidden @ r / sqrt(H)": np.abs(hidden @ expected["check_hidden"]
                                     - expected["long_hidden_checks"]).max() / np.sqrt(32),
  }
  print(f"{ids.shape[1]}-token text max |diff|: "
        + ", ".join(f"{k} {v:.3g}" for k, v in errors.items()))
  assert max(errors.values()) < 1e-4


def _without(hf, *keys):
  return {k: v for k, v in hf.items() if k not in keys}


def test_both_config_dialects_read_alike():
  with open(os.path.join(FIXTURE, "config.json"), encoding="utf-8") as f:
    hf = json.load(f)
  from_hf = modernbert_hf_config.config_from_hf
  new = from_hf(_without(hf, "global_attn_every_n_layers"))
  legacy = from_hf({**_without(hf, "layer_types", "rope_parameters"),
                    "global_rope_theta": 160000.0, "local_rope_theta": 10000.0})
  assert [new.layer_type(i) for i in range(5)] == hf["layer_types"]
  assert [legacy.layer_type(i) for i in range(5)] == hf["layer_types"]
  for config in (new, legacy):
    assert (config.global_rope_theta, config.local_rope_theta) == (160000.0, 10000.0)
    assert [config.rope_theta(i) for i in range(5)] == [160000.0, 1e4, 1e4, 160000.0, 1e4]
    assert (config.window_radius, config.pad_id, config.bos_id, config.eos_id) == (
        8, 1022, 1020, 1021)
    assert config.classifier_pooling == "mean"
  # rope_parameters' theta wins over the legacy key; a missing local theta is 10k (HF's).
  mixed = from_hf({**hf, "local_rope_theta": 5.0,
                   "rope_parameters": {"full_attention": {"rope_theta": 7.0}}})
  assert (mixed.global_rope_theta, mixed.local_rope_theta) == (7.0, 5.0)
  bare = from_hf(_without(hf, "layer_types", "rope_parameters"))
  assert (bare.global_rope_theta, bare.local_rope_theta) == (160000.0, 10000.0)
  # An explicit layer_types wins over the every-n rule.
  types = ["full_attention"] * 2 + ["sliding_attention"] * 3
  assert [from_hf({**hf, "layer_types": types}).is_global(i) for i in range(5)] == [
      True, True, False, False, False]
  with pytest.raises(ValueError, match="model_type 'roberta'"):
    from_hf({**hf, "model_type": "roberta"})
  with pytest.raises(ValueError, match="gelu_pytorch_tanh"):
    from_hf({**hf, "hidden_activation": "gelu_pytorch_tanh"})


# answerdotai/ModernBERT-base's config.json as the research converter writes it (the legacy
# dialect with the Hub's inert keys; values from modernbert.md 2.1).
_HUB_BASE = {
    "architectures": ["ModernBertForMaskedLM"], "attention_bias": False,
    "attention_dropout": 0.0, "bos_token_id": 50281, "classifier_activation": "gelu",
    "classifier_bias": False, "classifier_dropout": 0.0, "classifier_pooling": "mean",
    "cls_token_id": 50281, "decoder_bias": True, "deterministic_flash_attn": False,
    "embedding_dropout": 0.0, "eos_token_id": 50282, "global_attn_every_n_layers": 3,
    "global_rope_theta": 160000.0, "gradient_checkpointing": False, "hidden_activation": "gelu",
    "hidden_size": 768, "initializer_cutoff_factor": 2.0, "initializer_range": 0.02,
    "intermediate_size": 1152, "layer_norm_eps": 1e-05, "local_attention": 128,
    "local_rope_theta": 10000.0, "max_position_embeddings": 8192, "mlp_bias": False,
    "mlp_dropout": 0.0, "model_type": "modernbert", "norm_bias": False, "norm_eps": 1e-05,
    "num_attention_heads": 12, "num_hidden_layers": 22, "pad_token_id": 50283,
    "position_embedding_type": "absolute", "reference_compile": None, "sep_token_id": 50282,
    "sparse_pred_ignore_index": -100, "sparse_prediction": False, "torch_dtype": "float32",
    "transformers_version": "4.47.0.dev0", "vocab_size": 50368}


def test_hub_legacy_config_is_the_base_preset():
  config = modernbert_hf_config.config_from_hf(_HUB_BASE)
  assert config == modernbert_config.preset("base", classifier_pooling="mean")
  assert [i for i in range(22) if config.is_global(i)] == [0, 3, 6, 9, 12, 15, 18, 21]
  assert (config.rope_theta(0), config.rope_theta(1), config.window_radius) == (
      160000.0, 10000.0, 64)


def test_config_json_presets_and_parameter_count():
  base = modernbert_config.preset("base")
  large = modernbert_config.preset("large", max_seq_len=1024)
  assert (base.num_layers, base.hidden_size, base.intermediate_size, base.num_heads) == (
      22, 768, 1152, 12)
  assert (large.num_layers, large.hidden_size, large.intermediate_size, large.num_heads) == (
      28, 1024, 2624, 16)
  assert large.max_seq_len == 1024
  assert [i for i in range(22) if base.is_global(i)] == [0, 3, 6, 9, 12, 15, 18, 21]
  # The paper's (HF's) parameter counts, tied decoder counted once.
  assert modernbert_config.count_parameters(base) == 149_655_232
  assert modernbert_config.count_parameters(large) == 395_881_664
  assert modernbert_config.count_parameters(base, include_head=False) == 149_014_272
  config = modernbert_config.preset("tiny", vocab_size=512, pad_id=3, bos_id=1, eos_id=2,
                                    layer_types=["full_attention"] * 3)
  text = config.to_json()
  assert json.loads(text)["family"] == "modernbert"
  assert modernbert_config.ModernBertConfig.from_json(text) == config
  assert ModernBertPretrainer(config).count_params() == modernbert_config.count_parameters(
      config)
  with pytest.raises(ValueError, match="unknown ModernBertConfig field"):
    modernbert_config.ModernBertConfig.from_dict({"max_positions": 10})
  with pytest.raises(ValueError, match="family 'roberta'"):
    modernbert_config.ModernBertConfig.from_dict({"family": "roberta"})
  with pytest.raises(ValueError, match="unknown ModernBERT preset"):
    modernbert_config.preset("huge")


def test_export_reimport_round_trip(imported, tmp_path):
  out = str(tmp_path / "hf")
  modernbert_hf_weights.save_hf(out, imported)
  original = load_file(os.path.join(FIXTURE, "model.safetensors"))
  written = load_file(os.path.join(out, "model.safetensors"))
  assert sorted(written) == sorted(original)
  assert max(np.abs(written[k] - original[k]).max() for k in original) <= 1e-5
  again = registry.load_hf(out)
  assert again.config == imported.config
  diffs = [np.abs(a.numpy() - b.numpy()).max() for a, b in zip(again.weights, imported.weights)]
  print(f"round trip: {len(diffs)} weights, max |diff| {max(diffs):.3g}")
  assert len(again.weights) == len(imported.weights) and max(diffs) <= 1e-5


def test_import_refuses_wrong_checkpoints(imported, tmp_path):
  tensors = load_file(os.path.join(FIXTURE, "model.safetensors"))
  fresh = ModernBertPretrainer(imported.config)
  before = [w.numpy() for w in fresh.weights]
  broken = dict(tensors)
  del broken["model.layers.2.attn_norm.weight"]
  with pytest.raises(HFCheckpointError, match="missing key 'model.layers.2.attn_norm.weight'"):
    modernbert_hf_weights.set_from_hf_tensors(fresh, broken)
  with pytest.raises(HFCheckpointError, match="unexpected key 'model.layers.0.attn_norm"):
    modernbert_hf_weights.set_from_hf_tensors(
        fresh, {**tensors, "model.layers.0.attn_norm.weight": np.ones(32, np.float32)})
  with pytest.raises(HFCheckpointError, match=r"'model.layers.1.mlp.Wi.weight' has shape"):
    modernbert_hf_weights.set_from_hf_tensors(
        fresh, {**tensors, "model.layers.1.mlp.Wi.weight": np.ones((32, 32), np.float32)})
  assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, fresh.weights))
  # The tied decoder may be present if equal; a bare ModernBertModel's keys get "model.".
  bare = {k[len("model."):] if k.startswith("model.") else k: v for k, v in tensors.items()}
  modernbert_hf_weights.set_from_hf_tensors(
      fresh, {**bare, "decoder.weight": tensors["model.embeddings.tok_embeddings.weight"]})
  assert all(np.array_equal(a.numpy(), w.numpy())
             for a, w in zip(imported.weights, fresh.weights))


def test_mixed_bfloat16_close_to_float32(imported, expected):
  mixed = ModernBertPretrainer(imported.config, dtype="mixed_bfloat16")
  for target, source in zip(mixed.weights, imported.weights):
    target.assign(source)
  ids, mask = expected["batch_input_ids"], expected["batch_attention_mask"]
  logits = mixed.full_logits(ids, mask).numpy()[mask.astype(bool)]
  err = np.abs(logits - expected["batch_logits"]).max()
  print(f"mixed_bfloat16 logits max |diff| vs HF float32: {err:.3g} "
        f"(logits up to {np.abs(expected['batch_logits']).max():.3g})")
  assert np.isfinite(logits).all() and err < 0.5
  # Training under the mixed policy takes the fused (XLA) LayerNorm and GELU path.
  with tf.GradientTape() as tape:
    out = mixed({"input_ids": ids, "padding_mask": mask, "mask_positions": ids[:, :4] * 0 + 3},
                training=True)
    loss = tf.reduce_mean(tf.square(out))
  grads = tape.gradient(loss, mixed.trainable_weights)
  assert all(g is not None and np.isfinite(tf.convert_to_tensor(g).numpy()).all()
             for g in grads)


def test_fresh_init_and_pad_row_gradient():
  config = modernbert_config.preset("tiny", vocab_size=64, pad_id=0, bos_id=1, eos_id=2)
  tf.keras.utils.set_random_seed(5)
  model = ModernBertPretrainer(config)
  std = {"in": 0.02, "out": 0.02 / np.sqrt(2 * 3)}
  # Truncated at 2 std: the draws' std is 0.88 of the untruncated one.
  for name, kind in (("modernbert_layer_1/attn_wqkv/kernel", "in"),
                     ("modernbert_layer_1/mlp_wo/kernel", "out"),
                     ("mlm_head/head/dense/kernel", "out"),
                     ("embeddings/token_embedding/embeddings", "in")):
    values = next(w for w in model.weights if w.path == name).numpy()
    assert abs(values.std() / (0.8796 * std[kind]) - 1) < 0.05, name
    assert np.abs(values).max() <= 2 * std[kind] + 1e-7, name
  table = model.encoder.get_layer("embeddings").token_embedding.embeddings
  ids = tf.constant([[1, 5, 6, 2, 0, 0]])
  with tf.GradientTape() as tape:
    out = model.encoder({"input_ids": ids, "padding_mask": tf.cast(ids > 0, tf.int32)})
    loss = tf.reduce_sum(out["sequence_output"] ** 3)
  grad = tf.convert_to_tensor(tape.gradient(loss, table)).numpy()
  assert not grad[0].any() and all(grad[i].any() for i in (1, 2, 5, 6))


def _task_folder(path, task, pooling="mean"):
  """An HF ModernBertFor<task> folder: the fixture's encoder and the task head of
  task_heads.npz (see make_model_fixture.py)."""
  heads = np.load(os.path.join(FIXTURE, "task_heads.npz"))
  kind = {"ModernBertForSequenceClassification": "seq", "ModernBertForTokenClassification":
          "token", "ModernBertForMultipleChoice": "choice",
          "ModernBertForQuestionAnswering": "qa"}[task]
  tensors = {k: v for k, v in load_file(os.path.join(FIXTURE, "model.safetensors")).items()
             if k.startswith("model.")}
  tensors.update({k.split("/", 1)[1]: heads[k] for k in heads if k.startswith(kind + "/")})
  with open(os.path.join(FIXTURE, "config.json"), encoding="utf-8") as f:
    hf = json.load(f)
  hf.update(architectures=[task], classifier_pooling=pooling,
            id2label={"0": "neg", "1": "neutral", "2": "pos"},
            label2id={"neg": 0, "neutral": 1, "pos": 2})
  os.makedirs(path)
  save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
  with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
    json.dump(hf, f)
  return str(path)


def test_task_heads_match_transformers(expected, tmp_path):
  heads = np.load(os.path.join(FIXTURE, "task_heads.npz"))
  ids, mask = expected["batch_input_ids"], expected["batch_attention_mask"]
  inputs = {"input_ids": ids, "padding_mask": mask}
  errors = {}
  for pooling in ("cls", "mean"):
    model, labels = modernbert_hf_tasks.load_hf_task(_task_folder(
        tmp_path / pooling, "ModernBertForSequenceClassification", pooling))
    assert (model.task, model.num_labels, labels) == (
        "sequence_classification", 3, ["neg", "neutral", "pos"])
    errors[f"sequence ({pooling})"] = np.abs(
        model(inputs)["logits"].numpy() - heads[f"seq_logits_{pooling}"]).max()
  tagger, _ = modernbert_hf_tasks.load_hf_task(_task_folder(
      tmp_path / "token", "ModernBertForTokenClassification"))
  tags = tagger(inputs)["logits"].numpy()[mask.astype(bool)]
  errors["token"] = np.abs(tags - heads["token_logits"]).max()
  for pooling in ("cls", "mean"):  # the batch's 3 rows as one example's 3 options
    chooser, _ = modernbert_hf_tasks.load_hf_task(_task_folder(
        tmp_path / f"choice_{pooling}", "ModernBertForMultipleChoice", pooling))
    assert (chooser.task, chooser.num_labels) == ("multiple_choice", 1)
    grouped = {k: v[None] for k, v in inputs.items()}
    errors[f"choice ({pooling})"] = np.abs(
        chooser(grouped)["logits"].numpy() - heads[f"choice_logits_{pooling}"]).max()
  reader, _ = modernbert_hf_tasks.load_hf_task(_task_folder(
      tmp_path / "qa", "ModernBertForQuestionAnswering"))
  assert (reader.task, reader.num_labels) == ("question_answering", 2)
  spans = reader(inputs)
  for side in ("start", "end"):
    errors[f"qa {side}"] = np.abs(spans[f"{side}_logits"].numpy()[mask.astype(bool)]
                                  - heads[f"qa_{side}_logits"]).max()
  print("task heads max |diff|: " + ", ".join(f"{k} {v:.3g}" for k, v in errors.items()))
  assert max(errors.values()) < 1e-4
  # Export and re-import: the same weights and labels.
  out = str(tmp_path / "export")
  modernbert_hf_tasks.save_hf_task(out, tagger, ["a", "b", "c"])
  again, labels = modernbert_hf_tasks.load_hf_task(out)
  assert labels == ["a", "b", "c"] and again.task == "token_classification"
  assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(again.weights, tagger.weights))
  with pytest.raises(HFCheckpointError, match="architectures"):
    modernbert_hf_tasks.load_hf_task(FIXTURE)  # an MLM folder


# transformers loads each folder and saves its logits on a padded batch; prints the classes
# (a fresh process: torch is kept out of the test's TF process).
_HF_LOGITS = r"""
import json, sys
import numpy as np, torch
import transformers
names = []
for folder, auto, ids, mask, out in json.loads(sys.argv[1]):
  model = getattr(transformers, auto).from_pretrained(folder, attn_implementation="eager")
  with torch.no_grad():
    logits = model.eval()(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask)).logits
  np.save(out, logits.numpy())
  names.append(type(model).__name__)
print(json.dumps(names))
"""


@pytest.mark.skipif(not HAVE_HF, reason="transformers and torch are not installed "
                    "(requirements-bench.txt)")
def test_transformers_loads_our_exports(expected, tmp_path):
  # A fresh MLM model with every bias on and an explicit layer pattern (the export's optional
  # keys), and the fixture's sequence classifier re-exported.
  config = modernbert_config.preset(
      "tiny", vocab_size=300, hidden_size=32, num_heads=2, intermediate_size=40,
      num_layers=4, pad_id=0, bos_id=1, eos_id=2, local_attention=8, initializer_range=0.2,
      norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True,
      global_rope_theta=5e4, local_rope_theta=2e3,
      layer_types=["sliding_attention", "full_attention", "sliding_attention",
                   "full_attention"])
  tf.keras.utils.set_random_seed(3)
  mlm = ModernBertPretrainer(config)
  for weight in mlm.weights:  # biases and norms away from 0 / 1
    if "bias" in weight.path or "beta" in weight.path or "gamma" in weight.path:
      weight.assign(weight + np.random.default_rng(0).normal(0, 0.3, weight.shape))
  modernbert_hf_weights.save_hf(str(tmp_path / "mlm"), mlm)
  ids = np.random.default_rng(1).integers(3, 300, (2, 30)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, 17:] = 0
  classifier, _ = modernbert_hf_tasks.load_hf_task(_task_folder(
      tmp_path / "in", "ModernBertForSequenceClassification", "mean"))
  modernbert_hf_tasks.save_hf_task(str(tmp_path / "cls"), classifier, ["x", "y", "z"])
  batch = expected["batch_input_ids"], expected["batch_attention_mask"]
  runs = [(str(tmp_path / "mlm"), "AutoModelForMaskedLM", ids.tolist(), mask.tolist(),
           str(tmp_path / "mlm.npy")),
          (str(tmp_path / "cls"), "AutoModelForSequenceClassification", batch[0].tolist(),
           batch[1].tolist(), str(tmp_path / "cls.npy"))]
  proc = run_script(_HF_LOGITS, json.dumps(runs), timeout=600,
                    env=module_env(CUDA_VISIBLE_DEVICES=""))
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert json.loads(proc.stdout.strip().splitlines()[-1]) == [
      "ModernBertForMaskedLM", "ModernBertForSequenceClassification"]
  real = mask.astype(bool)
  mlm_err = np.abs(mlm.full_logits(ids, mask).numpy()[real]
                   - np.load(str(tmp_path / "mlm.npy"))[real]).max()
  ours = classifier({"input_ids": batch[0], "padding_mask": batch[1]})["logits"].numpy()
  cls_err = np.abs(np.load(str(tmp_path / "cls.npy")) - ours).max()
  print(f"transformers on our exports: logits max |diff| MLM {mlm_err:.3g}, "
        f"sequence classifier {cls_err:.3g}")
  assert mlm_err < 1e-4 and cls_err < 1e-4


@pytest.mark.parametrize("kwargs,weights", [
    ({"radius": 2}, 6), ({"radius": None, "first": True}, 5),
    ({"radius": 3, "norm_bias": True, "attention_bias": True, "mlp_bias": True}, 12)],
    ids=["local", "first_global", "biases"])
def test_layer_contract(kwargs, weights):
  # attn_norm (not in the first layer), attn_wqkv, attn_wo, mlp_norm, mlp_wi, mlp_wo; biases
  # and LayerNorm betas with the flags.
  rng = np.random.default_rng(0)
  x = rng.normal(size=(2, 9, 16)).astype(np.float32)
  mask = np.ones((2, 9), np.int32)
  mask[1, 6:] = 0
  run_layer_test(ModernBertLayer, {"num_heads": 2, "intermediate_size": 24,
                                   "rope_theta": 1e4, "in_std": 0.2, "out_std": 0.2, **kwargs},
                 {"x": x, "padding_mask": mask}, expected_output_shape=(2, 9, 16),
                 expected_num_trainable_weights=weights)


def test_attend_contract():
  """What any implementation of `attend` must keep: query i sees exactly the real keys with
  |i - j| <= radius (all real keys when radius is None), softmax-weighted by q.k / sqrt(D)."""
  rng = np.random.default_rng(0)
  q, k, v = (rng.normal(size=(1, 2, 12, 4)).astype(np.float32) for _ in range(3))
  mask = np.ones((1, 12), np.int32)
  mask[0, 10:] = 0
  for radius in (None, 0, 3):
    got = attend(q, k, v, mask, radius).numpy()
    i, j = np.arange(12)[:, None], np.arange(12)[None, :]
    near = np.ones((12, 12), bool) if radius is None else np.abs(i - j) <= radius
    allowed = (mask[0][None, :] == 1) & near
    scores = np.where(allowed, q[0] @ k[0].transpose(0, 2, 1) / 2.0, -1e30)
    probs = np.exp(scores - scores.max(-1, keepdims=True)) * allowed
    seen = allowed.any(-1)  # a pad query with no real key in reach: finite, of no meaning
    want = (probs[:, seen] / probs[:, seen].sum(-1, keepdims=True)) @ v[0]
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got[0][:, seen], want, atol=2e-6, err_msg=f"radius {radius}")
