"""Regenerates this folder's tokenizer files (needs `tokenizers`; `transformers` for the check).

    python tests/testdata/modernbert_tiny/make_tokenizer.py

Writes tokenizer.json, tokenizer_config.json, special_tokens_map.json and tokenizer_cases.jsonl:
a byte-level BPE of ModernBERT's pipeline (../../../../shared/modernbert.md section 3), trained
by HF `tokenizers` on tests/testdata/python_docs_small.jsonl.gz, 1,024 ids in all, laid out as
answerdotai/ModernBERT-base's 50,368 are (its tokenizer_config.json's added_tokens_decoder):

  0 |||IP_ADDRESS|||   1 <|padding|>   2..992 BPE   993..1015 runs of 24 down to 2 spaces
  1016 |||EMAIL_ADDRESS|||   1017 |||PHONE_NUMBER|||   1018 <|endoftext|>
  1019 [UNK]  1020 [CLS]  1021 [SEP]  1022 [PAD]  1023 [MASK] (lstrip)

The PII placeholders and the space runs are non-special and `normalized` (matched after NFC);
<|padding|>, <|endoftext|> and the five [..] tokens are special and not normalized. The model
files (config.json, model.safetensors) of this folder are written by another script.
"""

import gzip
import json
import os
import sys

import tokenizers
from tokenizers import (
  AddedToken,
  decoders,
  models,
  normalizers,
  pre_tokenizers,
  processors,
  trainers,
)

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "python_docs_small.jsonl.gz")
VOCAB_SIZE = 1024
SPACE_RUNS = [" " * n for n in range(24, 1, -1)]
SPECIALS = ["[UNK]", "[CLS]", "[SEP]", "[PAD]", "[MASK]"]


def _token(content, special):
  return AddedToken(content, lstrip=(content == "[MASK]"), rstrip=False, single_word=False,
                    normalized=not special, special=special)


