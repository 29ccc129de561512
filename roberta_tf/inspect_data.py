r"""Shows what the model will see: decoded masked sequences and masking statistics.

    python -m roberta_tf.inspect_data --data=shards/ [--split=train] [--num_batches=10] \
        [--batch_size=8] [--seed=0] [--max_seq_len=N] [--whole_word] [--json] [--vocab_dir=DIR]

The batches come from the training pipeline itself (roberta_tf/data/pipeline.py), so the
statistics are those of training: the selection rate over maskable tokens, the
`<mask>`/random/unchanged split of the selected ones, tokens per sequence, padding fraction.
Text is decoded from vocab.json's byte-level pieces (--vocab_dir, else the vocab.json the shards
were encoded with: the copy beside them or data_prep's recorded vocab_dir, same sha256);
special tokens are shown literally, so `<mask>` reads as `<mask>`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from absl import app

from roberta_tf.common import cli, files, options
from roberta_tf.common.options import POSITIVE, option
from roberta_tf.data import dataset_info
from roberta_tf.data.vocab_info import VocabInfo, find_vocab_dir
from roberta_tf.tokenization import tokenizer_json, vocab_files, vocabulary
from roberta_tf.tokenization.vocab_files import VOCAB_FILE

# The masking, the input pipeline and the tokenizer's tables import TensorFlow: imported where
# they are used, so that importing this binary does not (common/cli.py's `run` quiets
# TensorFlow's start-up before `main` imports it).
if TYPE_CHECKING:
  from roberta_tf.data.masking import MaskingConfig


class Decoder:
  """ids → text; special ids are written as their token strings (`<mask>`, `</s>`, `[SEP]`...).

  Byte-level BPE decodes by concatenating each id's bytes (`tokenizer.token_bytes_table`, the
  table `BytePairTokenizer.detokenize` uses), so the pieces of vocab.json (or of tokenizer.json:
  its model's and added tokens) suffice: no tokenizer tables to build.
  """

  def __init__(self, vocab_dir: str, special_ids: dict[str, int]):
    # pylint: disable=import-outside-toplevel
    from roberta_tf.tokenization.tokenizer import token_bytes_table
    kind = vocabulary.Vocabulary.of_dir(vocab_dir).kind
    if kind == vocabulary.TOKENIZER_JSON:
      self.name = tokenizer_json.path_in(vocab_dir)
      vocab = tokenizer_json.read(self.name).vocab
    else:
      self.name = files.join(vocab_dir, VOCAB_FILE)
      vocab = vocab_files.read_vocab(self.name, dense=True)
    self.pieces = {i: p for p, i in vocab.items()}
    self.special = {i: self.pieces[i] for i in special_ids.values()}
    self._bytes = token_bytes_table(vocab)

  def _decode_run(self, ids: list[int]) -> str:
    return b"".join(self._bytes[i] for i in ids).decode("utf-8", "replace")

  def decode(self, ids: Sequence[int]) -> str:
    """Runs of ordinary ids are decoded together; special ids are inserted literally."""
    out, run = [], []
    for i in ids:
      if i in self.special:
        if run:
          out.append(self._decode_run(run))
          run = []
        out.append(self.special[i])
      else:
        run.append(int(i))
    if run:
      out.append(self._decode_run(run))
    return "".join(out)

  def piece(self, i: int) -> str:
    return self.pieces.get(int(i), f"<id {int(i)}>")


def inspect_data(data_dir: str, *, split: str = "train", num_batches: int = 10,
                 batch_size: int = 8, seed: int = 0, max_seq_len: int | None = None,
                 masking: MaskingConfig | None = None, vocab_dir: str | None = None,
                 num_examples: int = 3) -> dict[str, Any]:
  """Reads `num_batches` training batches and measures them.

  Returns:
    A JSON-able dict: the settings, `statistics` (selection_rate, mask/random/keep fractions
    of the selected tokens, tokens_per_sequence, padding_fraction, predictions_per_sequence,
    max_predictions_used) and `examples` (decoded masked/original text and the predictions,
    when a vocab.json is known; `decoder` names it).
  """
  # pylint: disable=import-outside-toplevel
  from roberta_tf.data.masking import MaskingConfig, unmask
  from roberta_tf.data.pipeline import InputConfig, build_pretraining_dataset
  masking = masking or MaskingConfig()
  info = dataset_info.read(data_dir)
  vocab = VocabInfo.for_dataset(data_dir, info, vocab_dir)
  s = max_seq_len or info["max_seq_len"]
  config = InputConfig(per_replica_batch_size=batch_size, max_seq_len=s, seed=seed,
                       shuffle_buffer=min(10_000, info["splits"].get(split, {}).get(
                           "num_sequences", 10_000)))
  ds = build_pretraining_dataset(data_dir, split, vocab, config, masking)
  special = vocab.special_flags()
  vocab_dir = vocab_dir or find_vocab_dir(data_dir, info)
  decoder = Decoder(vocab_dir, vocab.special_ids) if vocab_dir else None

  totals = dict(rows=0, real=0, slots=0, maskable=0, selected=0, mask=0, random=0, keep=0)
  max_used, examples = 0, []
  for batch in ds.take(num_batches):
    b = {k: v.numpy() for k, v in batch.items()}
    original = unmask(b)
    max_used = max(max_used, _count(totals, b, original, special, vocab.mask_id, s))
    if decoder:
      examples += _examples(decoder, b, original, num_examples - len(examples))
  return {
      "data": data_dir, "split": split, "batches": num_batches, "batch_size": batch_size,
      "max_seq_len": s, "seed": seed, "masking": dataclasses.asdict(masking),
      "max_predictions_per_seq": masking.resolved_max_predictions(s),
      "decoder": decoder.name if decoder else None,
      "statistics": _statistics(totals, max_used),
      "examples": examples,
  }


def _count(totals: dict[str, int], b: dict, original: np.ndarray, special: np.ndarray,
           mask_id: int, s: int) -> int:
  """Adds a masked batch (NumPy) to `totals`; returns the most prediction slots a row used."""
  w = b["mask_weights"] > 0
  shown = np.take_along_axis(b["input_ids"], b["mask_positions"], 1)[w]
  real = b["padding_mask"] == 1
  totals["rows"] += int(real.any(1).sum())
  totals["real"] += int(real.sum())
  totals["slots"] += int(real.any(1).sum()) * s
  totals["maskable"] += int((real & ~special[original]).sum())
  totals["selected"] += int(w.sum())
  totals["mask"] += int((shown == mask_id).sum())
  totals["keep"] += int((shown == b["mask_ids"][w]).sum())
  return int(w.sum(1).max())


def _examples(decoder: Decoder, b: dict, original: np.ndarray, limit: int) -> list[dict]:
  """Up to `limit` rows of a masked batch (NumPy) decoded: masked, original, predictions."""
  w = b["mask_weights"] > 0
  real = b["padding_mask"] == 1
  examples = []
  for r in range(len(w)):
    if len(examples) < limit and real[r].any():
      n = int(real[r].sum())
      examples.append({
          "masked": decoder.decode(b["input_ids"][r][:n]),
          "original": decoder.decode(original[r][:n]),
          "predictions": [
              {"position": int(p), "original": decoder.piece(o), "input": decoder.piece(i)}
              for p, o, i in zip(b["mask_positions"][r][w[r]], b["mask_ids"][r][w[r]],
                                 b["input_ids"][r][b["mask_positions"][r][w[r]]], strict=True)]})
  return examples


def _statistics(totals: dict[str, int], max_used: int) -> dict[str, Any]:
  """The report's `statistics` from the counts of every batch."""
  totals["random"] = totals["selected"] - totals["mask"] - totals["keep"]
  sel = max(totals["selected"], 1)
  rows = max(totals["rows"], 1)
  return {
      "sequences": totals["rows"],
      "tokens": totals["real"],
      "selection_rate": totals["selected"] / max(totals["maskable"], 1),
      "mask_fraction": totals["mask"] / sel,
      "random_fraction": totals["random"] / sel,
      "keep_fraction": totals["keep"] / sel,
      "tokens_per_sequence": totals["real"] / rows,
      "padding_fraction": 1 - totals["real"] / max(totals["slots"], 1),
      "predictions_per_sequence": totals["selected"] / rows,
      "max_predictions_used": max_used,
  }


def format_report(report: dict[str, Any]) -> str:
  st = report["statistics"]
  lines = [f"{report['data']} [{report['split']}]: {st['sequences']} sequences in "
           f"{report['batches']} batches of {report['batch_size']} x {report['max_seq_len']}, "
           f"P={report['max_predictions_per_seq']}",
           f"  selection rate {st['selection_rate']:.4f} of maskable tokens; of the selected: "
           f"mask {st['mask_fraction']:.4f}, random {st['random_fraction']:.4f}, "
           f"unchanged {st['keep_fraction']:.4f}",
           f"  tokens/sequence {st['tokens_per_sequence']:.1f}, padding "
           f"{st['padding_fraction']:.4f}, predictions/sequence "
           f"{st['predictions_per_sequence']:.2f} (max {st['max_predictions_used']})"]
  if report["decoder"] is None:
    lines.append("  (no vocab.json known: pass --vocab_dir to see text)")
  for i, ex in enumerate(report["examples"]):
    lines += [f"\n--- example {i} (decoded with {report['decoder']})",
              f"masked:   {ex['masked']!r}", f"original: {ex['original']!r}",
              "predict:  " + ", ".join(f"{p['position']}:{p['original']}→{p['input']}"
                                       for p in ex["predictions"])]
  return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class InspectSettings:
  """inspect_data's flags."""
  data: str = option(
      help="Shard directory (with dataset_info.json); a path or a URL (gs://, ...).", path=True)
  split: str = option("train", "Split to read.")
  num_batches: int = option(10, "Batches to measure.", check=POSITIVE)
  batch_size: int = option(8, "Sequences per batch.", check=POSITIVE)
  seed: int = option(0, "Data seed (file order, shuffle, masks).")
  max_seq_len: int | None = option(None, "Padded length; default: the shards' max_seq_len.")
  num_examples: int = option(3, "Decoded sequences to show.")
  whole_word: bool = option(False, "Whole-word masking.")
  json: bool = option(False, "Print the report as JSON.")
  vocab_dir: str | None = option(
      None, "Directory with vocab.json (+ merges.txt) or tokenizer.json to decode with; "
      "default: the one recorded in dataset_info.json.", path=True)


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# --data is no absl-required flag: from_flags says it is missing, in one line.
options.define_flags(InspectSettings, FLAGS, required=False)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  s = options.from_flags(InspectSettings, FLAGS)
  from roberta_tf.data.masking import MaskingConfig  # pylint: disable=import-outside-toplevel
  # A damaged shard, found while reading, is the pipeline's failed assertion: cli prints its
  # message (which names the shard) as the one error line.
  report = inspect_data(s.data, split=s.split, num_batches=s.num_batches,
                        batch_size=s.batch_size, seed=s.seed, max_seq_len=s.max_seq_len,
                        masking=MaskingConfig(whole_word=s.whole_word), vocab_dir=s.vocab_dir,
                        num_examples=s.num_examples)
  print(json.dumps(report, indent=2, ensure_ascii=False) if s.json else format_report(report))


def console_main():
  """The console-script entry point (pyproject.toml)."""
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
