"""An HF `tokenizer.json` of the byte-level BPE pipeline, read and checked (no TensorFlow).

The pipeline this project runs in TF ops (`pipeline_tokenizer.PipelineTokenizer`), as HF
`tokenizers` 0.23 runs it for ModernBERT (and GPT-2 / RoBERTa / GPT-NeoX / OLMo files):
1. added tokens split out first: those with `normalized: false` (ModernBERT's specials) matched
   on the raw text, then each remaining piece normalized (NFC or nothing) and the tokens with
   `normalized: true` (its space runs, PII placeholders, [unused]) matched in it; each match is
   leftmost-longest (Aho-Corasick), `lstrip` / `rstrip` absorb the whitespace beside it;
2. the ByteLevel pre-tokenizer (GPT-2's regex, no prefix space) on each piece, then BPE;
3. a post-processor template: [CLS] $A [SEP] / [CLS] $A [SEP] $B [SEP] (TemplateProcessing),
   <s> $A </s> / <s> $A </s></s> $B </s> (RobertaProcessing), or none (ByteLevel, null).

Anything else is refused with one `VocabFileError` naming the file and the part (WordPiece,
Unigram, byte_fallback, other normalizers or pre-tokenizers, single_word tokens, ...). The
file's `truncation` and `padding` are ignored, as transformers ignores them (it sets both per
call).
"""

from __future__ import annotations

import dataclasses
import json
import unicodedata

from roberta_tf.common import files
from roberta_tf.tokenization.vocab_files import VocabFileError, _read_error

TOKENIZER_JSON_FILE = "tokenizer.json"


@dataclasses.dataclass(frozen=True)
class AddedToken:
  """One entry of "added_tokens": matched in the text before the pre-tokenizer."""
  content: str
  id: int
  special: bool
  normalized: bool  # matched on the normalized text (its content normalized too)
  lstrip: bool      # absorbs the whitespace before it
  rstrip: bool      # absorbs the whitespace after it


@dataclasses.dataclass(frozen=True)
class Template:
  """A post-processor's ids around the sequences: `prefix A suffix` for one text,
  `prefix A middle B suffix` for a pair (`middle` None: the file has no pair template)."""
  prefix: tuple[int, ...] = ()
  suffix: tuple[int, ...] = ()
  middle: tuple[int, ...] | None = ()

  @property
  def single_specials(self) -> int:
    """Ids the template adds to one text (<s> A </s>: 2; [CLS] A [SEP]: 2)."""
    return len(self.prefix) + len(self.suffix)

  @property
  def pair_specials(self) -> int:
    """Ids it adds to a pair (<s> A </s></s> B </s>: 4; [CLS] A [SEP] B [SEP]: 3)."""
    return self.single_specials + len(self.middle or ())

  def single(self, a: list[int]) -> list[int]:
    return [*self.prefix, *a, *self.suffix]

  def pair(self, a: list[int], b: list[int]) -> list[int]:
    if self.middle is None:
      raise ValueError("this vocabulary has no pair template")
    return [*self.prefix, *a, *self.middle, *b, *self.suffix]


@dataclasses.dataclass(frozen=True)
class TokenizerSpec:
  """What a tokenizer.json says, in the terms the TF tokenizer needs.

  Attributes:
    path: the file (for messages).
    vocab: token -> id, the BPE model's vocabulary and every added token.
    merges: (left, right) by rank.
    added: the added tokens, in the file's order.
    nfc: whether the normalizer is NFC (else there is none).
    template: the post-processor's ids.
  """
  path: str
  vocab: dict[str, int]
  merges: list[tuple[str, str]]
  added: tuple[AddedToken, ...]
  nfc: bool
  template: Template

  def pattern(self, token: AddedToken) -> str:
    """The string HF matches for `token`: its content, NFC'd if it is matched normalized."""
    return unicodedata.normalize("NFC", token.content) if token.normalized and self.nfc \
        else token.content


def _refuse(path: str, part: str) -> VocabFileError:
  return VocabFileError(f"{path}: unsupported tokenizer.json: {part} (this project reads the "
                        "byte-level BPE pipeline: NFC or no normalizer, ByteLevel, BPE)")


def _normalizer(path: str, spec) -> bool:
  """Whether the normalizer is NFC (a one-element Sequence of it too); None: no normalizer."""
  if spec is None:
    return False
  if spec.get("type") == "Sequence" and len(spec.get("normalizers", [])) <= 1:
    return _normalizer(path, (spec["normalizers"] or [None])[0])
  if spec.get("type") == "NFC":
    return True
  raise _refuse(path, f"normalizer {json.dumps(spec)[:120]}")


def _pre_tokenizer(path: str, spec) -> None:
  if spec and spec.get("type") == "Sequence" and len(spec.get("pretokenizers", [])) == 1:
    spec = spec["pretokenizers"][0]
  if not spec or spec.get("type") != "ByteLevel":
    raise _refuse(path, f"pre_tokenizer {json.dumps(spec)[:120]}")
  if spec.get("add_prefix_space") or not spec.get("use_regex", True):
    raise _refuse(path, "ByteLevel pre_tokenizer with add_prefix_space true or use_regex false")


