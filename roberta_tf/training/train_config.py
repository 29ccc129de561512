"""The resolved configuration of a pretraining run (what --flags become; saved in config.json)."""

from __future__ import annotations

import dataclasses
import os

from roberta_tf.common import atomic_write
from roberta_tf.common.options import check_choices, option


@dataclasses.dataclass
class TrainConfig:
  """Everything a pretraining run needs besides the model config: each field is also the
  binary's flag of the same name, with this help (roberta_tf/common/options.py)."""
  model_dir: str = option(
      help="Where checkpoints, TensorBoard logs (train/, eval/) and config.json go. An existing "
      "checkpoint there is resumed.")
  train_data: str = option(
      help="Shard directory written by data_prep.build_shards (its 'train' split is read).")
  eval_data: str = option(
      "", "Shard directory whose 'validation' split is the held-out set (usually the same as "
      "--train_data). Empty: no eval.")
  config: str = option(
      "small", "Model size preset (tiny, small, medium, base, large) or a RobertaConfig JSON "
      "file. Ignored with --init_from.")
  init_from: str = option(
      "", "Model dir (imported or trained) whose weights and config start a new run: continued "
      "pretraining.")
  # Data and masking (must match data generation: max_seq_len <= the shards' max_seq_len).
  max_seq_len: int = option(
      512, "Padded sequence length; must be >= the shards' max_seq_len (must match data "
      "generation) and fit the position table.")
  max_predictions_per_seq: int = option(
      0, "Prediction slots per sequence; 0 derives it from --max_seq_len and --mask_prob with "
      "headroom.")
  mask_prob: float = option(
      0.15, "Fraction of non-special tokens selected for prediction (RoBERTa: 0.15).")
  mask_token_prob: float = option(
      0.8, "Of the selected tokens, the fraction replaced by <mask> (0.8).")
  random_token_prob: float = option(
      0.1, "Of the selected tokens, the fraction replaced by a random token (0.1); the rest stay "
      "unchanged.")
  whole_word_masking: bool = option(
      False, "Select whole words (all their byte-level pieces) for masking instead of single "
      "pieces (needs the shards' vocab.json).")
  masking: str = option(
      "dynamic", "dynamic: a fresh mask each time a sequence is read (RoBERTa); "
      "static: BERT's fixed masks, --dupe_factor copies.", choices=("dynamic", "static"))
  dupe_factor: int = option(
      10, "Static masking: copies with different fixed masks (the paper's static baseline used "
      "10).")
  shuffle_buffer: int = option(
      10000, "Sequences in the shuffle buffer (0: no shuffling, shards read in order; for tests "
      "and parity checks).")
  skip_corrupt_shards: bool = option(
      False, "Skip (and count) corrupt shards instead of failing.")
  # Batch and optimization.
  batch_size: int = option(
      256, "GLOBAL sequences per optimizer update = per-replica batch x replicas x "
      "--grad_accum_steps (RoBERTa: 8192).")
  grad_accum_steps: int = option(
      1, "Micro-batches accumulated per update on each replica.")
  train_steps: int = option(
      1000, "Optimizer updates; the LR reaches 0 here.")
  learning_rate: float = option(
      0.0006, "Peak learning rate, reached after --warmup_steps (RoBERTa base: 6e-4 at 8K batch; "
      "large: 4e-4).")
  warmup_steps: int = option(
      100, "Steps of linear warmup from 0 to --learning_rate; then linear decay to 0 at "
      "--train_steps.")
  weight_decay: float = option(
      0.01, "AdamW decoupled weight decay (not on LayerNorm or biases).")
  adam_beta1: float = option(
      0.9, "AdamW beta1, the first-moment decay (RoBERTa: 0.9).")
  adam_beta2: float = option(
      0.98, "AdamW beta2 (RoBERTa: 0.98 for stability with large batches).")
  adam_epsilon: float = option(
      1e-06, "AdamW epsilon (RoBERTa: 1e-6, for stability with large batches; keras' default is "
      "1e-7).")
  clip_norm: float = option(
      0.0, "Global gradient-norm clipping; 0 disables.")
  dropout: float = option(
      -1.0, "Override the model's dropout (and attention dropout); < 0 keeps the config's.")
  type_embedding: bool = option(
      True, "A preset model adds one learned vector to every token: a 1-row token-type table, "
      "HF RobertaModel's shape, whose random init helps a small model off the unigram plateau "
      "(docs/learning_parity.md). --notype_embedding: fairseq's exact shape, without it. A JSON "
      "--config and --init_from keep their own.")
  precision: str = option(
      "float32", "Compute precision; variables stay float32. fp16 uses dynamic loss scaling.",
      choices=("float32", "mixed_bfloat16", "mixed_float16"))
  # Distribution.
  strategy: str = option(
      "auto", "auto: mirrored with more than one GPU, else default; multi_worker reads "
      "TF_CONFIG.",
      choices=("auto", "default", "mirrored", "multi_worker", "tpu"))
  peer_timeout: int = option(
      600, "--strategy=multi_worker: seconds to wait for every TF_CONFIG worker to start before "
      "giving up with an error naming the missing ones (SIGTERM/Ctrl-C stop the wait).")
  tpu: str = option(
      "", "TPU name or grpc:// address for --strategy=tpu (empty: the local TPU).")
  cpu_replicas: int = option(
      1, "Split the CPU into this many logical devices (to run --strategy=mirrored without GPUs, "
      "for testing).")
  # Bookkeeping.
  checkpoint_every: int = option(
      1000, "Steps between checkpoints (one is also written at the end and on SIGTERM).")
  keep_checkpoints: int = option(
      3, "Newest checkpoints kept in --model_dir; older ones are deleted.")
  overwrite: bool = option(
      False, "Start over: delete --model_dir's checkpoints and TensorBoard logs first. Without it "
      "a model dir with checkpoints is resumed (from the newest complete one), never overwritten.")
  eval_every: int = option(
      0, "Steps between evals (0: start and end only).")
  eval_steps: int = option(
      0, "Eval batches of --batch_size / --grad_accum_steps sequences (0: the whole eval split).")
  log_every: int = option(
      100, "Steps between console lines and train summaries.")
  max_bad_steps: int = option(
      20, "Non-finite steps in a row before the run restores the last good checkpoint and stops.")
  seed: int = option(
      0, "Seed for init, shuffling, masking and dropout.")
  deterministic: bool = option(
      False, "Enable TF op determinism (slower; makes a run repeatable bit for bit on the same "
      "machine).")
  jit_compile: bool = option(
      False, "XLA-compile each replica's forward + backward pass (faster on GPU/TPU; on CPU "
      "oneDNN without XLA is faster).")
  peak_flops: float = option(
      0.0, "Peak FLOP/s of one replica, for MFU. 0: --peak_flops_fp32 or --peak_flops_bf16 by "
      "--precision.")
  peak_flops_fp32: float = option(
      183000000000.0, "Peak fp32 FLOP/s (default: the 2-core dev CPU's measured 2048^3 matmul).")
  peak_flops_bf16: float = option(
      380000000000.0, "Peak bf16/fp16 FLOP/s of one replica, for MFU under mixed precision.")

  def validate(self) -> None:
    """Raises ValueError naming the flag for inconsistent settings."""
    checks = [
        (self.train_steps > 0, f"--train_steps must be > 0, got {self.train_steps}"),
        (self.batch_size > 0, f"--batch_size must be > 0, got {self.batch_size}"),
        (self.grad_accum_steps > 0, f"--grad_accum_steps must be > 0, got {self.grad_accum_steps}"),
        (0 <= self.warmup_steps <= self.train_steps,
         f"--warmup_steps={self.warmup_steps} must be in [0, --train_steps={self.train_steps}]"),
        (self.learning_rate > 0, f"--learning_rate must be > 0, got {self.learning_rate}"),
        (0 < self.mask_prob < 1, f"--mask_prob must be in (0, 1), got {self.mask_prob}"),
        (self.mask_token_prob + self.random_token_prob <= 1,
         "--mask_token_prob + --random_token_prob must be <= 1"),
        (self.max_seq_len >= 8, f"--max_seq_len must be >= 8, got {self.max_seq_len}"),
        (self.max_bad_steps > 0, f"--max_bad_steps must be > 0, got {self.max_bad_steps}"),
        (self.log_every > 0, f"--log_every must be > 0, got {self.log_every}"),
        (self.checkpoint_every > 0, f"--checkpoint_every must be > 0, got {self.checkpoint_every}"),
        (self.keep_checkpoints > 0, f"--keep_checkpoints must be > 0, got {self.keep_checkpoints}"),
        (self.eval_every >= 0 and self.eval_steps >= 0,
         f"--eval_every ({self.eval_every}) and --eval_steps ({self.eval_steps}) must be >= 0"),
        (self.shuffle_buffer >= 0, f"--shuffle_buffer must be >= 0, got {self.shuffle_buffer}"),
        (self.clip_norm >= 0, f"--clip_norm must be >= 0, got {self.clip_norm}"),
        (self.peer_timeout > 0, f"--peer_timeout must be > 0, got {self.peer_timeout}"),
        (bool(self.model_dir), "--model_dir is required"),
        (not os.path.exists(self.model_dir) or os.path.isdir(self.model_dir),
         f"--model_dir={self.model_dir} exists and is not a directory"),
        (bool(self.train_data), "--train_data is required"),
    ]
    for ok, message in checks:
      if not ok:
        raise ValueError(message)
    check_choices(self)

  def masking_config(self):
    """The pipeline's MaskingConfig (training and its evals use the same)."""
    # Imported here: this module stays TensorFlow-free, so `train --help` is instant.
    from roberta_tf.data.masking import MaskingConfig  # pylint: disable=import-outside-toplevel
    return MaskingConfig(
        mask_prob=self.mask_prob, mask_token_prob=self.mask_token_prob,
        random_token_prob=self.random_token_prob, whole_word=self.whole_word_masking,
        static=self.masking == "static", dupe_factor=self.dupe_factor,
        max_predictions_per_seq=self.max_predictions_per_seq or None)

  def to_dict(self) -> dict:
    return dataclasses.asdict(self)

  @classmethod
  def from_dict(cls, d: dict) -> TrainConfig:
    known = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in d.items() if k in known})


def write_config_json(model_dir: str, model_config: dict, train_config: TrainConfig | None,
                      extra: dict | None = None) -> str:
  """Writes model_dir/config.json: {"model": ..., "training": ..., ...} atomically."""
  os.makedirs(model_dir, exist_ok=True)
  doc = {"model": model_config}
  if train_config is not None:
    doc["training"] = train_config.to_dict()
  doc.update(extra or {})
  return atomic_write.write_json(os.path.join(model_dir, "config.json"), doc)
