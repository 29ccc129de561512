"""SQuAD v1.1 / v2.0 for extractive QA: reading, doc-stride features, n-best span decoding.

Feature layout (one per window of the context):
  <s> question </s></s> context[window_start : window_start + window_len] </s>
The question keeps its first `max_query_len` tokens; a window holds up to
W = max_seq_len - len(question) - 4 context tokens and windows start every min(doc_stride, W)
tokens until one reaches the end (BERT's run_squad). The label of a window is the answer's
(start, end) token positions in the feature, or (0, 0) -- the `<s>` position, "no answer" --
when the question is unanswerable (v2) or the answer is not wholly inside the window.

Token -> text: byte-level BPE tokens are byte strings, so a token's byte length comes from the
vocabulary and their running sum gives each token's byte span in the UTF-8 context (a literal
`<mask>` absorbs the whitespace before it: those contexts take a slower aligning walk). A
predicted span is mapped to whole characters, the whitespace at its ends (the leading space
GPT-2 tokens carry) is dropped, and the text is a slice of the original context.

Decoding a question: every feature's spans (start <= end, at most `max_answer_len` tokens,
inside the window, starting at a token whose "max context" window this is -- the window where
it has the most context on both sides, the first on a tie) score start_logit + end_logit; the
n-best come from all windows. v2 decides "no answer" one of two ways:
- BERT's null span: the no-answer score is the lowest `<s>` start+end score over the windows,
  and "" is predicted when it beats the best span's by more than the threshold;
- the paper's answerability classifier (RoBERTa, Sec. 5.2; `answerable_logits`, one logit per
  window from the `<s>` vector, trained jointly): the no-answer score is minus the highest
  window logit (the window most sure to hold the answer decides), and "" is predicted when it
  exceeds the threshold (0: the classifier's probability of an answer is below 1/2).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable, Sequence

import numpy as np
import tensorflow as tf

from roberta_tf.common import atomic_write, files
from roberta_tf.tokenization import tokenizer as tokenizer_lib

STRIP = " \t\n\r\f\v"  # tf.strings.strip's (ASCII) whitespace: the SavedModel strips the same


class SquadError(ValueError):
  """Unusable SQuAD data or settings; the message names the file, question or flag."""


@dataclasses.dataclass(frozen=True)
class SquadExample:
  """A question on a context; `answers` are (text, character start) pairs."""
  id: str
  question: str
  context: str
  answers: tuple[tuple[str, int], ...]
  is_impossible: bool


def _line_of(raw: str, qid: str) -> int | None:
  """The line of `raw` (the JSON text) where question `qid`'s "id" is, or None."""
  m = re.search(r'"id"\s*:\s*' + re.escape(json.dumps(qid)), raw)
  return raw.count("\n", 0, m.start()) + 1 if m else None


def read_squad(path: str, require_answers: bool = True, skip_bad: bool = False,
               on_skip: Callable[[str], None] | None = None) -> tuple[list[SquadExample], bool]:
  """Reads a SQuAD JSON file; returns (examples, is_v2). v2 = some question has `is_impossible`.

  Every answer's text must be at its `answer_start` in the context (else it would train the
  span of other text). With `skip_bad` such an answer is dropped instead (`on_skip` gets the
  message), and a question left without answers is dropped with it.

  Raises:
    SquadError: not SQuAD's {"data": [{"paragraphs": [{"context", "qas": [...]}]}]} layout, an
      answer whose `answer_start` is outside its context or (unless skip_bad) does not point at
      its text (the message names the file, line and question id), or (require_answers) an
      answerable question without answers.
  """
  try:
    raw = files.read_text(path)
    data = json.loads(raw)
  except (OSError, tf.errors.OpError, json.JSONDecodeError, UnicodeDecodeError) as e:
    raise SquadError(f"{path}: cannot read SQuAD JSON: {e}") from e
  if not isinstance(data, dict) or not isinstance(data.get("data"), list):
    raise SquadError(f"{path}: expected SQuAD's {{\"data\": [...]}} layout")
  examples, v2 = [], False
  for article in data["data"]:
    for paragraph in article.get("paragraphs", []):
      context = paragraph.get("context")
      if not isinstance(context, str):
        raise SquadError(f"{path}: a paragraph has no 'context' text")
      for qa in paragraph.get("qas", []):
        qid, question = str(qa.get("id")), qa.get("question")
        where = lambda qid=qid: f"{path}:{_line_of(raw, qid) or '?'}: question {qid}"
        if not isinstance(question, str):
          raise SquadError(f"{where()} has no 'question' text")
        impossible = bool(qa.get("is_impossible", False))
        v2 = v2 or "is_impossible" in qa
        answers, dropped = [], 0
        for a in qa.get("answers", []):
          text, start = a.get("text"), a.get("answer_start")
          if not isinstance(text, str) or not isinstance(start, int) or not (
              0 <= start <= len(context) - len(text)):
            raise SquadError(f"{where()}: answer {a!r} does not fit its context "
                             f"({len(context)} characters)")
          if context[start:start + len(text)] != text:
            found = context.find(text)
            message = (f"{where()}: answer {text!r} is not at answer_start {start} (the context "
                       f"reads {context[start:start + len(text)]!r} there"
                       + (f"; the text occurs at {found}" if found >= 0 else "") + ")")
            if not skip_bad:
              raise SquadError(f"{message}: fix answer_start, or pass --skip_bad_examples to "
                               "skip such answers")
            dropped += 1
            if on_skip is not None:
              on_skip(message)
            continue
          answers.append((text, start))
        if dropped and not answers and not impossible:
          continue  # every answer was bad: the question goes too (skip_bad)
        if require_answers and not impossible and not answers:
          raise SquadError(f"{where()} is answerable but has no answers")
        examples.append(SquadExample(qid, question, context, tuple(answers), impossible))
  if not examples:
    raise SquadError(f"{path}: no questions")
  return examples, v2