def _model(path: str, model) -> tuple[dict[str, int], list[tuple[str, str]]]:
  if not isinstance(model, dict) or model.get("type", "BPE") != "BPE" or "merges" not in model:
    kind = model.get("type") if isinstance(model, dict) else model
    raise _refuse(path, f"model type {kind!r}")
  for key in ("byte_fallback", "ignore_merges", "dropout", "continuing_subword_prefix",
              "end_of_word_suffix"):
    if model.get(key):
      raise _refuse(path, f"BPE model with {key} {model[key]!r}")
  vocab = model.get("vocab")
  if not isinstance(vocab, dict) or not all(
      isinstance(k, str) and type(v) is int and v >= 0  # pylint: disable=unidiomatic-typecheck
      for k, v in vocab.items()):
    raise VocabFileError(f"{path}: model.vocab is not an object of token -> id >= 0")
  merges = []
  for rank, m in enumerate(model["merges"]):
    pair = m.split(" ") if isinstance(m, str) else m
    if not isinstance(pair, list) or len(pair) != 2 or not all(
        isinstance(p, str) and p for p in pair):
      raise VocabFileError(f"{path}: model.merges[{rank}] is not a pair of tokens: {m!r}")
    merges.append((pair[0], pair[1]))
  return dict(vocab), merges


def _added(path: str, entries) -> tuple[AddedToken, ...]:
  tokens = []
  for e in entries or []:
    if not isinstance(e, dict) or not isinstance(e.get("content"), str) or not e["content"] \
        or type(e.get("id")) is not int:  # pylint: disable=unidiomatic-typecheck
      raise VocabFileError(f"{path}: added_tokens entry {e!r} has no content and id")
    if e.get("single_word"):
      raise _refuse(path, f"added token {e['content']!r} with single_word true")
    tokens.append(AddedToken(e["content"], e["id"], bool(e.get("special")),
                             bool(e.get("normalized", not e.get("special"))),
                             bool(e.get("lstrip")), bool(e.get("rstrip"))))
  return tuple(tokens)


def _template_part(path: str, item, ids_of) -> tuple[str, tuple[int, ...]]:
  if "Sequence" in item:
    return item["Sequence"]["id"], ()
  if "SpecialToken" in item:
    return "", tuple(ids_of(item["SpecialToken"]["id"]))
  raise _refuse(path, f"template item {item!r}")


def _template_from_items(path: str, spec) -> Template:
  specials = spec.get("special_tokens", {})

  def ids_of(name):
    if name not in specials:
      raise VocabFileError(f"{path}: template names {name!r}, not in its special_tokens")
    return specials[name]["ids"]

  def layout(items, names):
    parts, order = [()], []
    for item in items:
      name, ids = _template_part(path, item, ids_of)
      if name:
        order.append(name)
        parts.append(())
      else:
        parts[-1] += ids
    if order != names:
      raise _refuse(path, f"template with sequences {order} (expected {names})")
    return parts

  prefix, suffix = layout(spec["single"], ["A"])
  pair = layout(spec["pair"], ["A", "B"]) if spec.get("pair") else None
  if pair and (pair[0] != prefix or pair[2] != suffix):
    raise _refuse(path, "pair template whose ends differ from the single one")
  return Template(prefix, suffix, pair[1] if pair else None)


def _template(path: str, spec) -> Template:
  kind = spec.get("type") if spec else None
  if kind == "Sequence":
    steps = [s for s in spec.get("processors", []) if s.get("type") != "ByteLevel"]
    if len(steps) > 1:
      raise _refuse(path, "post_processor Sequence of several templates")
    return _template(path, steps[0] if steps else None)
  if kind in (None, "ByteLevel"):
    return Template()
  if kind == "TemplateProcessing":
    return _template_from_items(path, spec)
  if kind in ("RobertaProcessing", "BertProcessing"):
    (_, sep), (_, cls) = spec["sep"], spec["cls"]
    return Template((cls,), (sep,), (sep, sep) if kind == "RobertaProcessing" else (sep,))
  raise _refuse(path, f"post_processor {kind!r}")


def parse(text: str, path: str = TOKENIZER_JSON_FILE) -> TokenizerSpec:
  """A tokenizer.json's text -> TokenizerSpec; VocabFileError naming `path` if unsupported."""
  try:
    spec = json.loads(text)
  except json.JSONDecodeError as e:
    raise VocabFileError(f"cannot read {path}: {e}") from e
  if not isinstance(spec, dict) or "model" not in spec:
    raise VocabFileError(f"{path} is not a tokenizer.json (no \"model\")")
  nfc = _normalizer(path, spec.get("normalizer"))
  _pre_tokenizer(path, spec.get("pre_tokenizer"))
  decoder = spec.get("decoder")
  if decoder is not None and decoder.get("type") != "ByteLevel":
    raise _refuse(path, f"decoder {decoder.get('type')!r}")
  vocab, merges = _model(path, spec["model"])
  added = _added(path, spec.get("added_tokens"))
  for t in added:
    vocab[t.content] = t.id
  if len(set(vocab.values())) != len(vocab):
    raise VocabFileError(f"{path} gives two tokens the same id")
  return TokenizerSpec(path, vocab, merges, added, nfc,
                       _template(path, spec.get("post_processor")))


def path_in(directory: str) -> str:
  """The tokenizer.json path inside `directory`."""
  return files.join(directory, TOKENIZER_JSON_FILE)


def read(path: str) -> TokenizerSpec:
  """Reads a tokenizer.json (a path or URL); VocabFileError naming it if it cannot be used."""
  try:
    text = files.read_bytes(path).decode("utf-8")
  except Exception as e:
    if not (_read_error(e) or isinstance(e, UnicodeDecodeError)):
      raise
    raise VocabFileError(f"cannot read {path!r}: {e}") from e
  return parse(text, path)
