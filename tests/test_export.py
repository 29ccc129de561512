"""SavedModel export: every signature, reloaded in a fresh process with TF only, through the TF2
loader and the session-based ones TF Serving's loader stands for (saved_model_cli, TF1)."""

import json
import os
import re
import shutil

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.models import registry
from roberta_tf.serving import mlm_export
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from roberta_tf.tokenization.vocab_growth import VocabGrowthError
from tests import serving_loaders
from tests.conftest import TESTDATA
from tests.harness import call_module
from tests.test_vocab_extension import swapped_vocabulary
from tests.test_vocab_identity import reordered_merges

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

TEXTS = ["The capital of France is <mask>.", "no mask in this one",
         "Two <mask> in <mask> text.", ""]

@pytest.fixture(scope="module")
def exported(tmp_path_factory, hf_tiny_dir):
  root = tmp_path_factory.mktemp("export")
  model_dir = str(root / "model")
  models.save(model_dir, registry.load_hf(hf_tiny_dir))
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(hf_tiny_dir, name), model_dir)
  export_dir = str(root / "saved_model")
  mlm_export.export_saved_model(model_dir, export_dir, top_k=3)
  return model_dir, export_dir


@pytest.fixture(scope="module")
def exported_bf16(exported, tmp_path_factory):
  """The same model dir exported with --precision=bfloat16."""
  model_dir, _ = exported
  export_dir = str(tmp_path_factory.mktemp("export_bf16") / "saved_model")
  mlm_export.export_saved_model(model_dir, export_dir, top_k=3, precision="bfloat16")
  return export_dir


def _in_memory_module(model_dir):
  return mlm_export.ServingModule(models.load(model_dir, dtype="float32"),
                                  BytePairTokenizer.from_dir(model_dir),
                                  max_seq_len=models.read_config(model_dir).max_seq_len, top_k=3)


@pytest.fixture(scope="module")
def reloaded(exported, exported_bf16, hf_tiny_dir, tmp_path_factory):
  """Every signature of the export (and of its bfloat16 twin) through the TF2 and the TF1
  loader in one fresh process (serving_loaders.loader_runs): the texts, the ids the in-memory
  module tokenizes them to, and the HF fixture's own ids. Returns (calls, {"tf2" | "tf1" |
  "bf16_tf2" | "bf16_tf1": {"<key>/<output>": array}})."""
  model_dir, export_dir = exported
  module = _in_memory_module(model_dir)  # held: a tf.function method keeps only a weakref
  tok = module.tokenize(tf.constant(TEXTS))
  expected = np.load(os.path.join(hf_tiny_dir, "expected.npz"))
  calls = [(name, name, {"text": TEXTS}) for name in ("fill_mask", "encode", "tokenize")]
  calls += [("mlm_logits", "mlm_logits", {k: v.numpy().tolist() for k, v in tok.items()}),
            ("hf_ids", "mlm_logits",
             {"input_ids": expected["input_ids"].astype("int32").tolist(),
              "padding_mask": expected["attention_mask"].astype("int32").tolist()})]
  out = serving_loaders.loader_runs({export_dir: calls, exported_bf16: calls},
                                    str(tmp_path_factory.mktemp("reloaded") / "out.npz"))
  loaded = {loader: got[export_dir] for loader, got in out.items()}
  loaded.update({f"bf16_{loader}": got[exported_bf16] for loader, got in out.items()})
  return calls, loaded


def test_bfloat16_export_stores_bf16_matrices_and_serves_float32(exported_bf16, reloaded):
  """--precision=bfloat16: the Dense matrices are saved in bfloat16 (read as is: no per-call
  cast), LayerNorms and embedding tables stay float32; both loaders restore it alike, every
  output has the float32 export's dtype and shape, and the values are float32's to bf16's
  rounding (the accuracy on real text: docs/serving.md)."""
  _, loaded = reloaded
  dtypes = tf.train.load_checkpoint(os.path.join(exported_bf16, "variables", "variables")
                                    ).get_variable_to_dtype_map()
  by_dtype = {}
  for name, dtype in dtypes.items():
    by_dtype.setdefault(dtype.name, []).append(name)
  assert len(by_dtype.get("bfloat16", [])) >= 12, by_dtype.keys()  # 2 layers x 6 Dense kernels
  assert len(by_dtype["float32"]) >= 8  # LayerNorms, embedding tables, output bias
  serving_loaders.assert_same(loaded["bf16_tf1"], loaded["bf16_tf2"])
  fp32, bf16 = loaded["tf2"], loaded["bf16_tf2"]
  assert fp32.keys() == bf16.keys()
  for key, want in fp32.items():
    got = bf16[key]
    assert (got.dtype, got.shape) == (want.dtype, want.shape), key
    if want.dtype.kind != "f":
      if key.startswith(("tokenize/", "fill_mask/mask_positions", "fill_mask/num_masks")):
        np.testing.assert_array_equal(got, want, err_msg=key)
      continue
    scale = max(np.abs(want).max(), 1.0)
    assert np.abs(got - want).max() <= 0.03 * scale, (key, np.abs(got - want).max(), scale)


