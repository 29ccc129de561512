"""Writes word_cases.jsonl: pre-split word lists and what transformers gives them with this
folder's tokenizer.json (needs transformers):

    python tests/testdata/modernbert_tiny/make_word_cases.py

One JSON line per case: {"words": [...], "ids": [[piece ids of word 0], ...] (from
`tokenizer(words, is_split_into_words=True, add_special_tokens=False)` grouped by word_ids()),
"input_ids": [...] and "word_ids": [...] (the same call with the specials: [CLS] ... [SEP],
None for a special)}. tests/test_tagging_word_encoding_pipeline.py compares token tagging's
word encoding (tag_features.encode_words) with them, and recomputes them where transformers is
installed.
"""

import json
import os

from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))

# Hostile words: the fixture's added tokens (special, non-special, lstrip [MASK], space runs)
# inside and around words, NFC (decomposed accents), non-ASCII, whitespace inside a word (no
# reader gives one, HF takes it as it is), empty words, a word over 256 bytes, digits, quotes.
CASES = [
    ["New", "York", "is", "big", "."],
    ["Zoë", "e\u0301", "Cafe\u0301", "Straße", "naïve", "日本語", "Ελληνικά", "😀🎉"],
    ["[MASK]", "a[MASK]", "[MASK]x", "x[MASK]y", "[MASK][MASK]"],
    ["[CLS]", "[SEP]", "[PAD]", "[UNK]", "<|padding|>", "<|endoftext|>", "word[SEP]"],
    ["|||IP_ADDRESS|||", "mail|||EMAIL_ADDRESS|||", "|||PHONE_NUMBER|||x"],
    ["a  b", "   ", "x" + " " * 5 + "y", " lead", "trail ", "\ttab", "new\nline"],
    ["", "word", "", ""],
    ["a" * 300, "-" * 40, "3.14", "1,000,000", "U.S.A.", "don't", "\"quoted\"", "(x)"],
    ["def", "f(x):", "return", "x**2", "#", "comment", "==", "!=", "->"],
    ["\u00a0", "\u3000", "\u200b", "\ufeff", "é", "É", "Ω", "ﬁ"],
    ["Élodie", "met", "Hiroshi", "in", "Zürich", "on", "2024-05-01"],
    ["[mask]", "[Mask]", "[MASK", "MASK]", "[ MASK ]"],
]


def main():
  tokenizer = AutoTokenizer.from_pretrained(HERE)
  with open(os.path.join(HERE, "word_cases.jsonl"), "w", encoding="utf-8") as f:
    for words in CASES:
      enc = tokenizer(words, is_split_into_words=True, add_special_tokens=False)
      per_word = [[] for _ in words]
      for piece, word in zip(enc["input_ids"], enc.word_ids(), strict=True):
        per_word[word].append(piece)
      full = tokenizer(words, is_split_into_words=True)
      f.write(json.dumps({"words": words, "ids": per_word, "input_ids": full["input_ids"],
                          "word_ids": full.word_ids()}, ensure_ascii=False) + "\n")
  print("wrote", len(CASES), "cases")


if __name__ == "__main__":
  main()