def token_byte_lengths(tokenizer) -> np.ndarray:
  """int32 [V]: the number of context bytes each token id stands for (0 for unused ids)."""
  to_byte = {c: b for b, c in tokenizer_lib.bytes_to_unicode().items()}
  lengths = np.zeros(tokenizer.vocab_size, np.int32)
  for token, i in tokenizer.get_vocabulary().items():
    byte_level = token not in tokenizer_lib.SPECIAL_TOKENS and all(c in to_byte for c in token)
    lengths[i] = len(token) if byte_level else len(token.encode("utf-8"))
  return lengths


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


def _tokenize(tokenizer, texts: Sequence[str], chunk: int = 256) -> list[np.ndarray]:
  out = []
  for i in range(0, len(texts), chunk):
    ragged = tokenizer(tf.constant(list(texts[i:i + chunk]), tf.string))
    values, splits = ragged.flat_values.numpy(), ragged.row_splits.numpy()
    out.extend(values[splits[j]:splits[j + 1]] for j in range(len(splits) - 1))
  return out


def featurize(examples: Sequence[SquadExample], tokenizer, *, max_seq_len: int,
              max_query_len: int, doc_stride: int, byte_lengths: np.ndarray | None = None
              ) -> tuple[SquadFeatures, list[TokenizedContext], int]:
  """Examples -> features (see the module docstring).

  Returns:
    (features, the tokenized context of each example, the number of answers that could not be
    located in their context's tokens -- their features are labelled "no answer").
  """
  if max_query_len < 1 or max_seq_len - max_query_len - 4 < 1:
    raise SquadError(f"--max_seq_len={max_seq_len} leaves no room for context after a question "
                     f"of --max_query_len={max_query_len} tokens and 4 special tokens")
  if doc_stride < 1:
    raise SquadError(f"--doc_stride must be >= 1, got {doc_stride}")
  byte_lengths = token_byte_lengths(tokenizer) if byte_lengths is None else byte_lengths
  unique = list(dict.fromkeys(e.context for e in examples))
  context_ids = dict(zip(unique, _tokenize(tokenizer, unique), strict=True))
  aligned = {c: align_tokens(c, context_ids[c], byte_lengths, tokenizer.mask_id) for c in unique}
  questions = _tokenize(tokenizer, [e.question for e in examples])
  bos, eos = tokenizer.bos_id, tokenizer.eos_id
  cols = {k: [] for k in ("input_ids", "example_index", "window_start", "window_len",
                          "context_offset", "max_context", "start_positions", "end_positions")}
  contexts, unlocated = [], 0
  for index, (example, question) in enumerate(zip(examples, questions, strict=True)):
    context = aligned[example.context]
    contexts.append(context)
    question = question[:max_query_len]
    window = max_seq_len - len(question) - 4
    answer_tokens = None
    if example.answers and not example.is_impossible:
      text, char_start = example.answers[0]
      first_byte = context.char_byte[char_start]
      end_byte = context.char_byte[char_start + len(text)]
      if end_byte > first_byte:
        first = int(np.searchsorted(context.byte_ends, first_byte, side="right"))
        last = int(np.searchsorted(context.byte_ends, end_byte - 1, side="right"))
        answer_tokens = (first, last) if last < len(context.ids) else None
      unlocated += answer_tokens is None
    num_tokens = len(context.ids)
    starts = window_starts(num_tokens, window, doc_stride)
    lengths = [min(num_tokens - s, window) for s in starts]
    offset = len(question) + 3
    for w, (start, length) in enumerate(zip(starts, lengths, strict=True)):
      ids = np.concatenate([[bos], question, [eos, eos], context.ids[start:start + length],
                            [eos]]).astype(np.int32)
      label = (0, 0)
      if answer_tokens and start <= answer_tokens[0] and answer_tokens[1] < start + length:
        label = (offset + answer_tokens[0] - start, offset + answer_tokens[1] - start)
      for key, value in (("input_ids", ids), ("example_index", index), ("window_start", start),
                         ("window_len", length), ("context_offset", offset),
                         ("max_context", max_context_mask(starts, lengths, w)),
                         ("start_positions", label[0]), ("end_positions", label[1])):
        cols[key].append(value)
  features = SquadFeatures(
      input_ids=cols["input_ids"], max_context=cols["max_context"],
      **{k: np.asarray(cols[k], np.int32) for k in cols if k not in ("input_ids", "max_context")})
  return features, contexts, unlocated


