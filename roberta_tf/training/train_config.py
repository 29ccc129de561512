"""The resolved configuration of a pretraining run (what --flags become; saved in config.json)."""

from __future__ import annotations

import dataclasses
import os

from roberta_tf.common import atomic_write


@dataclasses.dataclass
class TrainConfig:
  """Everything a pretraining run needs besides the model config. See train.py for the flags."""
  model_dir: str
  train_data: str
  eval_data: str = ""
  config: str = "small"            # model preset name or path to a RobertaConfig JSON
  init_from: str = ""              # model dir to continue pretraining from
  # Data and masking (must match data generation: max_seq_len <= the shards' max_seq_len).
  max_seq_len: int = 512
  max_predictions_per_seq: int = 0   # 0: derived from max_seq_len and mask_prob
  mask_prob: float = 0.15
  mask_token_prob: float = 0.8
  random_token_prob: float = 0.1
  whole_word_masking: bool = False
  masking: str = "dynamic"           # dynamic | static
  dupe_factor: int = 10              # static masking: copies with fixed masks
  shuffle_buffer: int = 10000
  skip_corrupt_shards: bool = False
  # Batch and optimization.
  batch_size: int = 256              # global sequences per optimizer update
  grad_accum_steps: int = 1
  train_steps: int = 1000
  learning_rate: float = 6e-4
  warmup_steps: int = 100
  weight_decay: float = 0.01
  adam_beta1: float = 0.9
  adam_beta2: float = 0.98
  adam_epsilon: float = 1e-6
  clip_norm: float = 0.0
  dropout: float = -1.0              # < 0: the model config's
  precision: str = "float32"
  # Distribution.
  strategy: str = "auto"
  tpu: str = ""
  cpu_replicas: int = 1              # split the CPU into N logical devices (testing mirrored)
  # Bookkeeping.
  checkpoint_every: int = 1000
  keep_checkpoints: int = 3
  overwrite: bool = False            # start over: delete model_dir's checkpoints and logs
  eval_every: int = 0                # 0: only at the end
  eval_steps: int = 0                # 0: the whole eval split
  log_every: int = 100
  max_bad_steps: int = 20
  seed: int = 0
  deterministic: bool = False
  jit_compile: bool = False         # XLA-compile the per-replica forward + backward
  peak_flops: float = 0.0            # peak FLOP/s of one replica for MFU; 0: per precision below
  peak_flops_fp32: float = 183e9     # measured on the 2-core dev CPU (2048^3 matmul)
  peak_flops_bf16: float = 380e9

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
        (self.precision in ("float32", "mixed_bfloat16", "mixed_float16"),
         f"--precision={self.precision!r}: expected float32, mixed_bfloat16 or mixed_float16"),
        (self.masking in ("dynamic", "static"),
         f"--masking={self.masking!r}: expected dynamic or static"),
        (self.max_seq_len >= 8, f"--max_seq_len must be >= 8, got {self.max_seq_len}"),
        (self.max_bad_steps > 0, f"--max_bad_steps must be > 0, got {self.max_bad_steps}"),
        (self.log_every > 0, f"--log_every must be > 0, got {self.log_every}"),
        (self.checkpoint_every > 0, f"--checkpoint_every must be > 0, got {self.checkpoint_every}"),
        (self.keep_checkpoints > 0, f"--keep_checkpoints must be > 0, got {self.keep_checkpoints}"),
        (self.eval_every >= 0 and self.eval_steps >= 0,
         f"--eval_every ({self.eval_every}) and --eval_steps ({self.eval_steps}) must be >= 0"),
        (self.shuffle_buffer >= 0, f"--shuffle_buffer must be >= 0, got {self.shuffle_buffer}"),
        (self.clip_norm >= 0, f"--clip_norm must be >= 0, got {self.clip_norm}"),
        (bool(self.model_dir), "--model_dir is required"),
        (not os.path.exists(self.model_dir) or os.path.isdir(self.model_dir),
         f"--model_dir={self.model_dir} exists and is not a directory"),
        (bool(self.train_data), "--train_data is required"),
    ]
    for ok, message in checks:
      if not ok:
        raise ValueError(message)

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
