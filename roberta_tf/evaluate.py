"""Evaluates a checkpoint: masked-LM loss, perplexity and accuracy on held-out shards, and/or
linguistic knowledge on minimal pairs (BLiMP, scored by pseudo-log-likelihood).

  python -m roberta_tf.evaluate --model_dir=DIR --eval_data=DIR [--checkpoint=PATH] [--json]
  python -m roberta_tf.evaluate --model_dir=DIR --minimal_pairs=blimp/data   # or FILE.jsonl[.gz]

With --minimal_pairs the last stdout line is one JSON object: {"accuracy", "pairs",
"by_phenomenon", "by_paradigm", "checkpoint"} (also written to TensorBoard: eval/blimp/*).
"""

import json

from absl import app, flags

from roberta_tf.common import cli, files

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
flags.DEFINE_string("model_dir", None, "Model dir: config.json + checkpoints.", flag_values=FLAGS)
flags.DEFINE_string("eval_data", None, "Shard directory (data_prep.build_shards output).",
                    flag_values=FLAGS)
flags.DEFINE_string("minimal_pairs", None, "BLiMP-format minimal pairs: a .jsonl[.gz] file (one "
                    "{sentence_good, sentence_bad, UID, linguistics_term} object a line) or a "
                    "directory of them (BLiMP's data/); each pair is right when the good "
                    "sentence has the higher pseudo-log-likelihood.", flag_values=FLAGS)
flags.DEFINE_integer("pairs_per_paradigm", 0, "--minimal_pairs: score a fixed sample of at most "
                     "this many pairs of each paradigm (UID; BLiMP has 1,000 each, 67 "
                     "paradigms); 0: every pair.", lower_bound=0, flag_values=FLAGS)
flags.DEFINE_string("split", "validation", "Split of --eval_data to evaluate.", flag_values=FLAGS)
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix instead of the latest.",
                    flag_values=FLAGS)
flags.DEFINE_integer("batch_size", 32, "Sequences per eval batch.", flag_values=FLAGS)
flags.DEFINE_integer("max_seq_len", None, "Padded length (default: the training run's, else the "
                     "shards' max_seq_len).", flag_values=FLAGS)
flags.DEFINE_integer("eval_steps", 0, "Batches to evaluate; 0: the whole split.", flag_values=FLAGS)
flags.DEFINE_integer("seed", None, "Seed of the (fixed) eval masks (default: the training run's "
                     "--seed from config.json, as its evals used; else 0).", flag_values=FLAGS)
flags.DEFINE_bool("standard_masking", False, "Mask the held-out set as RoBERTa does (15% of "
                  "tokens, 80/10/10), whatever the run trained with: compares runs of "
                  "different --mask_prob (default: the training run's masking, as its evals).",
                  flag_values=FLAGS)
flags.DEFINE_bool("json", False, "Print the metrics as JSON.", flag_values=FLAGS)
flags.DEFINE_bool("unigram", True, "Also score the unigram baseline, counted from the train "
                  "split beside --eval_data (else the run's recorded train data); a damaged "
                  "train shard is an error (--nounigram: evaluate without the baseline).",
                  flag_values=FLAGS)
flags.mark_flags_as_required(["model_dir"], flag_values=FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  if not FLAGS.eval_data and not FLAGS.minimal_pairs:
    raise app.UsageError("give --eval_data (held-out shards), --minimal_pairs (BLiMP pairs), "
                         "or both")
  for flag in ("model_dir", "eval_data", "minimal_pairs", "checkpoint"):
    if getattr(FLAGS, flag):
      files.check(getattr(FLAGS, flag), f"--{flag}")
  if FLAGS.eval_data:
    _held_out()
  if FLAGS.minimal_pairs:
    from roberta_tf.pretraining import minimal_pair_evaluation  # pylint: disable=import-outside-toplevel
    result = minimal_pair_evaluation.evaluate_minimal_pairs(
        FLAGS.model_dir, FLAGS.minimal_pairs, checkpoint=FLAGS.checkpoint,
        batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len,
        per_paradigm=FLAGS.pairs_per_paradigm, log=lambda line: print(line, flush=True))
    if not FLAGS.json:
      worst = sorted(result["by_phenomenon"].items(), key=lambda kv: kv[1])[:3]
      print(f"minimal pairs: accuracy {result['accuracy']:.4f} on {result['pairs']:,} pairs; "
            "lowest: " + ", ".join(f"{k} {v:.3f}" for k, v in worst))
    print(json.dumps(result, sort_keys=True))
  return 0


def _held_out():
  from roberta_tf.data import masking as masking_lib  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining import mlm_evaluation  # pylint: disable=import-outside-toplevel
  masking = masking_lib.MaskingConfig() if FLAGS.standard_masking else None
  metrics = mlm_evaluation.evaluate_checkpoint(
      FLAGS.model_dir, FLAGS.eval_data, checkpoint=FLAGS.checkpoint, split=FLAGS.split,
      batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len, eval_steps=FLAGS.eval_steps,
      seed=FLAGS.seed, unigram=FLAGS.unigram, masking=masking)
  if FLAGS.json:
    print(json.dumps(metrics, indent=2))
  else:
    print(mlm_evaluation.eval_line(metrics["checkpoint"], metrics)
          + f" | {metrics['masked_tokens']:.0f} masked tokens")


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