@dataclasses.dataclass(frozen=True)
class Candidate:
  text: str
  score: float
  start_char: int
  end_char: int


def best_spans(start_logits: np.ndarray, end_logits: np.ndarray, max_context: np.ndarray,
               max_answer_len: int, n: int) -> list[tuple[float, int, int]]:
  """The n best (score, first, last) spans of one window's context tokens.

  Args:
    start_logits, end_logits: float [window_len], the logits at the window's context tokens.
    max_context: bool [window_len] (spans must start at a max-context token).
  Returns:
    Up to n (start_logit + end_logit, first, last) with first <= last < first + max_answer_len,
    best first; indices are window-relative.
  """
  length = len(start_logits)
  if length == 0:
    return []
  scores = start_logits[:, None].astype(np.float64) + end_logits[None, :]
  i, j = np.meshgrid(np.arange(length), np.arange(length), indexing="ij")
  valid = (j >= i) & (j - i < max_answer_len) & max_context[:, None]
  flat = np.where(valid, scores, -np.inf).ravel()
  count = min(n, int(valid.sum()))
  if count == 0:
    return []
  top = np.argpartition(-flat, count - 1)[:count]
  top = top[np.lexsort((top, -flat[top]))]  # best first; ties: the earlier span
  return [(float(flat[t]), int(t // length), int(t % length)) for t in top]


def decode(examples: Sequence[SquadExample], features: SquadFeatures,
           contexts: Sequence[TokenizedContext], start_logits: Sequence[np.ndarray],
           end_logits: Sequence[np.ndarray], *, version_2: bool, n_best_size: int = 20,
           max_answer_len: int = 30, null_score_threshold: float = 0.0,
           answerable_logits: Sequence[float] | None = None
           ) -> tuple[dict[str, str], dict[str, list[Candidate]], dict[str, float]]:
  """Logits of every feature -> each question's answer (see the module docstring).

  Args:
    start_logits, end_logits: F float arrays (each at least the feature's length).
    answerable_logits: v2 with the answerability classifier: F floats (see the module
      docstring); None: BERT's null span score decides.
  Returns:
    (predictions: id -> answer text ("" for no answer), n-best: id -> Candidates best first
    (distinct texts), null scores: id -> the no-answer score).
  """
  by_example: dict[int, list[int]] = {}
  for f, e in enumerate(features.example_index):
    by_example.setdefault(int(e), []).append(f)
  predictions, nbest, null_scores = {}, {}, {}
  for e, example in enumerate(examples):
    candidates, null = [], np.inf
    for f in by_example.get(e, []):
      start, end = np.asarray(start_logits[f]), np.asarray(end_logits[f])
      null = min(null, float(start[0]) + float(end[0]) if answerable_logits is None
                 else -float(answerable_logits[f]))
      lo, n = int(features.context_offset[f]), int(features.window_len[f])
      for score, first, last in best_spans(start[lo:lo + n], end[lo:lo + n],
                                           features.max_context[f], max_answer_len, n_best_size):
        base = int(features.window_start[f])
        candidates.append((score, base + first, base + last))
    candidates.sort(key=lambda c: -c[0])
    seen, best = set(), []
    for score, first, last in candidates:
      s, t = contexts[e].char_span(first, last, example.context)
      text = example.context[s:t]
      if text not in seen:
        seen.add(text)
        best.append(Candidate(text, score, s, t))
      if len(best) == n_best_size:
        break
    nbest[example.id] = best
    null_scores[example.id] = null
    top_score = best[0].score if best else -np.inf
    margin = null - top_score if answerable_logits is None else null
    no_answer = not best or (version_2 and margin > null_score_threshold)
    predictions[example.id] = "" if no_answer else best[0].text
  return predictions, nbest, null_scores


def gold_answers(examples: Sequence[SquadExample]) -> dict[str, list[str]]:
  """id -> gold answer texts (empty for unanswerable questions), for squad_eval.evaluate."""
  return {e.id: [] if e.is_impossible else [a for a, _ in e.answers] for e in examples}


def write_predictions(model_dir: str, predictions: dict[str, str],
                      nbest: dict[str, list[Candidate]], null_scores: dict[str, float]) -> None:
  """predictions.json (id -> text, as the official scripts read) and nbest_predictions.json."""
  docs = {"predictions.json": predictions,
          "nbest_predictions.json": {
              qid: [{**dataclasses.asdict(c), "null_score": null_scores[qid]} for c in cands]
              for qid, cands in nbest.items()}}
  for name, doc in docs.items():
    atomic_write.write_json(files.join(model_dir, name), doc, indent=1, sort_keys=False,
                            ensure_ascii=False)
