"""Prints a SavedModel's top predictions for each <mask> in each text ([MASK] for a model of a
tokenizer.json vocabulary: the mask token is the vocabulary's, `mask_token`).

  python -m roberta_tf.fill_mask --saved_model=DIR "The capital of France is <mask>."
  python -m roberta_tf.fill_mask --saved_model=DIR --held_out=SHARD_DIR --vocab_dir=VOCAB_DIR

Needs only tensorflow and tensorflow_text (the tokenizer is inside the SavedModel). A text
longer than the model's limit is truncated by the SavedModel: the report says so, and names the
`<mask>`s that were cut off (they get no prediction). An argument that is not valid UTF-8 is
decoded with U+FFFD for the bad bytes (and says so); the other texts are unaffected.

With --held_out, masked words of a shard directory's held-out split (chosen by a fixed rule,
serving/held_out_ranks.py) are ranked by the model and by the unigram baseline, and the median
ranks printed: a model that uses context ranks the right word higher than the baseline does.
The shards, --vocab_dir and the SavedModel must be of one vocabulary (by content: the sha256 of
vocab.json and merges.txt; the SavedModel's as its export copied them into assets.extra/):
anything else is refused in one line naming both, since ranks over other ids mean nothing.
"""

from __future__ import annotations

import dataclasses
import re

from absl import app

from roberta_tf.common import cli, files, options
from roberta_tf.common.options import NON_NEGATIVE, POSITIVE, option
from roberta_tf.serving import frozen_weights, saved_model_reader


@dataclasses.dataclass(frozen=True)
class FillMaskSettings:
  """fill_mask's flags."""
  saved_model: str = option(
      help="Directory written by roberta_tf.export (a path or a URL such as "
      "gs://bucket/export).", path=True)
  held_out: str | None = option(
      None, "Also rank masked words of this shard directory's held-out (validation) split: "
      "examples chosen by a fixed rule, each word's rank under the model beside its rank under "
      "the unigram baseline (serving/held_out_ranks.py). Needs --vocab_dir.", path=True)
  vocab_dir: str | None = option(
      None, "--held_out: the vocab.json the shards were encoded with (to print the examples as "
      "text).", path=True)
  examples: int = option(8, "--held_out: examples printed.", check=NON_NEGATIVE)
  rank_sample: int = option(
      200, "--held_out: held-out sequences ranked (one masked word each) for the median ranks.",
      check=POSITIVE)


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(FillMaskSettings, FLAGS)

MASK = "<mask>"  # RoBERTa's; exports of other vocabularies name theirs (`mask_token`)
# Places where the SavedModel's tokenizer (GPT-2's pre-tokenizer, a left-to-right regex without
# look-behind) always ends a token: where a whitespace run follows a non-space. Token counts of
# pieces cut there add up to the whole text's.
_CUT = re.compile(r"(?<=\S)(?=\s)")


def decode_argument(arg: str) -> tuple[str, int]:
  """A command-line argument as text: (text, number of invalid UTF-8 bytes replaced by U+FFFD).

  Python hands undecodable argv bytes over as lone surrogates (PEP 383); they are turned back
  into the bytes and decoded with replacement.
  """
  raw = arg.encode("utf-8", "surrogateescape")
  text = raw.decode("utf-8", "replace")
  return text, text.count("\ufffd") - raw.count("\ufffd".encode("utf-8"))


def _pieces(text: str, max_bytes: int) -> list[str]:
  """`text` cut at `_CUT` places into pieces of at most `max_bytes` UTF-8 bytes where it can be
  (a piece without a cut place may be longer)."""
  pieces, start, last = [], 0, 0
  for m in _CUT.finditer(text):
    if len(text[start:m.start()].encode("utf-8")) > max_bytes and last > start:
      pieces.append(text[start:last])
      start = last
    last = m.start()
  if len(text[start:].encode("utf-8")) > max_bytes and last > start:
    pieces.append(text[start:last])
    start = last
  pieces.append(text[start:])
  return pieces


def token_counts(tokenize, texts: list[str]) -> tuple[list[tuple[int, bool]], int]:
  """([(tokens of each text before truncation, whether that is a lower bound)], the model's
  limit of text tokens).

  `tokenize` is the SavedModel's `tokenize` signature, which truncates. The limit is read off a
  text that exceeds it; a text that reaches it is counted again in pieces short enough not to
  be truncated, so "reaches the limit" and "was cut" are told apart exactly (a lower bound only
  for a piece without a cut place that still reaches the limit: one enormous word).
  """
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  def count(batch):
    out = tokenize(text=tf.constant(batch))
    return np.asarray(out["padding_mask"]).sum(axis=1) - 2

  limit = token_limit(tokenize)
  result = []
  for text, n in zip(texts, count(texts), strict=True):
    if n < limit:
      result.append((int(n), False))
      continue
    piece_counts = count(_pieces(text, limit))  # <= limit bytes: <= limit tokens, not cut
    result.append((int(piece_counts.sum()), bool((piece_counts >= limit).any())))
  return result, limit


