"""A tokenizer.json vocabulary (ModernBERT's pipeline) where the project took vocab.json before:
build_shards, inspect_data, whole-word masking, fine-tuning features (single, pair, SQuAD), the
export's tokenizer, fill_mask's mask token and --to_hf's tokenizer files; ids against HF
`tokenizers` on the fixture tests/testdata/modernbert_tiny ([CLS] 1020, [SEP] 1021, [PAD] 1022,
[MASK] 1023).
"""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from data_prep import sentence_encoders, shard_builder
from data_prep.shard_settings import ShardSettings
from roberta_tf import fill_mask
from roberta_tf.data import dataset_info
from roberta_tf.data.masking import Masker, MaskingConfig
from roberta_tf.data.vocab_info import VocabInfo
from roberta_tf.finetuning import featurize
from roberta_tf.finetuning.squad import features as squad_features
from roberta_tf.finetuning.squad.read import SquadExample
from roberta_tf.models import hf_tokenizer_files
from roberta_tf.serving import mlm_export
from roberta_tf.serving.saved_model_writer import EXTRA_DIR
from roberta_tf.tokenization import vocabulary
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from tests.conftest import HF_TINY, TESTDATA

MB = os.path.join(TESTDATA, "modernbert_tiny")
CLS, SEP, PAD, MASK = 1020, 1021, 1022, 1023
TEXTS = ["The cat sat on the mat.", "a  b\t\tc\n\nd", "Is it [MASK] or not?", "e\u0301te"]
PAIRS = ["What is it?", "  two  spaces", "x", "Caf\u00e9 au lait"]


@pytest.fixture(scope="module")
def hf():
  tokenizers = pytest.importorskip("tokenizers")
  return tokenizers.Tokenizer.from_file(os.path.join(MB, "tokenizer.json"))


@pytest.fixture(scope="module")
def tok():
  return PipelineTokenizer.from_dir(MB)


def _records(path):
  return [list(tf.train.Example.FromString(r.numpy()).features.feature["input_ids"].int64_list
               .value) for r in tf.data.TFRecordDataset(path)]


def test_build_shards_packs_with_the_vocabularys_specials(tmp_path, hf, tok):
  docs = [["First line of one.", "Its second  line."], ["Another document here."]]
  corpus = tmp_path / "corpus.txt"
  corpus.write_text("\n\n".join("\n".join(d) for d in docs) + "\n", encoding="utf-8")
  out = tmp_path / "shards"
  def encode(sentences):  # the TF encoder's calls, on the tokenizer built once for the file
    ids = tok.tokenize(tf.constant(sentences))
    return ids.flat_values.numpy(), ids.row_splits.numpy()
  info = shard_builder.build_shards(ShardSettings(
      input=str(corpus), vocab_dir=MB, output_dir=str(out), max_seq_len=64, num_shards=1,
      validation_fraction=0.0, shuffle_blocks=False, progress=False), encode=encode)
  sentences = [s for d in docs for s in d] + TEXTS
  hf_encode = sentence_encoders.make_encoder("hf", sentence_encoders.load_vocab(MB))
  for got, want in zip(encode(sentences), hf_encode(sentences), strict=True):
    np.testing.assert_array_equal(got, want)  # the shard encoders agree on tokenizer.json too
  assert info["special_ids"] == {"bos": CLS, "pad": PAD, "eos": SEP, "unk": 1019, "mask": MASK}
  assert dataset_info.template_of(dataset_info.read(str(out))) == tok.template
  assert info["vocab"]["files"]["tokenizer.json"] and "sha256" not in info["vocab"]
  for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    assert (out / name).read_bytes() == open(os.path.join(MB, name), "rb").read()
  ids = lambda s: hf.encode(s, add_special_tokens=False).ids  # noqa: E731
  # FULL-SENTENCES: one block across both documents, an extra [SEP] between them.
  want = [CLS, *ids(docs[0][0]), *ids(docs[0][1]), SEP, *ids(docs[1][0]), SEP]
  [shard] = dataset_info.split_files(str(out), dataset_info.read(str(out)), "train")
  assert _records(shard) == [want]
  # inspect_data reads them, decoding with the tokenizer.json beside the shards
  from roberta_tf.inspect_data import inspect_data
  report = inspect_data(str(out), num_batches=1, batch_size=1, max_seq_len=64,
                        masking=MaskingConfig(whole_word=True), num_examples=1)
  assert report["decoder"] == str(out / "tokenizer.json")
  assert report["examples"][0]["original"] == (
      "[CLS]" + docs[0][0] + docs[0][1] + "[SEP]" + docs[1][0] + "[SEP]")


def test_roberta_shards_record_no_template():
  info = {"special_ids": {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 7}}
  assert dataset_info.template_of(info) == vocabulary.roberta_template(0, 2)


def test_a_piece_after_whitespace_starts_a_word(tok):
  vocab = VocabInfo.from_dir(MB)
  a, space, b = tok(tf.constant("a  b")).numpy().tolist()
  assert tok.id_to_token(space) == "  " and vocab.space[space] and not vocab.word_start[b]
  roberta = VocabInfo.from_dir(HF_TINY)
  assert roberta.space[roberta.special_ids["eos"]] == 0  # flags only whitespace pieces
  # One word chosen per row (k = 1 of 3 words: a, "  ", b): never "  " and b together.
  rows = 32
  ids = tf.constant([[CLS, a, space, b, SEP] + [PAD] * 3] * rows, tf.int32)
  seeds = tf.stack([tf.range(rows, dtype=tf.int64), tf.zeros([rows], tf.int64)], 1)
  masker = Masker(vocab, MaskingConfig(whole_word=True, mask_prob=0.01), 8)
  weights = masker(ids, seeds)["mask_weights"].numpy()
  assert (weights.sum(1) == 1).all()


