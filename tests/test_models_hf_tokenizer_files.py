"""models/hf_tokenizer_files.py in-process: the two files --to_hf adds, against golden copies.

(tests/test_hf_folder.py checks them in a whole --to_hf folder with transformers' pipeline.)
"""

import json
import os

import pytest

from roberta_tf.models import hf_tokenizer_files
from roberta_tf.tokenization import vocab_files
from tests.conftest import HF_TINY, TESTDATA

GOLDEN = os.path.join(TESTDATA, "hf_tokenizer_files")


def test_files_equal_the_golden_ones(tmp_path):
  names = hf_tokenizer_files.write(str(tmp_path), os.path.join(HF_TINY, "vocab.json"), 64)
  assert sorted(names) == sorted(os.listdir(GOLDEN))
  for name in names:
    assert (tmp_path / name).read_text(encoding="utf-8") == open(
        os.path.join(GOLDEN, name), encoding="utf-8").read(), name


def test_mask_lstrips_and_max_length_is_the_models():
  config = hf_tokenizer_files.tokenizer_config({"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3,
                                                "a": 4, "<mask>": 5}, 510)
  assert config["model_max_length"] == 510
  assert config["added_tokens_decoder"]["5"]["lstrip"] is True
  assert not any(t["lstrip"] for i, t in config["added_tokens_decoder"].items() if i != "5")
  assert hf_tokenizer_files.special_tokens_map()["mask_token"]["lstrip"] is True


def test_a_vocab_without_the_special_tokens_is_refused(tmp_path):
  vocab = tmp_path / "vocab.json"
  vocab.write_text(json.dumps({"<s>": 0, "a": 1}), encoding="utf-8")
  with pytest.raises(vocab_files.VocabFileError, match=r"lacks the special tokens"):
    hf_tokenizer_files.write(str(tmp_path), str(vocab), 64)
  assert sorted(os.listdir(tmp_path)) == ["vocab.json"]  # nothing written