def test_signatures_match_in_memory_model_in_fresh_process(exported, reloaded):
  model_dir, _ = exported
  _, loaded = reloaded
  got = {k: v for k, v in loaded["tf2"].items() if not k.startswith("hf_ids/")}
  module = _in_memory_module(model_dir)
  texts = tf.constant(TEXTS)
  want = {}
  for name in ("fill_mask", "encode", "tokenize"):
    for k, v in getattr(module, name)(texts).items():
      want[f"{name}/{k}"] = v.numpy()
  tok = module.tokenize(texts)  # the ids the export's mlm_logits was called with (reloaded)
  want["mlm_logits/logits"] = module.mlm_logits(tok["input_ids"], tok["padding_mask"])[
      "logits"].numpy()
  serving_loaders.assert_same(got, want)
  # Shapes and the <mask> bookkeeping: 1, 0, 2, 0 masks; 3 predictions each.
  np.testing.assert_array_equal(got["fill_mask/num_masks"], [1, 0, 2, 0])
  assert got["fill_mask/top_ids"].shape == (4, 2, 3)
  assert (got["fill_mask/top_ids"][1] == -1).all()
  probs = got["fill_mask/top_probs"][0, 0]
  assert (np.diff(probs) <= 0).all() and probs[0] > 0


def test_session_loaders_match_tf2_loader(exported, reloaded, tmp_path):
  """The TF1 loader (TF Serving's path: the restore op, then the graph) gives
  tf.saved_model.load's outputs on every signature, and so does saved_model_cli run on the
  string signature; the graph has core TF ops only (loader_runs checks)."""
  _, export_dir = exported
  _, loaded = reloaded
  serving_loaders.assert_same(loaded["tf1"], loaded["tf2"])
  want = serving_loaders.outputs_of(loaded["tf2"], "fill_mask")
  got = serving_loaders.saved_model_cli_run(export_dir, "fill_mask", {"text": TEXTS},
                                            str(tmp_path / "cli"))
  serving_loaders.assert_same(got, want)
  assert want["top_probs"][0, 0, 0] > 0  # a real prediction, not an empty slot


def test_tokenize_adds_specials_and_truncates_keeping_eos(exported):
  model_dir, _ = exported
  tok = BytePairTokenizer.from_dir(model_dir)
  module = mlm_export.ServingModule(models.load(model_dir), tok, max_seq_len=8)
  out = module.tokenize(tf.constant(["a b c d e f g h i j k", "hi"]))
  ids = out["input_ids"].numpy()
  assert ids.shape == (2, 8)
  assert ids[0, 0] == tok.bos_id and ids[0, -1] == tok.eos_id
  np.testing.assert_array_equal(ids[0, 1:-1], tok(["a b c d e f g h i j k"])[0][:6].numpy())
  np.testing.assert_array_equal(out["padding_mask"].numpy()[1], [1, 1, 1, 0, 0, 0, 0, 0])
  assert ids[1, 2] == tok.eos_id and ids[1, 3] == tok.pad_id


def test_hf_fixture_logits_through_the_export(reloaded, hf_tiny_dir):
  """The exported mlm_logits reproduce the HF peer's logits on its own inputs."""
  _, loaded = reloaded
  expected = np.load(os.path.join(hf_tiny_dir, "expected.npz"))
  logits = loaded["tf2"]["hf_ids/logits"]
  real = expected["attention_mask"].astype(bool)
  assert np.abs(logits[real] - expected["logits"][real]).max() < 1e-4