def test_featurize_single_and_pair_equal_hf(hf, tok):
  single = featurize.build_inputs(featurize.tokenize(tok, TEXTS), None, 128, tok.template)
  pair = featurize.build_inputs(featurize.tokenize(tok, TEXTS), featurize.tokenize(tok, PAIRS),
                                128, tok.template)
  assert single.to_list() == [hf.encode(t).ids for t in TEXTS]
  assert pair.to_list() == [hf.encode(t, p).ids for t, p in zip(TEXTS, PAIRS, strict=True)]
  assert pair.to_list()[2][:1] == [CLS] and pair.to_list()[2].count(SEP) == 2


def test_squad_features_with_the_bert_style_template(tok):
  context = "Paris is the capital of France. It is large."
  example = SquadExample("q1", "What is the capital?", context, (("Paris", 0),), False)
  feats, _, unlocated = squad_features.featurize([example], tok, max_seq_len=64,
                                                 max_query_len=16, doc_stride=8)
  q = tok(tf.constant(example.question)).numpy().tolist()
  c = tok(tf.constant(context)).numpy().tolist()
  assert unlocated == 0 and len(feats.input_ids) == 1
  assert feats.input_ids[0].tolist() == [CLS, *q, SEP, *c, SEP]
  assert feats.context_offset[0] == len(q) + 2
  start = int(feats.start_positions[0])
  assert tok.detokenize(tf.constant([feats.input_ids[0][start:feats.end_positions[0] + 1]])
                        ).numpy()[0].decode().strip() == "Paris"


def test_export_tokenizer_of_a_tokenizer_json_folder(tmp_path, hf):
  from roberta_tf import models
  config = models.RobertaConfig(vocab_size=1024, hidden_size=16, num_layers=1, num_heads=2,
                                intermediate_size=32, pad_id=PAD, bos_id=CLS, eos_id=SEP,
                                max_positions=PAD + 34)  # RoBERTa positions: past pad_id
  tokenizer = mlm_export._tokenizer(MB, MB, config)  # pylint: disable=protected-access
  module = mlm_export.ServingModule(models.RobertaPretrainer(config), tokenizer, max_seq_len=32)
  out = module.tokenize(tf.constant(TEXTS))
  want = [hf.encode(t).ids for t in TEXTS]
  width = max(map(len, want))
  assert out["input_ids"].numpy().tolist() == [w + [PAD] * (width - len(w)) for w in want]
  # fill_mask finds the vocabulary's [MASK] (after a space: it lstrips), one per text
  filled = module.fill_mask(tf.constant(TEXTS[2:3]))
  assert filled["num_masks"].numpy().tolist() == [1]
  assert filled["mask_positions"].numpy()[0, 0] == want[2].index(MASK)
  assert isinstance(tokenizer, PipelineTokenizer)
  assert tokenizer.template == vocabulary.Vocabulary.of_dir(MB).template


def test_fill_mask_names_the_vocabularys_mask(tmp_path):
  (tmp_path / "mb" / EXTRA_DIR).mkdir(parents=True)
  shutil.copy(os.path.join(MB, "tokenizer.json"), tmp_path / "mb" / EXTRA_DIR)
  assert fill_mask.mask_token(str(tmp_path / "mb")) == "[MASK]"
  (tmp_path / "rb" / EXTRA_DIR).mkdir(parents=True)
  for name in ("vocab.json", "merges.txt"):
    shutil.copy(os.path.join(HF_TINY, name), tmp_path / "rb" / EXTRA_DIR)
  assert fill_mask.mask_token(str(tmp_path / "rb")) == "<mask>"
  assert fill_mask.mask_token(str(tmp_path)) == "<mask>"  # an older export: none recorded
  out = {"num_masks": np.array([1]), "top_ids": np.zeros([1, 1, 1], np.int32),
         "top_tokens": np.array([[[b" Paris"]]]), "top_probs": np.ones([1, 1, 1])}
  assert "[MASK] #1: ' Paris'" in fill_mask.format_predictions(["x [MASK]."], out, mask="[MASK]")


def test_to_hf_tokenizer_files_load_in_transformers(tmp_path, hf):
  transformers = pytest.importorskip("transformers")
  shutil.copy(os.path.join(MB, "tokenizer.json"), tmp_path)  # a model dir's copy: no role files
  names = hf_tokenizer_files.write_pipeline(str(tmp_path), 48)
  assert sorted(names) == sorted(hf_tokenizer_files.FILES)
  config = json.loads((tmp_path / "tokenizer_config.json").read_text(encoding="utf-8"))
  assert config["model_max_length"] == 48 and config["mask_token"] == "[MASK]"
  auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
  assert auto.mask_token == "[MASK]" and auto.cls_token_id == CLS and auto.pad_token_id == PAD
  for a, b in zip(TEXTS, PAIRS, strict=True):
    assert auto(a, b)["input_ids"] == hf.encode(a, b).ids
  assert "token_type_ids" not in auto("x")
