"""A fine-tuned embedding model out of roberta_tf: the SavedModel's `embed` signature, the `embed`
binary and the sentence-transformers folder (`convert_checkpoint --to_sentence_transformers`).

One tiny fine-tune (`finetune --task=embedding --export_dir`, 1 epoch on 32 rows, max_seq_len
16, so most texts below are truncated). The export is reloaded in a fresh process (TF2 and TF1
loaders, core ops only) and compared with the in-process model on the training featurization;
the binary's table and files with the signature's vectors; the folder's files without
sentence-transformers, and with it (a fresh process, as test_hf_folder does: torch beside TF in
one process is not what users run) `SentenceTransformer(DIR).encode` against `embed` on 1,200
varied texts (long, non-ASCII, odd whitespace, special-token strings).
"""

import gzip
import importlib.util
import json
import os
import random
import shutil

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file

from roberta_tf.finetuning import featurize, finetuned_dir
from tests import finetune_fixtures as fx
from tests import serving_loaders
from tests.conftest import TESTDATA
from tests.harness import call_module, module_env, run_script

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

MAX_SEQ_LEN = 16
HAVE_ST = importlib.util.find_spec("sentence_transformers") is not None
# Pieces that stress the tokenizers: non-ASCII (accents, CJK, Greek, Hebrew, emoji, combining
# marks), whitespace other than single spaces, and special-token strings. Not "<pad>": HF
# RoBERTa gives the pad id a pad POSITION wherever it occurs (create_position_ids_from_
# input_ids), our encoder only where the padding mask says so (st_export's docstring).
PIECES = ["Zoë", "naïve café", "日本語のテキスト", "Ελληνικά", "שלום", "emoji 😀🎉", "Straße",
          "e\u0301", "\u00a0", "\u3000", "  ", "\t", "\n", " \r\n", "<mask>", "<s>", "</s>",
          "<unk>", "x=1;", "def f():", "—", "3.14", "über-long-hyphenated-word"]


def _texts(n: int, seed: int = 0) -> list[str]:
  """n varied texts: slices of the Python docs of 0 to 3,000 characters, mixed with PIECES,
  with and without leading / trailing whitespace; "" first."""
  with gzip.open(os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), "rt",
                 encoding="utf-8") as f:
    corpus = " ".join(json.loads(line)["text"] for line in f)
  rng = random.Random(seed)
  texts = ["", " ", "a", " leading", "trailing ", *PIECES]
  while len(texts) < n:
    length = rng.choice([3, 10, 30, 60, 150, 400, 1200, 3000])
    start = rng.randrange(len(corpus) - length)
    text = corpus[start:start + length]
    if rng.random() < 0.4:
      words = text.split(" ")
      for _ in range(rng.randint(1, 4)):
        words.insert(rng.randrange(len(words) + 1), rng.choice(PIECES))
      text = rng.choice([" ", "", "  "]).join(words)
    texts.append(text)
  return texts


@pytest.fixture(scope="module")
def exported(tmp_path_factory, hf_tiny_dir):
  """(model dir, SavedModel dir, sentence-transformers dir, convert_checkpoint's stdout)."""
  root = tmp_path_factory.mktemp("embedding_export")
  pretrained = fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained"))
  train = fx.write_table(str(root / "train.jsonl"), fx.embedding_rows(32, 0, negatives=True))
  dev = fx.write_beir(str(root / "dev"), 8, 1)
  model_dir, export_dir, st_dir = (str(root / name) for name in ("model", "sm", "st"))
  result = call_module("roberta_tf.finetune", "--task=embedding", f"--init_from={pretrained}",
                       f"--train_file={train}", f"--eval_file={dev}", f"--model_dir={model_dir}",
                       "--text_fields=query,document,negative", f"--max_seq_len={MAX_SEQ_LEN}",
                       "--batch_size=16", "--epochs=1", "--learning_rate=1e-3", "--seeds=1",
                       "--pooling=mean", f"--export_dir={export_dir}")
  assert result.returncode == 0, result.stderr[-3000:]
  result = call_module("roberta_tf.convert_checkpoint", f"--to_sentence_transformers={st_dir}",
                       f"--model_dir={model_dir}")
  assert result.returncode == 0, result.stderr
  return model_dir, export_dir, st_dir, result.stdout