def test_export_refuses_nonempty_dir_and_missing_vocab(exported, tmp_path):
  model_dir, export_dir = exported
  with pytest.raises(mlm_export.ExportError, match="not empty"):
    mlm_export.export_saved_model(model_dir, export_dir)
  bare = tmp_path / "bare"
  bare.mkdir()
  for name in os.listdir(model_dir):
    if name not in ("vocab.json", "merges.txt"):
      (bare / name).write_bytes((open(os.path.join(model_dir, name), "rb")).read())
  with pytest.raises(mlm_export.ExportError, match="no vocab.json"):
    mlm_export.export_saved_model(str(bare), str(tmp_path / "out"))
  shutil.copy(os.path.join(model_dir, "vocab.json"), bare)  # merges.txt still missing
  with pytest.raises(mlm_export.ExportError, match="cannot load the tokenizer.*merges.txt"):
    mlm_export.export_saved_model(str(bare), str(tmp_path / "out"))
  with pytest.raises(mlm_export.ExportError, match="--top_k=0"):
    mlm_export.export_saved_model(model_dir, str(tmp_path / "out"), top_k=0)
  with pytest.raises(mlm_export.ExportError, match="--max_seq_len=1: must be in"):
    mlm_export.export_saved_model(model_dir, str(tmp_path / "out"), max_seq_len=1)
  assert not (tmp_path / "out").exists()


def test_mixed_precision_model_exports_and_serves_in_float32(tmp_path, hf_tiny_dir):
  """A model built (trained) under mixed_bfloat16 exports as float32: same weights, fp32 math."""
  config = registry.load_hf(hf_tiny_dir).config
  bf16 = models.RobertaPretrainer(config, dtype="mixed_bfloat16")
  assert bf16.dtype_policy.name == "mixed_bfloat16"
  model_dir = str(tmp_path / "bf16_model")
  models.save(model_dir, bf16)
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(hf_tiny_dir, name), model_dir)
  export_dir = str(tmp_path / "export")
  mlm_export.export_saved_model(model_dir, export_dir)
  loaded = tf.saved_model.load(export_dir)
  ids = tf.constant([[0, 100, 200, 4, 2]], tf.int32)
  mask = tf.ones_like(ids)
  got = loaded.signatures["mlm_logits"](input_ids=ids, padding_mask=mask)["logits"]
  assert got.dtype == tf.float32
  want = models.load(model_dir, dtype="float32").full_logits(ids, mask)
  np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-5, rtol=0)


# The export to a URL, its reload and fill-mask: tests/test_storage_journey.py (equal to the
# local export in the same journey).


@pytest.mark.parametrize("module, flag", [("roberta_tf.export", "--export_dir"),
                                          ("roberta_tf.export", "--model_dir"),
                                          ("roberta_tf.fill_mask", "--saved_model")])
def test_an_unknown_scheme_is_one_error_line_naming_the_flag(module, flag, tmp_path):
  flags = {"--model_dir": str(tmp_path / "m"), "--export_dir": str(tmp_path / "e")}
  flags[flag] = "nosuch://bucket/dir"
  args = ([f"{k}={v}" for k, v in flags.items()] if module == "roberta_tf.export"
          else [f"{flag}=nosuch://bucket/dir", "a <mask>"])
  proc = call_module(module, *args)
  assert proc.returncode == 1
  assert re.fullmatch(rf"error: {flag}=nosuch://bucket/dir: no file system handles 'nosuch://' "
                      r"here \(registered: .*ram://.*\n", proc.stderr), proc.stderr
  assert not os.listdir(tmp_path)


def test_fill_mask_ranks_held_out_words_as_the_model_scores_them(exported, train_shards,
                                                                hf_tiny_dir):
  """fill_mask --held_out: the examples the rule picks from the held-out split, each with the
  rank the in-memory model gives its word, and the medians over the sample."""
  from roberta_tf.serving import held_out_ranks  # pylint: disable=import-outside-toplevel
  model_dir, export_dir = exported
  proc = call_module("roberta_tf.fill_mask", f"--saved_model={export_dir}",
                     f"--held_out={train_shards}", f"--vocab_dir={hf_tiny_dir}", "--examples=2",
                     "--rank_sample=6")
  assert proc.returncode == 0, proc.stderr
  lines = proc.stdout.splitlines()
  examples, counts, special, _ = held_out_ranks.read_held_out(train_shards, hf_tiny_dir, 6)
  pretrainer = models.load(model_dir, dtype="float32")
  ranked = held_out_ranks.rank_examples(
      examples, lambda i, m: pretrainer.full_logits(i, m).numpy(), counts, special)
  assert len(ranked) == 6 and [ln[:4] for ln in lines[:4:2]] == [" 1. ", " 2. "]
  for r, line in zip(ranked[:2], lines[1:4:2], strict=True):
    assert f": rank {r.model_rank} under the model" in line
    assert f"), {r.unigram_rank} under the unigram baseline" in line
  model, unigram = held_out_ranks.median_ranks(ranked)
  assert lines[-1].startswith(f"median rank of the masked word over 6 held-out examples: "
                              f"model {model:g}, unigram baseline {unigram:g}")
  proc = call_module("roberta_tf.fill_mask", f"--saved_model={export_dir}",
                     f"--held_out={train_shards}")
  assert proc.returncode == 1 and "--held_out needs --vocab_dir" in proc.stderr


