"""Evaluates a checkpoint's masked-LM loss, perplexity and accuracy on held-out shards.

  python -m roberta_tf.evaluate --model_dir=DIR --eval_data=DIR [--checkpoint=PATH] [--json]
"""

import json

from absl import app, flags

from roberta_tf.common import cli

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Model dir: config.json + checkpoints.")
flags.DEFINE_string("eval_data", None, "Shard directory (data_prep.build_shards output).")
flags.DEFINE_string("split", "validation", "Split of --eval_data to evaluate.")
flags.DEFINE_string("checkpoint", None, "Checkpoint prefix instead of the latest.")
flags.DEFINE_integer("batch_size", 32, "Sequences per eval batch.")
flags.DEFINE_integer("max_seq_len", None, "Padded length (default: the training run's, else the "
                     "shards' max_seq_len).")
flags.DEFINE_integer("eval_steps", 0, "Batches to evaluate; 0: the whole split.")
flags.DEFINE_integer("seed", None, "Seed of the (fixed) eval masks (default: the training run's "
                     "--seed from config.json, as its evals used; else 0).")
flags.DEFINE_bool("json", False, "Print the metrics as JSON.")
flags.DEFINE_bool("unigram", True, "Also score the unigram baseline, counted from the train "
                  "split beside --eval_data (else the run's recorded train data); a damaged "
                  "train shard is an error (--nounigram: evaluate without the baseline).")
flags.mark_flags_as_required(["model_dir", "eval_data"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  from roberta_tf.training import mlm_evaluation  # pylint: disable=import-outside-toplevel
  metrics = mlm_evaluation.evaluate_checkpoint(
      FLAGS.model_dir, FLAGS.eval_data, checkpoint=FLAGS.checkpoint, split=FLAGS.split,
      batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len, eval_steps=FLAGS.eval_steps,
      seed=FLAGS.seed, unigram=FLAGS.unigram)
  if FLAGS.json:
    print(json.dumps(metrics, indent=2))
  else:
    print(mlm_evaluation.eval_line(metrics["checkpoint"], metrics)
          + f" | {metrics['masked_tokens']:.0f} masked tokens")
  return 0


def console_main():
  cli.run(main)


if __name__ == "__main__":
  console_main()
