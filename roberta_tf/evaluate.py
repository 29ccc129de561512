"""Evaluates a checkpoint: masked-LM loss, perplexity and accuracy on held-out shards, and/or
linguistic knowledge on minimal pairs (BLiMP, scored by pseudo-log-likelihood).

  python -m roberta_tf.evaluate --model_dir=DIR --eval_data=DIR [--checkpoint=PATH] [--json]
  python -m roberta_tf.evaluate --model_dir=DIR --minimal_pairs=blimp/data   # or FILE.jsonl[.gz]

With --minimal_pairs the last stdout line is one JSON object: {"accuracy", "pairs",
"by_phenomenon", "by_paradigm", "checkpoint"} (also written to TensorBoard: eval/blimp/*).
"""

from __future__ import annotations

import dataclasses
import json

from absl import app

from roberta_tf.common import cli, options
from roberta_tf.common.options import NON_NEGATIVE, option


@dataclasses.dataclass(frozen=True)
class EvaluateSettings:
  """evaluate's flags."""
  model_dir: str = option(help="Model dir: config.json + checkpoints.", path=True)
  eval_data: str | None = option(
      None, "Shard directory (data_prep.build_shards output).", path=True)
  minimal_pairs: str | None = option(
      None, "BLiMP-format minimal pairs: a .jsonl[.gz] file (one {sentence_good, sentence_bad, "
      "UID, linguistics_term} object a line) or a directory of them (BLiMP's data/); each pair "
      "is right when the good sentence has the higher pseudo-log-likelihood.", path=True)
  pairs_per_paradigm: int = option(
      0, "--minimal_pairs: score a fixed sample of at most this many pairs of each paradigm "
      "(UID; BLiMP has 1,000 each, 67 paradigms); 0: every pair.", check=NON_NEGATIVE)
  split: str = option("validation", "Split of --eval_data to evaluate.")
  checkpoint: str | None = option(None, "Checkpoint prefix instead of the latest.", path=True)
  batch_size: int = option(32, "Sequences per eval batch.")
  max_seq_len: int | None = option(
      None, "Padded length (default: the training run's, else the shards' max_seq_len).")
  eval_steps: int = option(0, "Batches to evaluate; 0: the whole split.")
  seed: int | None = option(
      None, "Seed of the (fixed) eval masks (default: the training run's --seed from "
      "config.json, as its evals used; else 0).")
  standard_masking: bool = option(
      False, "Mask the held-out set as RoBERTa does (15% of single tokens, 80/10/10, dynamic), "
      "whatever the run trained with (default: as the run's own evals, 15% of tokens with its "
      "--mask_token_prob, --random_token_prob, --whole_word_masking and --masking).")
  json: bool = option(False, "Print the metrics as JSON.")
  unigram: bool = option(
      True, "Also score the unigram baseline, counted from the train split beside --eval_data "
      "(else the run's recorded train data); a damaged train shard is an error (--nounigram: "
      "evaluate without the baseline).")


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(EvaluateSettings, FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  s = options.from_flags(EvaluateSettings, FLAGS)
  if not s.eval_data and not s.minimal_pairs:
    raise app.UsageError("give --eval_data (held-out shards), --minimal_pairs (BLiMP pairs), "
                         "or both")
  if s.eval_data:
    _held_out(s)
  if s.minimal_pairs:
    from roberta_tf.pretraining import minimal_pair_evaluation  # pylint: disable=import-outside-toplevel
    result = minimal_pair_evaluation.evaluate_minimal_pairs(
        s.model_dir, s.minimal_pairs, checkpoint=s.checkpoint, batch_size=s.batch_size,
        max_seq_len=s.max_seq_len, per_paradigm=s.pairs_per_paradigm,
        log=lambda line: print(line, flush=True))
    if not s.json:
      worst = sorted(result["by_phenomenon"].items(), key=lambda kv: kv[1])[:3]
      print(f"minimal pairs: accuracy {result['accuracy']:.4f} on {result['pairs']:,} pairs; "
            "lowest: " + ", ".join(f"{k} {v:.3f}" for k, v in worst))
    print(json.dumps(result, sort_keys=True))
  return 0


def _held_out(s: EvaluateSettings):
  from roberta_tf.data import masking as masking_lib  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining import mlm_evaluation  # pylint: disable=import-outside-toplevel
  masking = masking_lib.MaskingConfig() if s.standard_masking else None
  metrics = mlm_evaluation.evaluate_checkpoint(
      s.model_dir, s.eval_data, checkpoint=s.checkpoint, split=s.split, batch_size=s.batch_size,
      max_seq_len=s.max_seq_len, eval_steps=s.eval_steps, seed=s.seed, unigram=s.unigram,
      masking=masking)
  if s.json:
    print(json.dumps(metrics, indent=2))
  else:
    print(mlm_evaluation.eval_line(metrics["checkpoint"], metrics)
          + f" | {metrics['masked_tokens']:.0f} masked tokens")


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