def build() -> tokenizers.Tokenizer:
  tok = tokenizers.Tokenizer(models.BPE())
  tok.normalizer = normalizers.NFC()
  tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True,
                                                use_regex=True)
  tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
  late = SPACE_RUNS + ["|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||", "<|endoftext|>"] + SPECIALS
  trainer = trainers.BpeTrainer(
      vocab_size=VOCAB_SIZE - len(late), show_progress=False, min_frequency=1,
      special_tokens=[_token("|||IP_ADDRESS|||", False), _token("<|padding|>", True)],
      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
  with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
    texts = [json.loads(line)["text"] for line in f]
  tok.train_from_iterator(texts, trainer)
  tok.add_tokens([_token(t, False) for t in late[:-6]])
  tok.add_special_tokens([_token("<|endoftext|>", True)] + [_token(t, True) for t in SPECIALS])
  cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
  tok.post_processor = processors.TemplateProcessing(
      single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
      special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
  return tok


def _fixed_flags(tok: tokenizers.Tokenizer) -> tokenizers.Tokenizer:
  """The trainer's specials are special and not normalized: |||IP_ADDRESS||| is neither in
  ModernBERT's file. Rewritten in the JSON (what the file says is what a reader sees)."""
  spec = json.loads(tok.to_str())
  for t in spec["added_tokens"]:
    if t["content"] == "|||IP_ADDRESS|||":
      t["special"], t["normalized"] = False, True
  return tokenizers.Tokenizer.from_str(json.dumps(spec))


CASES = [
    "Hello world", "", " ", "  ", "a  b", "a   b", "a" + " " * 30 + "b", " " * 50,
    "trailing   ", "\tTabs\tand\t\ttabs", "new\nlines\n\n\n  indented\n    code",
    "a \t b \n\n c", "\r\n\r\n", "Cafe\u0301 and re\u0301sume\u0301", "e\u0301\u0327",
    "Ångström A\u030a", "\ufb01ne \u212b", "The capital of France is [MASK].",
    "is  [MASK] and\t[MASK]\n[MASK]", "[MASK][MASK] [MASK]", "[CLS] a [SEP] b [SEP]",
    "x[PAD]y[UNK]z", "<|endoftext|>next <|padding|>", "[MASK", "MASK]", "[mask]",
    "mail |||EMAIL_ADDRESS||| or |||PHONE_NUMBER|||, ip|||IP_ADDRESS|||.", "||||IP_ADDRESS||||",
    "  [MASK]  |||IP_ADDRESS|||  ", "Emoji \U0001F642\U0001F680\U0001F468\u200d\U0001F469 ok",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8", "\ud55c\uad6d\uc5b4 \u1112\u1161\u11ab",
    "digits 1234567890 12 3 \u0966\u0967\u0968", "Don't stop: it's what we're doing, isn't it? "
    "They'll see; I'd know; you've been.", "'s 'S 'sup", "def f(x):\n    return x**2  # c",
    "\u00a0nbsp\u3000ideographic\u2028sep", "\x00nul\x00", "<s> </s> <mask> <pad>",
]
# Invalid UTF-8 (bytes): HF reads the text decoded with errors="replace".
BYTE_CASES = [b"bad \xff\xfe bytes", b"cut \xe6\x97", b"\xed\xa0\x80 surrogate",
              b"overlong \xc0\xaf", b"[MASK]\x80"]
PAIRS = [("first", "second"), ("", ""), ("a  b", "[MASK] c"), ("Cafe\u0301", "  x  ")]


def write_cases(tok: tokenizers.Tokenizer, path: str) -> None:
  """One case a line: {"text"} or {"bytes_hex"} (and {"pair"}) with "ids" (no template) and
  "template_ids" (with [CLS] ... [SEP])."""
  rows = []
  for text in CASES:
    rows.append({"text": text})
  for raw in BYTE_CASES:
    rows.append({"bytes_hex": raw.hex(), "text": raw.decode("utf-8", "replace")})
  for row in rows:
    row["ids"] = tok.encode(row["text"], add_special_tokens=False).ids
    row["template_ids"] = tok.encode(row["text"]).ids
    if "bytes_hex" in row:
      del row["text"]
  for a, b in PAIRS:
    rows.append({"text": a, "pair": b, "template_ids": tok.encode(a, b).ids})
  with open(path, "w", encoding="utf-8") as f:
    for row in rows:
      f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_hf_files(tok: tokenizers.Tokenizer) -> None:
  """tokenizer_config.json and special_tokens_map.json as ModernBERT-base's (through
  transformers' save_pretrained when it is installed, by hand otherwise)."""
  decoder = {}
  for t in json.loads(tok.to_str())["added_tokens"]:
    decoder[str(t["id"])] = {k: t[k] for k in ("content", "lstrip", "normalized", "rstrip",
                                                "single_word", "special")}
  config = {"added_tokens_decoder": decoder, "clean_up_tokenization_spaces": True,
            "cls_token": "[CLS]", "mask_token": "[MASK]", "model_max_length": 8192,
            "pad_token": "[PAD]", "sep_token": "[SEP]",
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_input_names": ["input_ids", "attention_mask"], "unk_token": "[UNK]"}
  mask = {"content": "[MASK]", "lstrip": True, "normalized": False, "rstrip": False,
          "single_word": False}
  specials_map = {"cls_token": "[CLS]", "mask_token": mask, "pad_token": "[PAD]",
                  "sep_token": "[SEP]", "unk_token": "[UNK]"}
  for name, obj in (("tokenizer_config.json", config), ("special_tokens_map.json", specials_map)):
    with open(os.path.join(HERE, name), "w", encoding="utf-8") as f:
      f.write(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def check_auto_tokenizer(tok: tokenizers.Tokenizer) -> None:
  try:
    import transformers  # pylint: disable=import-outside-toplevel
  except ImportError:
    print("transformers not installed: AutoTokenizer not checked")
    return
  auto = transformers.AutoTokenizer.from_pretrained(HERE)
  text = "The capital  of France is [MASK]."
  assert auto(text)["input_ids"] == tok.encode(text).ids, "AutoTokenizer disagrees"
  assert (auto.cls_token_id, auto.sep_token_id, auto.pad_token_id, auto.mask_token_id) == (
      1020, 1021, 1022, 1023)
  assert "token_type_ids" not in auto(text)
  print("AutoTokenizer loads the folder:", type(auto).__name__)


def main():
  tok = _fixed_flags(build())
  got = {t: tok.token_to_id(t) for t in ["|||IP_ADDRESS|||", "<|padding|>", SPACE_RUNS[0],
                                         "  ", "<|endoftext|>"] + SPECIALS}
  want = dict(zip(got, [0, 1, 993, 1015, 1018, 1019, 1020, 1021, 1022, 1023], strict=True))
  if got != want or tok.get_vocab_size() != VOCAB_SIZE:
    sys.exit(f"unexpected layout: {got} ({tok.get_vocab_size()} ids)")
  tok.save(os.path.join(HERE, "tokenizer.json"))
  write_hf_files(tok)
  write_cases(tok, os.path.join(HERE, "tokenizer_cases.jsonl"))
  check_auto_tokenizer(tokenizers.Tokenizer.from_file(os.path.join(HERE, "tokenizer.json")))


if __name__ == "__main__":
  main()