@pytest.fixture(scope="module")
def in_process(exported):
  """The fine-tuned model on the training featurization: texts -> (vectors, input lengths)."""
  model, _, info = finetuned_dir.load(exported[0])
  tokenizer = finetuned_dir.load_tokenizer(exported[0])
  assert info.max_seq_len == MAX_SEQ_LEN and info.pooling == "mean"

  def embed(texts):
    ids = featurize.build_inputs(featurize.tokenize(tokenizer, texts), None, info.max_seq_len,
                                 tokenizer.template)
    vectors = np.concatenate([
        model(featurize.to_dense(ids[i:i + 128], tokenizer.pad_id), training=False)[
            "embeddings"].numpy() for i in range(0, len(texts), 128)])
    return vectors, ids.row_lengths().numpy(), tokenizer(tf.constant(texts)).row_lengths().numpy()
  return embed


@pytest.fixture(scope="module")
def signature(exported):
  """The export's `embed`, loaded in this process (for the large comparisons)."""
  return tf.saved_model.load(exported[1]).signatures["embed"]


def _call(signature, texts, batch=100):
  outs = [signature(text=tf.constant(texts[i:i + batch])) for i in range(0, len(texts), batch)]
  return (np.concatenate([o["embeddings"].numpy() for o in outs]),
          np.concatenate([o["num_tokens"].numpy() for o in outs]))


def test_reloaded_embed_is_the_models_vectors(exported, in_process, tmp_path):
  """Both loaders in a fresh process (core ops only) on short, long and odd texts, one batch
  and a batch of one: the in-process model's vectors (atol 1e-5), unit norm, and num_tokens =
  the truncated input's length (specials included). Also serving_default = embed."""
  texts = _texts(60, seed=3)[:60]
  export_dir = exported[1]
  runs = {export_dir: [("all", "embed", {"text": texts}),
                       ("default", "serving_default", {"text": texts[:7]}),
                       ("one", "embed", {"text": [texts[-1]]})]}
  got = serving_loaders.loader_runs(runs, str(tmp_path / "out.npz"))
  want, lengths, raw = in_process(texts)
  assert (raw > MAX_SEQ_LEN - 2).sum() >= 10 and (raw < MAX_SEQ_LEN - 2).sum() >= 10
  assert lengths[0] == 2 and lengths.max() == MAX_SEQ_LEN
  for loader in ("tf2", "tf1"):
    out = got[loader][export_dir]
    assert out["all/embeddings"].dtype == np.float32 and out["all/num_tokens"].dtype == np.int32
    np.testing.assert_allclose(out["all/embeddings"], want, atol=1e-5, rtol=0, err_msg=loader)
    np.testing.assert_array_equal(out["all/num_tokens"], lengths)
    np.testing.assert_allclose(out["default/embeddings"], want[:7], atol=1e-5, rtol=0)
    np.testing.assert_allclose(out["one/embeddings"], want[-1:], atol=1e-5, rtol=0)
    np.testing.assert_allclose(np.linalg.norm(out["all/embeddings"], axis=1), 1.0, atol=1e-5)
  # The empty text is <s></s>: its own vector, not a zero or NaN one.
  assert np.isfinite(want[0]).all() and abs(float(want[0] @ want[1])) < 0.9999


def test_embed_signature_on_many_texts_in_batches(signature, in_process):
  texts = _texts(1200)
  got, counts = _call(signature, texts, batch=97)
  want, lengths, _ = in_process(texts)
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
  np.testing.assert_array_equal(counts, lengths)
  empty = signature(text=tf.constant([], tf.string))
  assert empty["embeddings"].shape[0] == 0 and empty["num_tokens"].shape == (0,)


