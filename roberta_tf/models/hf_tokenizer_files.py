"""A Hugging Face model folder's tokenizer files: tokenizer_config.json, special_tokens_map.json.

With vocab.json and merges.txt alone, transformers' `AutoTokenizer` builds a `RobertaTokenizer`
whose `<mask>` keeps the space before it as a token of its own (`"is <mask>"` -> `Ġis`, `Ġ`,
`<mask>`) and whose `model_max_length` is 1e30, so nothing truncates a long text to the position
table. These two files say what roberta-base's tokenizer is, in the format `save_pretrained`
writes: the special tokens, `<mask>` with `lstrip` (it absorbs the whitespace before it, as our
tokenizer and roberta-base's do; not normalized), and `model_max_length` = the model's
`max_seq_len` (max_positions - 2: 512 for roberta-base), `<s>` and `</s>` included.

`add_prefix_space` (false as in roberta-base; true for a token classifier's folder): the
tokenizer puts a space before the text, and with `is_split_into_words=True` before every word
(transformers 4 refuses pre-split words for RoBERTa without it; 5 encodes the first word without
the space). That is our token classification's word encoding (tag_features.py), and HF's
token-classification pipeline then encodes a raw text's first word with a space too.

A model of a tokenizer.json vocabulary (ModernBERT's) goes out as that tokenizer.json beside
`write_pipeline`'s two files, as ModernBERT's converter writes them: `PreTrainedTokenizerFast`
(the file is the tokenizer; transformers 5 loads a `modernbert` folder through its tokenizers
backend anyway), the roles by the vocabulary's tokens ([CLS], [SEP], [PAD], [MASK], [UNK]),
the mask token with `lstrip` (as the file's added token has it), no token_type_ids, and
`model_max_length` the model's.
"""

from __future__ import annotations

from roberta_tf.common import atomic_write, files
from roberta_tf.tokenization import tokenizer_json, vocab_files, vocabulary

TOKENIZER_CONFIG_FILE = "tokenizer_config.json"
SPECIAL_TOKENS_MAP_FILE = "special_tokens_map.json"
FILES = (TOKENIZER_CONFIG_FILE, SPECIAL_TOKENS_MAP_FILE)
TOKENIZER_CLASS = "RobertaTokenizer"  # transformers 5 and 4 (the latter picks its Fast twin)
FAST_TOKENIZER_CLASS = "PreTrainedTokenizerFast"  # a tokenizer.json folder's (ModernBERT's)

# RobertaTokenizer's keyword -> token. <s> opens and </s> closes every sequence (bos/cls,
# eos/sep), as in roberta-base.
_ROLES = {"bos_token": vocab_files.BOS, "cls_token": vocab_files.BOS,
          "eos_token": vocab_files.EOS, "sep_token": vocab_files.EOS,
          "unk_token": vocab_files.UNK, "pad_token": vocab_files.PAD,
          "mask_token": vocab_files.MASK}


def _added_token(content: str) -> dict:
  """An AddedToken as `save_pretrained` writes it (roberta-base's flags: only <mask> lstrips,
  and only <mask> is matched on the raw text, not the normalized one)."""
  mask = content == vocab_files.MASK
  return {"content": content, "lstrip": mask, "normalized": not mask, "rstrip": False,
          "single_word": False, "special": True}


def tokenizer_config(vocab: dict[str, int], max_seq_len: int,
                     add_prefix_space: bool = False) -> dict:
  """tokenizer_config.json's dict for `vocab` (token -> id) and a model of `max_seq_len`."""
  specials = sorted({vocab[t]: t for t in vocab_files.SPECIAL_TOKENS.values()}.items())
  return {
      "add_prefix_space": bool(add_prefix_space),
      "added_tokens_decoder": {str(i): _added_token(t) for i, t in specials},
      "clean_up_tokenization_spaces": False,
      "errors": "replace",
      "model_max_length": int(max_seq_len),
      "tokenizer_class": TOKENIZER_CLASS,
      "trim_offsets": True,
      **_ROLES,
  }


def special_tokens_map() -> dict:
  """special_tokens_map.json's dict (roberta-base's: <mask> with its AddedToken flags)."""
  mask = {k: v for k, v in _added_token(vocab_files.MASK).items() if k != "special"}
  return {**_ROLES, "mask_token": mask}


def write(hf_dir: str, vocab_path: str, max_seq_len: int,
          add_prefix_space: bool = False) -> list[str]:
  """Writes FILES into `hf_dir` for the vocabulary at `vocab_path`; returns their names.

  Raises:
    VocabFileError: the vocabulary is unreadable or lacks one of the five special tokens.
  """
  vocab = vocab_files.read_vocab(vocab_path)
  missing = [t for t in vocab_files.SPECIAL_TOKENS.values() if t not in vocab]
  if missing:
    raise vocab_files.VocabFileError(f"{vocab_path} lacks the special tokens {missing}")
  atomic_write.write_json(files.join(hf_dir, TOKENIZER_CONFIG_FILE),
                          tokenizer_config(vocab, max_seq_len, add_prefix_space))
  atomic_write.write_json(files.join(hf_dir, SPECIAL_TOKENS_MAP_FILE), special_tokens_map())
  return list(FILES)


# The roles of a tokenizer.json folder's files (vocabulary.Vocabulary.special_ids' names).
_PIPELINE_ROLES = {"cls_token": "bos", "sep_token": "eos", "pad_token": "pad",
                   "mask_token": "mask", "unk_token": "unk"}


def write_pipeline(hf_dir: str, max_seq_len: int) -> list[str]:
  """Writes FILES for the tokenizer.json in `hf_dir` (a model's, copied there with the role
  files it came with, which name its specials and are replaced); returns their names.

  Raises:
    VocabFileError: the tokenizer.json is unreadable or names no bos/eos/pad/mask token.
  """
  found = vocabulary.Vocabulary.of_dir(hf_dir)
  if found.kind != vocabulary.TOKENIZER_JSON:
    raise vocab_files.VocabFileError(f"{hf_dir}: no tokenizer.json alone (it has {found.kind})")
  spec = tokenizer_json.read(tokenizer_json.path_in(hf_dir))
  token = {i: t for t, i in spec.vocab.items()}
  roles = {key: token[found.special_ids[role]] for key, role in _PIPELINE_ROLES.items()
           if role in found.special_ids}
  added = {t.content: t for t in spec.added}
  mask = added.get(roles["mask_token"])
  mask_entry = {"content": roles["mask_token"], "lstrip": bool(mask and mask.lstrip),
                "normalized": bool(mask and mask.normalized),
                "rstrip": bool(mask and mask.rstrip), "single_word": False}
  config = {"clean_up_tokenization_spaces": False, **roles,
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": int(max_seq_len), "tokenizer_class": FAST_TOKENIZER_CLASS}
  atomic_write.write_json(files.join(hf_dir, TOKENIZER_CONFIG_FILE), config)
  atomic_write.write_json(files.join(hf_dir, SPECIAL_TOKENS_MAP_FILE),
                          {**roles, "mask_token": mask_entry})
  return list(FILES)
