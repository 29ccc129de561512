"""SQuAD examples as model inputs: doc-stride windows, and where each token is in the text.

Feature layout (one per window of the context): the vocabulary's pair template (the tokenizer's
`template`) around the question and a window of the context, with RoBERTa's files
  <s> question </s></s> context[window_start : window_start + window_len] </s>
and with a tokenizer.json's BERT-style template [CLS] question [SEP] context [SEP].
The question keeps its first `max_query_len` tokens; a window holds up to
W = max_seq_len - len(question) - (the template's pair specials: 4, or 3) context tokens and
windows start every min(doc_stride, W) tokens until one reaches the end (BERT's run_squad). The
label of a window is the answer's (start, end) token positions in the feature, or (0, 0) -- the
`<s>` / `[CLS]` position, "no answer" -- when the question is unanswerable (v2) or the answer
is not wholly inside the window.

Token -> text: byte-level BPE tokens are byte strings, so a token's byte length comes from the
vocabulary (`tokenizer.token_byte_lengths`) and their running sum gives each token's byte span
in the UTF-8 context (a literal `<mask>` absorbs the whitespace before it: those contexts take a
slower aligning walk). A predicted span is mapped to whole characters, the whitespace at its
ends (the leading space GPT-2 tokens carry) is dropped, and the text is a slice of the original
context (`TokenizedContext.char_span`, which decode.py uses).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from roberta_tf.finetuning import featurize as featurize_lib
from roberta_tf.finetuning.squad.read import SquadError, SquadExample
from roberta_tf.tokenization import tokenizer as tokenizer_lib
from roberta_tf.tokenization.tokenizer_json import Template

STRIP = " \t\n\r\f\v"  # tf.strings.strip's (ASCII) whitespace: the SavedModel strips the same
_COLUMNS = ("input_ids", "example_index", "window_start", "window_len", "context_offset",
            "max_context", "start_positions", "end_positions")


@dataclasses.dataclass
class TokenizedContext:
  """A context's tokens and where they are: ids int32 [T]; byte_starts/byte_ends int64 [T]
  (token k is bytes [starts[k], ends[k]) of the UTF-8 context); char_of_byte int64 [n_bytes]
  (the character each byte belongs to); char_byte int64 [n_chars + 1] (each character's first
  byte, then n_bytes)."""
  ids: np.ndarray
  byte_starts: np.ndarray
  byte_ends: np.ndarray
  char_of_byte: np.ndarray
  char_byte: np.ndarray

  def char_span(self, first: int, last: int, text: str) -> tuple[int, int]:
    """Tokens first..last (inclusive) -> the (start, end) character span they cover, whole
    characters, without whitespace at either end."""
    start = int(self.char_of_byte[self.byte_starts[first]])
    end = int(self.char_of_byte[self.byte_ends[last] - 1]) + 1
    while start < end and text[start] in STRIP:
      start += 1
    while end > start and text[end - 1] in STRIP:
      end -= 1
    return start, end


def align_tokens(text: str, ids: np.ndarray, byte_lengths: np.ndarray,
                 mask_id: int) -> TokenizedContext:
  """The byte and character offsets of `text`'s tokens `ids` (see the module docstring)."""
  raw = text.encode("utf-8")
  lengths = byte_lengths[ids].astype(np.int64)
  ends = np.cumsum(lengths)
  if ends.size and ends[-1] != len(raw):  # a <mask> ate whitespace: walk and skip it
    mask = tokenizer_lib.MASK.encode("utf-8")
    cursor, starts = 0, []
    for i, n in zip(ids, lengths, strict=True):
      if i == mask_id:
        while cursor < len(raw) and not raw.startswith(mask, cursor):
          cursor += 1
      starts.append(cursor)
      cursor += int(n)
    ends = np.asarray(starts, np.int64) + lengths
    if ends[-1] != len(raw):
      raise SquadError(f"cannot align the tokens of a context with its text: {text[:80]!r}...")
  starts = ends - lengths
  buffer = np.frombuffer(raw, np.uint8)
  is_first = (buffer & 0xC0) != 0x80  # not a UTF-8 continuation byte
  char_byte = np.concatenate([np.flatnonzero(is_first), [len(raw)]]).astype(np.int64)
  return TokenizedContext(ids.astype(np.int32), starts, ends, np.cumsum(is_first) - 1, char_byte)


def window_starts(num_tokens: int, window: int, stride: int) -> list[int]:
  """Where the context windows start (BERT's doc stride): 0, s, 2s, ... until one reaches the
  end; s = min(stride, window). An empty context still gets one (empty) window."""
  stride = min(stride, window)
  starts = [0]
  while starts[-1] + window < num_tokens:
    starts.append(starts[-1] + stride)
  return starts


def max_context_mask(starts: Sequence[int], lengths: Sequence[int], index: int) -> np.ndarray:
  """bool [lengths[index]]: whether window `index` is each of its tokens' max-context window.

  A token's score in a window is min(tokens left of it, tokens right of it) + 0.01 * length
  (BERT's; here times 100, in integers, so that no float rounding can break a tie differently in
  the SavedModel); the best-scoring window containing it (the first on a tie) is its
  max-context window.
  """
  start, length = starts[index], lengths[index]
  positions = np.arange(start, start + length)
  best_score = np.full(length, -1)
  best_window = np.full(length, -1)
  for w, (s, n) in enumerate(zip(starts, lengths, strict=True)):
    inside = (positions >= s) & (positions < s + n)
    k = positions - s
    score = 100 * np.minimum(k, n - 1 - k) + n
    better = inside & (score > best_score)
    best_score = np.where(better, score, best_score)
    best_window = np.where(better, w, best_window)
  return best_window == index