def test_fill_mask_cuts_held_out_windows_to_what_the_saved_model_reads():
  """Shards of longer sequences than the SavedModel's give windows past its position table
  ("Graph execution error"): each is cut to fit, the longer side's farthest tokens first."""
  from roberta_tf import fill_mask  # pylint: disable=import-outside-toplevel
  from roberta_tf.serving.held_out_ranks import Example  # pylint: disable=import-outside-toplevel
  fits, long = Example((1, 2), 3, (4,)), Example((10, 11, 12, 13, 14), 15, (16, 17))
  assert fill_mask.fitted([fits, long], 8) == ([fits, Example((12, 13, 14), 15, (16, 17))], 1)
  assert fill_mask.fitted([long], 5) == ([Example((14,), 15, (16,))], 1)
  assert fill_mask.fitted([fits, long], 64) == ([fits, long], 0)


def test_fill_mask_refuses_shards_of_another_vocabulary(exported, train_shards, hf_tiny_dir,
                                                        tmp_path):
  """The export keeps its vocabulary (assets.extra/); shards of another one of the same size
  (two ids swapped), or a --vocab_dir that is not the shards', are one line naming both."""
  from roberta_tf import fill_mask  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization.vocab_files import VocabId  # pylint: disable=import-outside-toplevel
  _, export_dir = exported
  kept = VocabId.of_dir(os.path.join(export_dir, "assets.extra"))
  assert kept is not None and kept.same(VocabId.of_dir(hf_tiny_dir))
  assert fill_mask.check_vocabularies(None, export_dir, train_shards, hf_tiny_dir) == ""
  other = swapped_vocabulary(hf_tiny_dir, tmp_path / "other")
  record = VocabId.of_dir(other)
  with open(os.path.join(train_shards, "dataset_info.json"), encoding="utf-8") as f:
    info = json.load(f)
  info["vocab"] = record.record()
  with open(os.path.join(other, "dataset_info.json"), "w", encoding="utf-8") as f:
    json.dump(info, f)
  for shards, vocab_dir, flag, value in ((other, other, "--saved_model", export_dir),
                                         (train_shards, other, "--vocab_dir", other)):
    with pytest.raises(VocabGrowthError) as error:
      fill_mask.check_vocabularies(None, export_dir, shards, vocab_dir)
    message = str(error.value)
    assert "\n" not in message and "2 of the 8000 ids" in message, message
    assert f"--held_out={shards!r}" in message and f"{flag}={value!r}" in message


@pytest.fixture(scope="module")
def other_merges_shards(tmp_path_factory, hf_tiny_dir):
  """Shards of the test corpus built with the fixture's vocab.json and another merges.txt (two
  merges swapped: tests/test_vocab_identity.py), by build_shards."""
  root = tmp_path_factory.mktemp("other_merges")
  vocab_dir = reordered_merges(hf_tiny_dir, root / "vocab")
  out = str(root / "shards")
  built = call_module("data_prep.build_shards",
                      f"--input={os.path.join(TESTDATA, 'python_docs_small.jsonl.gz')}",
                      f"--vocab_dir={vocab_dir}", f"--output_dir={out}", "--max_seq_len=64",
                      "--num_shards=1", "--validation_fraction=0.1", "--noprogress")
  assert built.returncode == 0, built.stderr[-2000:]
  return out


