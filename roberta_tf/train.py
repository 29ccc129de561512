"""Pretrains RoBERTa with masked-LM on data_prep shards.

  python -m roberta_tf.train --flagfile=flags/small.flags --train_data=DIR [--eval_data=DIR] \
      --model_dir=DIR

A start resumes from model_dir's newest complete checkpoint (model, optimizer, step, data
position); a model dir with checkpoint files is never started over without --overwrite.
SIGTERM (and a first Ctrl-C) saves a checkpoint and exits cleanly. See README "Training".
"""

from absl import app, flags

from roberta_tf.common import cli
from roberta_tf.training.train_config import TrainConfig

_D = TrainConfig(model_dir="", train_data="")  # defaults shown in --help come from here

FLAGS = flags.FLAGS
flags.DEFINE_string("model_dir", None, "Where checkpoints, TensorBoard logs (train/, eval/) and "
                    "config.json go. An existing checkpoint there is resumed.")
flags.DEFINE_string("train_data", None, "Shard directory written by data_prep.build_shards (its "
                    "'train' split is read).")
flags.DEFINE_string("eval_data", _D.eval_data, "Shard directory whose 'validation' split is the "
                    "held-out set (usually the same as --train_data). Empty: no eval.")
flags.DEFINE_string("config", _D.config, "Model size preset (tiny, small, medium, base, large) or "
                    "a RobertaConfig JSON file. Ignored with --init_from.")
flags.DEFINE_string("init_from", _D.init_from, "Model dir (imported or trained) whose weights and "
                    "config start a new run: continued pretraining.")
flags.DEFINE_integer("max_seq_len", _D.max_seq_len, "Padded sequence length; must be >= the "
                     "shards' max_seq_len (must match data generation) and fit the position table.")
flags.DEFINE_integer("max_predictions_per_seq", _D.max_predictions_per_seq, "Prediction slots per "
                     "sequence; 0 derives it from --max_seq_len and --mask_prob with headroom.")
flags.DEFINE_float("mask_prob", _D.mask_prob, "Fraction of non-special tokens selected for "
                   "prediction (RoBERTa: 0.15).")
flags.DEFINE_float("mask_token_prob", _D.mask_token_prob, "Of the selected tokens, the fraction "
                   "replaced by <mask> (0.8).")
flags.DEFINE_float("random_token_prob", _D.random_token_prob, "Of the selected tokens, the "
                   "fraction replaced by a random token (0.1); the rest stay unchanged.")
flags.DEFINE_bool("whole_word_masking", _D.whole_word_masking, "Select whole words (all their "
                  "byte-level pieces) for masking instead of single pieces (needs the shards' "
                  "vocab.json).")
flags.DEFINE_enum("masking", _D.masking, ["dynamic", "static"], "dynamic: a fresh mask each time "
                  "a sequence is read (RoBERTa); static: BERT's fixed masks, --dupe_factor copies.")
flags.DEFINE_integer("dupe_factor", _D.dupe_factor, "Static masking: copies with different fixed "
                     "masks (the paper's static baseline used 10).")
flags.DEFINE_integer("shuffle_buffer", _D.shuffle_buffer, "Sequences in the shuffle buffer "
                     "(0: no shuffling, shards read in order; for tests and parity checks).")
flags.DEFINE_bool("skip_corrupt_shards", _D.skip_corrupt_shards, "Skip (and count) corrupt shards "
                  "instead of failing.")
flags.DEFINE_integer("batch_size", _D.batch_size, "GLOBAL sequences per optimizer update = "
                     "per-replica batch x replicas x --grad_accum_steps (RoBERTa: 8192).")
flags.DEFINE_integer("grad_accum_steps", _D.grad_accum_steps, "Micro-batches accumulated per "
                     "update on each replica.")
flags.DEFINE_integer("train_steps", _D.train_steps, "Optimizer updates; the LR reaches 0 here.")
flags.DEFINE_float("learning_rate", _D.learning_rate, "Peak learning rate, reached after "
                   "--warmup_steps (RoBERTa base: 6e-4 at 8K batch; large: 4e-4).")
flags.DEFINE_integer("warmup_steps", _D.warmup_steps, "Steps of linear warmup from 0 to "
                     "--learning_rate; then linear decay to 0 at --train_steps.")
flags.DEFINE_float("weight_decay", _D.weight_decay, "AdamW decoupled weight decay (not on "
                   "LayerNorm or biases).")