@dataclasses.dataclass
class SquadFeatures:
  """Model inputs and the bookkeeping to map predictions back (F features).

  input_ids: F int32 arrays (unpadded); example_index/window_start/window_len/context_offset:
  int [F] (context_offset = the feature position of the window's first token);
  max_context: F bool arrays [window_len]; start_positions/end_positions: int32 [F] labels.
  """
  input_ids: list[np.ndarray]
  example_index: np.ndarray
  window_start: np.ndarray
  window_len: np.ndarray
  context_offset: np.ndarray
  max_context: list[np.ndarray]
  start_positions: np.ndarray
  end_positions: np.ndarray


def _token_arrays(tokenizer, texts: Sequence[str]) -> list[np.ndarray]:
  """Each text's token ids, one numpy array a text."""
  ragged = featurize_lib.tokenize(tokenizer, texts)
  values, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
  return [values[splits[j]:splits[j + 1]] for j in range(len(splits) - 1)]


def featurize(examples: Sequence[SquadExample], tokenizer, *, max_seq_len: int,
              max_query_len: int, doc_stride: int, byte_lengths: np.ndarray | None = None
              ) -> tuple[SquadFeatures, list[TokenizedContext], int]:
  """Examples -> features (see the module docstring).

  Returns:
    (features, the tokenized context of each example, the number of answers that could not be
    located in their context's tokens -- their features are labelled "no answer").
  """
  template = tokenizer.template
  if template.middle is None:
    raise SquadError("the vocabulary has no pair template: extractive QA needs one")
  specials = template.pair_specials
  if max_query_len < 1 or max_seq_len - max_query_len - specials < 1:
    raise SquadError(f"--max_seq_len={max_seq_len} leaves no room for context after a question "
                     f"of --max_query_len={max_query_len} tokens and {specials} special tokens")
  if doc_stride < 1:
    raise SquadError(f"--doc_stride must be >= 1, got {doc_stride}")
  if byte_lengths is None:
    byte_lengths = tokenizer_lib.token_byte_lengths(tokenizer.get_vocabulary())
  unique = list(dict.fromkeys(e.context for e in examples))
  context_ids = dict(zip(unique, _token_arrays(tokenizer, unique), strict=True))
  aligned = {c: align_tokens(c, context_ids[c], byte_lengths, tokenizer.mask_id) for c in unique}
  questions = _token_arrays(tokenizer, [e.question for e in examples])
  cols = {k: [] for k in _COLUMNS}
  contexts, unlocated = [], 0
  for index, (example, question) in enumerate(zip(examples, questions, strict=True)):
    context = aligned[example.context]
    contexts.append(context)
    answer_tokens = None
    if example.answers and not example.is_impossible:
      answer_tokens = _answer_tokens(context, *example.answers[0])
      unlocated += answer_tokens is None
    _add_windows(cols, index, question[:max_query_len], context, answer_tokens,
                 max_seq_len=max_seq_len, doc_stride=doc_stride, template=template)
  features = SquadFeatures(
      input_ids=cols["input_ids"], max_context=cols["max_context"],
      **{k: np.asarray(cols[k], np.int32) for k in cols if k not in ("input_ids", "max_context")})
  return features, contexts, unlocated


def _answer_tokens(context: TokenizedContext, text: str,
                   char_start: int) -> tuple[int, int] | None:
  """The first and last token (inclusive) of the answer `text` at `char_start`; None when it
  covers no bytes or runs past the last token."""
  first_byte = context.char_byte[char_start]
  end_byte = context.char_byte[char_start + len(text)]
  if end_byte <= first_byte:
    return None
  first = int(np.searchsorted(context.byte_ends, first_byte, side="right"))
  last = int(np.searchsorted(context.byte_ends, end_byte - 1, side="right"))
  return (first, last) if last < len(context.ids) else None


def _add_windows(cols: dict[str, list], index: int, question: np.ndarray,
                 context: TokenizedContext, answer_tokens: tuple[int, int] | None, *,
                 max_seq_len: int, doc_stride: int, template: Template) -> None:
  """Appends example `index`'s features (one per window of its context) to `cols`."""
  window = max_seq_len - len(question) - template.pair_specials
  num_tokens = len(context.ids)
  starts = window_starts(num_tokens, window, doc_stride)
  lengths = [min(num_tokens - s, window) for s in starts]
  offset = len(template.prefix) + len(question) + len(template.middle)
  for w, (start, length) in enumerate(zip(starts, lengths, strict=True)):
    ids = np.concatenate([np.asarray(part, np.int32) for part in (
        template.prefix, question, template.middle, context.ids[start:start + length],
        template.suffix)])
    label = (0, 0)
    if answer_tokens and start <= answer_tokens[0] and answer_tokens[1] < start + length:
      label = (offset + answer_tokens[0] - start, offset + answer_tokens[1] - start)
    for key, value in (("input_ids", ids), ("example_index", index), ("window_start", start),
                       ("window_len", length), ("context_offset", offset),
                       ("max_context", max_context_mask(starts, lengths, w)),
                       ("start_positions", label[0]), ("end_positions", label[1])):
      cols[key].append(value)