def token_limit(tokenize) -> int:
  """The most text tokens the SavedModel reads (its `tokenize` signature truncates there): its
  max_seq_len less `<s>` and `</s>`."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  out = tokenize(text=tf.constant(["a " * 20_000]))  # 20,000 words: more than any model reads
  return int(np.asarray(out["padding_mask"]).sum()) - 2


def fitted(examples, reads: int) -> tuple[list, int]:
  """(`examples` (held_out_ranks.Example), each `<s> left <mask> right </s>` longer than the
  `reads` tokens the SavedModel reads cut to fit, the longer side's farthest tokens first; how
  many were cut). Shards of longer sequences than the model's give such windows: their
  positions past its table would fail inside the graph."""
  import dataclasses  # pylint: disable=import-outside-toplevel
  out, cut = [], 0
  for example in examples:
    left, right = list(example.left), list(example.right)
    while len(left) + len(right) + 3 > reads and (left or right):
      if len(left) >= len(right):
        left.pop(0)
      else:
        right.pop()
    if len(left) + len(right) < len(example.left) + len(example.right):
      example, cut = dataclasses.replace(example, left=tuple(left), right=tuple(right)), cut + 1
    out.append(example)
  return out, cut


def mask_token(saved_model: str) -> str:
  """The mask token of the vocabulary an export recorded in assets.extra/ (`<mask>`, `[MASK]`);
  MASK for an export that records none (an older one)."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf.serving.saved_model_writer import EXTRA_DIR
  from roberta_tf.tokenization import tokenizer_json, vocabulary
  recorded = files.join(saved_model, EXTRA_DIR)
  if not vocabulary.is_vocab_dir(recorded):
    return MASK
  found = vocabulary.Vocabulary.of_dir(recorded)
  if found.kind != vocabulary.TOKENIZER_JSON:
    return MASK
  tokens = {i: t for t, i in tokenizer_json.read(tokenizer_json.path_in(recorded)).vocab.items()}
  return tokens[found.mask_id]


def format_predictions(texts, out, notes=None, mask: str = MASK) -> str:
  """Human-readable lines for fill_mask's outputs (numpy arrays). `notes[i]`: lines to add
  under text i (truncation, replaced bytes); `mask`: the vocabulary's mask token."""
  lines = []
  for i, text in enumerate(texts):
    lines.append(text)
    lines.extend(f"  ({note})" for note in (notes or {}).get(i, []))
    if out["num_masks"][i] == 0 and mask not in text:
      lines.append(f"  (no {mask} in this text)")
    for m in range(int(out["num_masks"][i])):
      preds = ", ".join(
          f"{out['top_tokens'][i, m, j].decode('utf-8', 'replace')!r} "
          f"{out['top_probs'][i, m, j]:.3f}" for j in range(out["top_ids"].shape[-1]))
      lines.append(f"  {mask} #{m + 1}: {preds}")
  return "\n".join(lines)


def truncation_notes(texts, num_masks, counts, limit, mask: str = MASK) -> dict[int, list[str]]:
  """Notes for the texts the SavedModel truncated (`counts` from `token_counts`): how much was
  cut, and which masks (`mask`: the vocabulary's mask token)."""
  notes = {}
  for i, (text, masks, (n, lower_bound)) in enumerate(zip(texts, num_masks, counts, strict=True)):
    if n < limit or (n == limit and not lower_bound):
      continue
    note = (f"truncated: {'at least ' if lower_bound else ''}{n} tokens, the model reads the "
            f"first {limit}")
    cut = text.count(mask) - int(masks)
    if cut > 0:
      note += (f"; {cut} of its {text.count(mask)} {mask}s came after that and "
               f"{'were' if cut > 1 else 'was'} not predicted")
    notes[i] = [note]
  return notes


def _load(saved_model: str):
  """The SavedModel at `saved_model`, with its fill_mask signature checked."""
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  return saved_model_reader.load(saved_model, ("fill_mask",),
                                 "the directory roberta_tf.export wrote")


def _fill(loaded, args, mask: str = MASK) -> str:
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  texts, notes = [], {}
  for i, arg in enumerate(args):
    text, replaced = decode_argument(arg)
    texts.append(text)
    if replaced:
      notes[i] = [f"not valid UTF-8: {replaced} byte{'s' if replaced > 1 else ''} replaced by "
                  "U+FFFD"]
  out = {k: v.numpy() for k, v in loaded.signatures["fill_mask"](text=tf.constant(texts)).items()}
  if "tokenize" in loaded.signatures:
    counts, limit = token_counts(loaded.signatures["tokenize"], texts)
    for i, lines in truncation_notes(texts, out["num_masks"], counts, limit, mask).items():
      notes.setdefault(i, []).extend(lines)
  return format_predictions(texts, out, notes, mask)