flags.DEFINE_float("adam_beta1", _D.adam_beta1, "AdamW beta1, the first-moment decay "
                   "(RoBERTa: 0.9).")
flags.DEFINE_float("adam_beta2", _D.adam_beta2, "AdamW beta2 (RoBERTa: 0.98 for stability with "
                   "large batches).")
flags.DEFINE_float("adam_epsilon", _D.adam_epsilon, "AdamW epsilon (RoBERTa: 1e-6, for "
                   "stability with large batches; keras' default is 1e-7).")
flags.DEFINE_float("clip_norm", _D.clip_norm, "Global gradient-norm clipping; 0 disables.")
flags.DEFINE_float("dropout", _D.dropout, "Override the model's dropout (and attention dropout); "
                   "< 0 keeps the config's.")
flags.DEFINE_enum("precision", _D.precision, ["float32", "mixed_bfloat16", "mixed_float16"],
                  "Compute precision; variables stay float32. fp16 uses dynamic loss scaling.")
flags.DEFINE_enum("strategy", _D.strategy, ["auto", "default", "mirrored", "multi_worker", "tpu"],
                  "auto: mirrored with more than one GPU, else default; multi_worker reads "
                  "TF_CONFIG.")
flags.DEFINE_string("tpu", _D.tpu, "TPU name or grpc:// address for "
                    "--strategy=tpu (empty: the local TPU).")
flags.DEFINE_integer("cpu_replicas", _D.cpu_replicas, "Split the CPU into this many logical "
                     "devices (to run --strategy=mirrored without GPUs, for testing).")
flags.DEFINE_integer("checkpoint_every", _D.checkpoint_every, "Steps between checkpoints (one "
                     "is also written at the end and on SIGTERM).")
flags.DEFINE_integer("keep_checkpoints", _D.keep_checkpoints, "Newest checkpoints kept in "
                     "--model_dir; older ones are deleted.")
flags.DEFINE_bool("overwrite", _D.overwrite, "Start over: delete --model_dir's checkpoints and "
                  "TensorBoard logs first. Without it a model dir with checkpoints is resumed "
                  "(from the newest complete one), never overwritten.")
flags.DEFINE_integer("eval_every", _D.eval_every, "Steps between evals (0: start and end only).")
flags.DEFINE_integer("eval_steps", _D.eval_steps, "Eval batches of --batch_size / "
                     "--grad_accum_steps sequences (0: the whole eval split).")
flags.DEFINE_integer("log_every", _D.log_every, "Steps between console lines and train summaries.")
flags.DEFINE_integer("max_bad_steps", _D.max_bad_steps, "Non-finite steps in a row before the run "
                     "restores the last good checkpoint and stops.")
flags.DEFINE_integer("seed", _D.seed, "Seed for init, shuffling, masking and dropout.")
flags.DEFINE_bool("deterministic", _D.deterministic, "Enable TF op determinism (slower; makes a "
                  "run repeatable bit for bit on the same machine).")
flags.DEFINE_bool("jit_compile", _D.jit_compile, "XLA-compile each replica's forward + backward "
                  "pass (faster on GPU/TPU; on CPU oneDNN without XLA is faster).")
flags.DEFINE_float("peak_flops", _D.peak_flops, "Peak FLOP/s of one replica, for MFU. 0: "
                   "--peak_flops_fp32 or --peak_flops_bf16 by --precision.")
flags.DEFINE_float("peak_flops_fp32", _D.peak_flops_fp32, "Peak fp32 FLOP/s (default: the 2-core "
                   "dev CPU's measured 2048^3 matmul).")
flags.DEFINE_float("peak_flops_bf16", _D.peak_flops_bf16, "Peak bf16/fp16 FLOP/s of one "
                   "replica, for MFU under mixed precision.")
flags.mark_flags_as_required(["model_dir", "train_data"])


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  values = {name: FLAGS[name].value for name in TrainConfig.__dataclass_fields__ if name in FLAGS}
  cfg = TrainConfig(**values)
  # Logical CPU devices must exist before TensorFlow initializes, so split before the import.
  from roberta_tf.training import strategy as strategy_lib  # pylint: disable=import-outside-toplevel
  strategy_lib.split_cpu(cfg.cpu_replicas)
  from roberta_tf.training import run  # pylint: disable=import-outside-toplevel
  run.train(cfg)  # also on SIGTERM: it saved a checkpoint and returned; exit 0
  return 0


def run():
  """Console-script entry point (pyproject: roberta-train)."""
  cli.run(main)


if __name__ == "__main__":
  run()