def test_shards_of_another_merges_txt_are_refused_by_train_evaluate_and_fill_mask(
    exported, other_merges_shards, hf_tiny_dir):
  """The same vocab.json with another merges.txt is another vocabulary: `train` (resuming the
  model dir), `evaluate` and `fill_mask --held_out` each refuse it in one `error:` line naming
  both vocabularies and directories, and write nothing."""
  model_dir, export_dir = exported
  shards = other_merges_shards
  before = sorted(os.listdir(model_dir))
  runs = [
      (("--train_data", "--model_dir", model_dir),
       call_module("roberta_tf.train", f"--train_data={shards}", f"--model_dir={model_dir}",
                   "--max_seq_len=64", "--batch_size=4", "--train_steps=1", "--warmup_steps=0")),
      (("--eval_data", "--model_dir", model_dir),
       call_module("roberta_tf.evaluate", f"--model_dir={model_dir}", f"--eval_data={shards}")),
      (("--held_out", "--vocab_dir", hf_tiny_dir),
       call_module("roberta_tf.fill_mask", f"--saved_model={export_dir}", f"--held_out={shards}",
                   f"--vocab_dir={hf_tiny_dir}"))]
  for (data_flag, flag, value), run in runs:
    assert run.returncode == 1 and re.fullmatch(r"error: [^\n]+\n", run.stderr), run.stderr
    assert f"{flag}={value!r}" in run.stderr and f"{data_flag}={shards!r}" in run.stderr
    assert "merges.txt differs from rank 10" in run.stderr and run.stderr.count("merges.txt ") >= 2
  assert sorted(os.listdir(model_dir)) == before


def test_shards_recorded_before_merges_txt_was_load_with_one_warning(
    exported, other_merges_shards, hf_tiny_dir, tmp_path):
  """Shards whose dataset_info.json records vocab.json's sha256 alone (written before
  merges.txt was) still evaluate and rank: compared by vocab.json, said in one warning line."""
  model_dir, export_dir = exported
  old = str(tmp_path / "old")
  shutil.copytree(other_merges_shards, old)
  with open(os.path.join(old, "dataset_info.json"), encoding="utf-8") as f:
    info = json.load(f)
  del info["vocab"]["merges_sha256"]
  with open(os.path.join(old, "dataset_info.json"), "w", encoding="utf-8") as f:
    json.dump(info, f)
  for run in (call_module("roberta_tf.evaluate", f"--model_dir={model_dir}", f"--eval_data={old}",
                          "--eval_steps=1"),
              call_module("roberta_tf.fill_mask", f"--saved_model={export_dir}",
                          f"--held_out={old}", f"--vocab_dir={hf_tiny_dir}", "--examples=1",
                          "--rank_sample=2")):
    assert run.returncode == 0, run.stderr[-2000:]
    warnings = [line for line in run.stdout.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "compared by vocab.json alone" in warnings[0], run.stdout
    assert f"no merges.txt is recorded for --held_out={old!r}" in warnings[0] or (
        f"no merges.txt is recorded for --eval_data={old!r}" in warnings[0]), warnings[0]


def test_auto_precision_is_measured_once_per_machine_and_model(tmp_path, monkeypatch,
                                                               hf_tiny_dir):
  """--precision=auto times the encoder in both precisions, caches the pick under the machine
  key and the model's shape, and answers from the cache next time (a malformed entry is
  measured again)."""
  from roberta_tf.serving import serving_precision, serving_precision_probe
  from roberta_tf.training import precision_probe
  monkeypatch.setenv("ROBERTA_TF_CACHE_DIR", str(tmp_path))
  model = registry.load_hf(hf_tiny_dir)
  build = lambda dtype: models.RobertaPretrainer(model.config, dtype=dtype)  # noqa: E731
  said = []
  picked = serving_precision_probe.resolve("auto", model, build, model.config,
                                           log=said.append)
  assert picked in serving_precision.COMPUTED
  assert "float32" in said[-1] and "bfloat16" in said[-1] and " ms" in said[-1]
  (key,) = precision_probe.read_cache()
  assert key.startswith("serving | ") and precision_probe.machine_key() in key
  again = serving_precision_probe.resolve("auto", model, build, model.config, log=said.append)
  assert again == picked
  assert "measured earlier" in said[-1]
  precision_probe.write_cache(key, {"precision": "fp8"})
  again = serving_precision_probe.resolve("auto", model, build, model.config, log=said.append)
  assert again in serving_precision.COMPUTED
  assert "timing" in said[-2]
  assert serving_precision_probe.resolve("bfloat16", model, build, model.config) == "bfloat16"
  with pytest.raises(serving_precision.PrecisionError, match="--precision='fp16'"):
    serving_precision_probe.resolve("fp16", model, build, model.config)
