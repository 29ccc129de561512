"""roberta_tf.tokenization.vocabulary: one object for both kinds of vocabulary folder, and
`pipeline_tokenizer.load_tokenizer` on each."""

import json
import os
import shutil

import pytest
import tokenizers
from tokenizers import processors

from roberta_tf.tokenization import vocabulary
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer, load_tokenizer
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from roberta_tf.tokenization.vocab_files import VocabFileError
from tests.conftest import HF_TINY, TESTDATA

MB_TINY = os.path.join(TESTDATA, "modernbert_tiny")


def test_roberta_files():
  v = vocabulary.Vocabulary.of_dir(HF_TINY)
  assert (v.kind, v.files, v.size) == (vocabulary.BPE_FILES, ("vocab.json", "merges.txt"), 8000)
  assert v.special_ids == {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 4}
  # RoBERTa's templates, as HF's RobertaProcessing adds them.
  hf = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(
      os.path.join(HF_TINY, "vocab.json"), os.path.join(HF_TINY, "merges.txt")))
  hf.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
  a, b = hf.encode("x"), hf.encode("y")
  assert v.template.single(a.ids[1:-1]) == a.ids
  assert v.template.pair(a.ids[1:-1], b.ids[1:-1]) == hf.encode("x", "y").ids
  assert v.template.pair([7], [8]) == [0, 7, 2, 2, 8, 2]
  assert (v.template.single_specials, v.template.pair_specials) == (2, 4)


def test_tokenizer_json_folder():
  v = vocabulary.Vocabulary.of_dir(MB_TINY)
  assert (v.kind, v.files, v.size) == (vocabulary.TOKENIZER_JSON, ("tokenizer.json",), 1024)
  assert v.special_ids == {"bos": 1020, "pad": 1022, "eos": 1021, "unk": 1019, "mask": 1023}
  assert (v.cls_id, v.sep_id, v.pad_id, v.mask_id) == (1020, 1021, 1022, 1023)
  assert v.template.single([7]) == [1020, 7, 1021]
  assert v.template.pair([7], [8]) == [1020, 7, 1021, 8, 1021]
  assert (v.template.single_specials, v.template.pair_specials) == (2, 3)
  assert v.paths() == [os.path.join(MB_TINY, "tokenizer.json")]


def test_hf_model_folder(tmp_path):
  """An HF model folder (config.json, tokenizer.json alone, no HF config files) is a vocab dir;
  a tokenizer_config.json's roles win over the names."""
  shutil.copy(os.path.join(MB_TINY, "tokenizer.json"), tmp_path)
  with open(tmp_path / "config.json", "w", encoding="utf-8") as f:
    json.dump({"model_type": "modernbert", "vocab_size": 1024}, f)
  assert vocabulary.is_vocab_dir(str(tmp_path))
  assert vocabulary.Vocabulary.of_dir(str(tmp_path)).special_ids["pad"] == 1022
  with open(tmp_path / "tokenizer_config.json", "w", encoding="utf-8") as f:
    json.dump({"pad_token": "<|padding|>", "mask_token": {"content": "[MASK]"}}, f)
  assert vocabulary.Vocabulary.of_dir(str(tmp_path)).special_ids["pad"] == 1
  assert load_tokenizer(str(tmp_path)).pad_id == 1
  with open(tmp_path / "special_tokens_map.json", "w", encoding="utf-8") as f:
    json.dump({"cls_token": "[SEP]"}, f)
  with pytest.raises(VocabFileError, match="template's bos id 1020"):
    vocabulary.Vocabulary.of_dir(str(tmp_path))


def test_not_a_vocab_dir(tmp_path):
  assert not vocabulary.is_vocab_dir(str(tmp_path))
  with pytest.raises(VocabFileError, match=f"{tmp_path}: no vocabulary"):
    vocabulary.Vocabulary.of_dir(str(tmp_path))


def test_load_tokenizer_kinds():
  assert type(load_tokenizer(HF_TINY)) is BytePairTokenizer
  tok = load_tokenizer(MB_TINY)
  assert type(tok) is PipelineTokenizer
  assert (tok.bos_id, tok.eos_id, tok.pad_id, tok.mask_id) == (1020, 1021, 1022, 1023)


def test_roberta_tokenizer_json_same_ids(tmp_path):
  """RoBERTa's vocabulary as a tokenizer.json (what an HF roberta folder ships: no normalizer,
  <mask> lstrip, RobertaProcessing) gives BytePairTokenizer's ids and RoBERTa's templates."""
  hf = tokenizers.Tokenizer(tokenizers.models.BPE.from_file(
      os.path.join(HF_TINY, "vocab.json"), os.path.join(HF_TINY, "merges.txt")))
  hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
  hf.decoder = tokenizers.decoders.ByteLevel()
  hf.add_special_tokens([tokenizers.AddedToken(t, lstrip=(t == "<mask>"), special=True)
                         for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")])
  hf.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
  hf.save(str(tmp_path / "tokenizer.json"))
  v = vocabulary.Vocabulary.of_dir(str(tmp_path))
  assert v.special_ids == vocabulary.Vocabulary.of_dir(HF_TINY).special_ids
  assert v.template == vocabulary.Vocabulary.of_dir(HF_TINY).template
  texts = ["is <mask>.", "a<s>b</s>c  d\t", "Cafe\u0301 \u65e5\u672c", "x  <mask>  <pad>"]
  assert load_tokenizer(str(tmp_path))(texts).to_list() == load_tokenizer(HF_TINY)(
      texts).to_list() == [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