def check_vocabularies(loaded, saved_model: str, data_dir: str, vocab_dir: str) -> str:
  """Refuses --vocab_dir or a SavedModel of another vocabulary than the --held_out shards'
  (vocab_growth.VocabGrowthError, one line naming both); returns a warning when the SavedModel
  records no vocabulary (an older export: only its size can be checked) and one when an older
  record was compared by vocab.json alone (vocab_files.unchecked_warning: said once), one line
  each, else ""."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.data import dataset_info, vocab_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.serving.saved_model_writer import EXTRA_DIR  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization import vocab_growth  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization.vocab_files import VocabId  # pylint: disable=import-outside-toplevel
  shards, shards_dir = vocab_info.shards_vocabulary(data_dir, dataset_info.read(data_dir))
  hint = ("rank shards encoded with the model's vocabulary, and pass that vocabulary as "
          "--vocab_dir")
  partial = []  # the same older record met twice: said once
  vocab_growth.check(VocabId.of_dir(vocab_dir), shards, model_side=("--vocab_dir", vocab_dir),
                     other_side=("--held_out", data_dir), model_dir=vocab_dir,
                     other_dir=shards_dir, grow=False, hint=hint, warn=partial.append)
  recorded_dir = files.join(saved_model, EXTRA_DIR)
  recorded = VocabId.of_dir(recorded_dir)
  if recorded is not None:
    vocab_growth.check(recorded, shards, model_side=("--saved_model", saved_model),
                       other_side=("--held_out", data_dir), model_dir=recorded_dir,
                       other_dir=shards_dir or vocab_dir, grow=False, hint=hint,
                       warn=partial.append)
    return partial[0] if partial else ""
  logits = loaded.signatures["mlm_logits"](input_ids=tf.constant([[0, 2]]),
                                           padding_mask=tf.constant([[1, 1]]))["logits"]
  size = int(np.shape(logits)[-1])
  if size != shards.size:
    raise vocab_growth.VocabGrowthError(
        f"--held_out={data_dir!r} is of another vocabulary ({shards.describe()}) than "
        f"--saved_model={saved_model!r} ({size} ids): {hint}")
  return "\n".join(partial[:1] + [
      f"warning: --saved_model={saved_model} records no vocabulary (no {EXTRA_DIR}/vocab.json: "
      f"an older export), so only its size ({size} ids) is checked against --held_out's; the "
      f"ranks assume it was trained on {data_dir}'s"])


def _held_out(loaded, saved_model: str, data_dir: str, vocab_dir: str, shown: int,
              sample: int) -> str:
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.serving import held_out_ranks  # pylint: disable=import-outside-toplevel
  warning = check_vocabularies(loaded, saved_model, data_dir, vocab_dir)
  if warning:
    print(warning, flush=True)
  # The vocabularies were compared above (a partial comparison said so already).
  examples, counts, special, decode = held_out_ranks.read_held_out(
      data_dir, vocab_dir, sample, warn=lambda line: None)
  if not examples:
    raise ValueError(f"--held_out={data_dir}: its validation split has no sequence with a "
                     "whole word in its middle half to mask")
  if "tokenize" in loaded.signatures:  # an older export without it: windows as they are
    reads = token_limit(loaded.signatures["tokenize"]) + 2
    examples, cut = fitted(examples, reads)
    if cut:
      print(f"note: --saved_model={saved_model} reads {reads} tokens: the context of {cut} of "
            f"the {len(examples)} --held_out examples was cut to fit", flush=True)
  signature = loaded.signatures["mlm_logits"]

  def mlm_logits(input_ids, padding_mask):
    return signature(input_ids=tf.constant(input_ids),
                     padding_mask=tf.constant(padding_mask))["logits"].numpy()
  ranked = held_out_ranks.rank_examples(examples, mlm_logits, counts, special)
  return held_out_ranks.format_ranked(ranked, decode, shown)


def main(argv):
  frozen_weights.serve_only()  # this process only serves: oneDNN may keep packed weights
  args = argv[1:]
  s = options.from_flags(FillMaskSettings, FLAGS)
  if not args and not s.held_out:
    raise app.UsageError('give one or more texts, e.g. "The capital of France is <mask>.", '
                         "or --held_out=SHARD_DIR")
  if s.held_out and not s.vocab_dir:
    raise app.UsageError("--held_out needs --vocab_dir (the vocab the shards were encoded with)")
  loaded = _load(s.saved_model)
  if args:
    print(_fill(loaded, args, mask_token(s.saved_model)))
  if s.held_out:
    print(_held_out(loaded, s.saved_model, s.held_out, s.vocab_dir, s.examples, s.rank_sample),
          flush=True)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