def test_embed_binary(exported, signature, tmp_path):
  export_dir = exported[1]
  texts = ["who keeps the red ball?", "Alice keeps a red ball in the shed.", "Zoë 日本語",
           "", " ".join(["word"] * 40)]
  result = call_module("roberta_tf.embed", f"--saved_model={export_dir}", *texts)
  assert result.returncode == 0, result.stderr
  vectors, counts = _call(signature, texts)
  lines = result.stdout.splitlines()
  for i, n in enumerate(counts):
    assert lines[i].startswith(f"[{i + 1}] {repr(texts[i])[:30]}"), lines[i]
    assert f"  {n} tokens" in lines[i], lines[i]
    assert ("the model's limit" in lines[i]) == (n == MAX_SEQ_LEN)
  rows = lines[lines.index("cosine similarity") + 2:]
  table = np.array([[float(x) for x in row.split()[1:]] for row in rows])
  np.testing.assert_allclose(table, vectors @ vectors.T, atol=6e-4)

  lines_in = ["first line", "", "  spaced\tline ", "日本語", "x" * 500]
  input_file = tmp_path / "texts.txt"
  input_file.write_text("\n".join(lines_in) + "\r\n", encoding="utf-8")
  for ext in (".npy", ".jsonl"):
    out = tmp_path / f"out{ext}"
    result = call_module("roberta_tf.embed", f"--saved_model={export_dir}",
                         f"--input_file={input_file}", f"--output_file={out}", "--batch_size=2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"wrote 5 vectors of 128 dimensions to {out}"
    want, _ = _call(signature, lines_in)
    if ext == ".npy":
      np.testing.assert_allclose(np.load(out), want, atol=1e-6, rtol=0)
    else:
      rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
      assert [r["text"] for r in rows] == lines_in
      np.testing.assert_allclose(np.array([r["embedding"] for r in rows]), want, atol=1e-6)

  bad = [((f"--saved_model={export_dir}",), "give texts as arguments or --input_file"),
         ((f"--saved_model={export_dir}", f"--input_file={input_file}"),
          "--input_file needs --output_file"),
         ((f"--saved_model={export_dir}", f"--input_file={input_file}",
           f"--output_file={tmp_path / 'v.txt'}"), "must end in .npy or .jsonl"),
         ((f"--saved_model={export_dir}", f"--input_file={tmp_path / 'none.txt'}",
           f"--output_file={tmp_path / 'v.npy'}"), "no such file"),
         ((f"--saved_model={exported[0]}", "x"), "cannot load SavedModel")]
  (tmp_path / "empty.txt").write_text("", encoding="utf-8")
  bad.append(((f"--saved_model={export_dir}", f"--input_file={tmp_path / 'empty.txt'}",
               f"--output_file={tmp_path / 'v.npy'}"), "has no lines to embed"))
  for args, text in bad:
    result = call_module("roberta_tf.embed", *args)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and text in lines[0], lines[0]
  assert not (tmp_path / "v.npy").exists()


def test_sentence_transformers_folder_files(exported):
  model_dir, _, st_dir, stdout = exported
  names = ["1_Pooling/config.json", "2_Normalize/config.json", "config.json",
           "config_sentence_transformers.json", "merges.txt", "model.safetensors",
           "modules.json", "sentence_bert_config.json", "special_tokens_map.json",
           "tokenizer_config.json", "vocab.json"]
  assert sorted(os.path.relpath(os.path.join(d, f), st_dir)
                for d, _, fs in os.walk(st_dir) for f in fs) == names
  assert stdout.strip() == f"wrote sentence-transformers folder {st_dir}: {', '.join(names)}"

  def read(name):
    with open(os.path.join(st_dir, name), encoding="utf-8") as f:
      return json.load(f)
  assert [(m["idx"], m["path"], m["type"]) for m in read("modules.json")] == [
      (0, "", "sentence_transformers.models.Transformer"),
      (1, "1_Pooling", "sentence_transformers.models.Pooling"),
      (2, "2_Normalize", "sentence_transformers.models.Normalize")]
  assert read("sentence_bert_config.json") == {"max_seq_length": MAX_SEQ_LEN,
                                               "do_lower_case": False}
  pooling = read("1_Pooling/config.json")
  assert pooling["word_embedding_dimension"] == 128 and pooling["pooling_mode_mean_tokens"]
  assert not any(v for k, v in pooling.items() if k.startswith("pooling_mode_")
                 and k != "pooling_mode_mean_tokens")
  assert read("config_sentence_transformers.json")["similarity_fn_name"] == "cosine"
  tokenizer = read("tokenizer_config.json")
  assert tokenizer["add_prefix_space"] is False and tokenizer["model_max_length"] == MAX_SEQ_LEN
  config = read("config.json")
  assert config["architectures"] == ["RobertaModel"] and config["hidden_size"] == 128
  # The encoder under hf_weights' keys (the pretrained model's, MLM head dropped) + a pooler.
  tensors = load_file(os.path.join(st_dir, "model.safetensors"))
  assert {k for k in tensors if not k.startswith("roberta.encoder.layer.")} == {
      "roberta.embeddings.word_embeddings.weight", "roberta.embeddings.position_embeddings.weight",
      "roberta.embeddings.token_type_embeddings.weight", "roberta.embeddings.LayerNorm.weight",
      "roberta.embeddings.LayerNorm.bias", "roberta.pooler.dense.weight",
      "roberta.pooler.dense.bias"}
  model, model_config, _ = finetuned_dir.load(model_dir)
  assert len(tensors) == 7 + 16 * model_config.num_layers  # 16 tensors a layer
  embeddings = model.encoder.get_layer("embeddings")
  np.testing.assert_array_equal(tensors["roberta.embeddings.word_embeddings.weight"],
                                embeddings.token_embedding.embeddings.numpy())
  np.testing.assert_array_equal(tensors["roberta.pooler.dense.weight"], np.eye(128))


def test_sentence_transformers_refusals(exported, tmp_path):
  model_dir, _, st_dir, _ = exported

  def one_line(result, text):
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and text in lines[0], lines[0]

  convert = lambda *args: call_module("roberta_tf.convert_checkpoint", *args)
  one_line(convert(f"--to_sentence_transformers={st_dir}", f"--model_dir={model_dir}"),
           "exists and is not empty; pass --overwrite")
  one_line(convert("--to_hf", f"--hf_dir={tmp_path / 'hf'}", f"--model_dir={model_dir}"),
           "is a fine-tuned embedding model: --to_sentence_transformers=DIR writes it")
  one_line(convert(f"--to_sentence_transformers={model_dir}/st", f"--model_dir={model_dir}"),
           "overlap")
  other = tmp_path / "classifier"
  shutil.copytree(model_dir, other)
  config = json.loads((other / "config.json").read_text())
  config["task"]["task_type"] = "classification"
  (other / "config.json").write_text(json.dumps(config))
  one_line(convert(f"--to_sentence_transformers={tmp_path / 'st'}", f"--model_dir={other}"),
           "is a fine-tuned classification model; --to_sentence_transformers exports embedding")
  assert not (tmp_path / "st").exists() and not (tmp_path / "hf").exists()
  # --overwrite replaces the folder whole.
  (tmp_path / "st").mkdir()
  (tmp_path / "st" / "stale.txt").write_text("x")
  result = convert(f"--to_sentence_transformers={tmp_path / 'st'}", f"--model_dir={model_dir}",
                   "--overwrite")
  assert result.returncode == 0, result.stderr
  assert sorted(os.listdir(tmp_path / "st")) == sorted(os.listdir(st_dir))


# SentenceTransformer(DIR) in a fresh process: every warning and every log record of WARNING or
# above while loading and encoding, transformers' loading info, and the vectors.
_ST = r"""
import json, logging, sys, warnings
import numpy as np
path, texts_path, out_path = sys.argv[1:]
records = []
class Keep(logging.Handler):
  def emit(self, record):
    records.append(f"{record.name}: {record.getMessage()}")
for name in ("", "transformers", "sentence_transformers"):
  logging.getLogger(name).addHandler(Keep(logging.WARNING))
with warnings.catch_warnings(record=True) as caught:
  warnings.simplefilter("always")
  from sentence_transformers import SentenceTransformer
  from transformers import AutoModel
  _, info = AutoModel.from_pretrained(path, output_loading_info=True)
  model = SentenceTransformer(path, device="cpu")
  with open(texts_path, encoding="utf-8") as f:
    texts = json.load(f)
  vectors = model.encode(texts, batch_size=64, normalize_embeddings=False)
np.save(out_path, vectors)
print(json.dumps({"loading_info": {k: sorted(map(str, v)) for k, v in info.items()},
                  "warnings": [f"{w.category.__name__}: {w.message}" for w in caught] + records,
                  "max_seq_length": model.max_seq_length,
                  "modules": [type(m).__name__ for m in model],
                  "similarity": model.similarity_fn_name}))
"""


@pytest.mark.skipif(not HAVE_ST, reason="needs sentence-transformers (requirements-bench.txt)")
def test_sentence_transformers_computes_our_embed_vectors(exported, signature, tmp_path):
  _, _, st_dir, _ = exported
  texts = _texts(1200)
  want, counts = _call(signature, texts)
  assert (counts == MAX_SEQ_LEN).sum() >= 500 and (counts < MAX_SEQ_LEN - 2).sum() >= 100
  texts_path = tmp_path / "texts.json"
  texts_path.write_text(json.dumps(texts), encoding="utf-8")
  proc = run_script(_ST, st_dir, str(texts_path), str(tmp_path / "st.npy"),
                    env=module_env(CUDA_VISIBLE_DEVICES="", HF_HUB_OFFLINE="1",
                                   TRANSFORMERS_VERBOSITY="warning"))
  assert proc.returncode == 0, proc.stderr[-3000:]
  report = json.loads(proc.stdout.strip().splitlines()[-1])
  assert report["loading_info"] == {"missing_keys": [], "unexpected_keys": [],
                                    "mismatched_keys": [], "error_msgs": []}
  assert report["warnings"] == []
  assert report["max_seq_length"] == MAX_SEQ_LEN
  assert report["modules"] == ["Transformer", "Pooling", "Normalize"]
  assert report["similarity"] == "cosine"
  got = np.load(tmp_path / "st.npy")
  assert got.shape == want.shape
  cosine = (got * want).sum(1) / np.linalg.norm(got, axis=1) / np.linalg.norm(want, axis=1)
  worst = int(cosine.argmin())
  assert cosine.min() >= 0.9999, (cosine.min(), texts[worst][:200])
