"""`train_tokenizer --format=tokenizer_json`: a tokenizer.json of ModernBERT's pipeline.

What HF `tokenizers` trains and writes here, and what roberta_tf's `PipelineTokenizer` runs
(roberta_tf/tokenization/tokenizer_json.py):
- normalizer NFC; ByteLevel pre-tokenizer (GPT-2's regex, no prefix space) and decoder; BPE;
- ids: the byte symbols and merges from 0, then runs of 24 down to 2 spaces as (non-special,
  normalized) added tokens, as ModernBERT's (OLMo's, GPT-NeoX's) vocabulary has them, then
  [UNK] [CLS] [SEP] [PAD] [MASK] last ([MASK] absorbs the whitespace before it);
- post-processor `[CLS] $A [SEP]` / `[CLS] $A [SEP] $B [SEP]`.
tokenizer_config.json and special_tokens_map.json are written beside it, so that transformers'
`AutoTokenizer` loads the folder (`PreTrainedTokenizerFast`, no token_type_ids). ModernBERT's
own placeholders (|||IP_ADDRESS|||, <|endoftext|>, [unused*]) are not added: nothing here uses
them.
"""

from __future__ import annotations

import json

from roberta_tf.common import atomic_write
from roberta_tf.common import files as files_lib

FORMAT = "tokenizer_json"
SPACE_RUNS = tuple(" " * n for n in range(24, 1, -1))
SPECIALS = ("[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]")
RESERVED = len(SPACE_RUNS) + len(SPECIALS)  # ids after the BPE's


def new_tokenizer():
  """An untrained tokenizers.Tokenizer of the pipeline (BPE, NFC, ByteLevel)."""
  from tokenizers import (  # pylint: disable=import-outside-toplevel
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
  )
  tok = Tokenizer(models.BPE())
  tok.normalizer = normalizers.NFC()
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
  tok.decoder = decoders.ByteLevel()
  return tok


def finish(tok) -> None:
  """Adds the space runs, the specials and the template to a trained tokenizer."""
  from tokenizers import AddedToken, processors  # pylint: disable=import-outside-toplevel
  tok.add_tokens([AddedToken(t, normalized=True, special=False) for t in SPACE_RUNS])
  tok.add_special_tokens([AddedToken(t, lstrip=(t == "[MASK]"), normalized=False, special=True)
                          for t in SPECIALS])
  cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
  tok.post_processor = processors.TemplateProcessing(
      single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
      special_tokens=[("[CLS]", cls), ("[SEP]", sep)])


def _hf_configs(spec: dict, model_max_length: int) -> tuple[dict, dict]:
  """(tokenizer_config.json, special_tokens_map.json) as ModernBERT-base's."""
  decoder = {str(t["id"]): {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                               "single_word", "special")}
             for t in spec["added_tokens"]}
  roles = {"cls_token": "[CLS]", "mask_token": "[MASK]", "pad_token": "[PAD]",
           "sep_token": "[SEP]", "unk_token": "[UNK]"}
  config = {"added_tokens_decoder": decoder, "clean_up_tokenization_spaces": True, **roles,
            "model_max_length": model_max_length, "tokenizer_class": "PreTrainedTokenizerFast",
            "model_input_names": ["input_ids", "attention_mask"]}
  mask = {"content": "[MASK]", "lstrip": True, "normalized": False, "rstrip": False,
          "single_word": False}
  return config, {**roles, "mask_token": mask}


def write(tok, output_dir: str, model_max_length: int = 8192) -> dict[str, int]:
  """Writes tokenizer.json (last: it marks a complete folder), tokenizer_config.json and
  special_tokens_map.json into `output_dir`. Returns {vocab_size, num_merges}."""
  spec = json.loads(tok.to_str())
  config, specials_map = _hf_configs(spec, model_max_length)
  path = files_lib.join(output_dir, "tokenizer.json")
  if files_lib.exists(path):
    files_lib.remove(path)
  for name, obj in (("tokenizer_config.json", config),
                    ("special_tokens_map.json", specials_map)):
    atomic_write.write_text(files_lib.join(output_dir, name),
                            json.dumps(obj, indent=2, ensure_ascii=False) + "\n")
  atomic_write.write_text(path, json.dumps(spec, ensure_ascii=False) + "\n")
  return {"vocab_size": tok.get_vocab_size(), "num_merges": len(spec["model"]["merges"])}
