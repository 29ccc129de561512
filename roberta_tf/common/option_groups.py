"""The options that pretraining (roberta_tf.train) and fine-tuning (roberta_tf.finetune) share,
in groups declared once (common/options.py's option()): MODEL (the model dir and the model),
DATA (sequence length and batch), OPTIMIZER, RUNTIME (precision, distribution, seeds,
determinism) and LOOP (log, eval and checkpoint cadence, the non-finite step limit). Each is a
frozen dataclass that both configs hold as an options.nested() field, so code reads
`cfg.optimizer.clip_norm` and hands a group whole to what uses it (`optimizer.adamw(
cfg.optimizer, ...)`, `model_config.resolve(cfg.model, ...)`), while the flags, config.json's
"training" and sweep.json stay flat (options.GroupedConfig).

Defaults and help here are pretraining's where the two differ; fine-tuning's config holds a
subclass of a group that options.redeclare()s what differs (its 1e-5 learning rate, max_seq_len
0: the pretrained model's), pretraining's TrainRuntime adds --precision=auto. An option a binary
does not offer (fine-tuning's --tpu, --warmup_steps, the LOOP cadence) is left out with
nested(omit=...): no flag, the group's default. An option of one binary only (masking, GLUE
presets, QA windows...) is a field of its config.

TensorFlow-free: `train --help` and `finetune --help` import it (strategy.py imports STRATEGIES).
"""

from __future__ import annotations

import dataclasses

from roberta_tf.common.options import FRACTION, NON_NEGATIVE, POSITIVE, at_least, option

# Keras dtype policies: variables stay float32; fp16 adds dynamic loss scaling (train_step.py).
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# tf.distribute strategies (training/strategy.py's make_strategy builds them).
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")


@dataclasses.dataclass(frozen=True)
class ModelOptions:
  """MODEL: where the run writes, and the model it starts from (training.model_config.resolve)."""
  model_dir: str = option(
      help="Where checkpoints, TensorBoard logs (train/, eval/) and config.json go. An "
      "existing checkpoint there is resumed.", path=True)
  overwrite: bool = option(
      False, "Start over: delete --model_dir's checkpoints and TensorBoard logs first. "
      "Without it a model dir with checkpoints is resumed (from the newest complete one), "
      "never overwritten.")
  init_from: str = option(
      "", "Model dir (imported or trained) whose weights and config start a new run: "
      "continued pretraining. Shards of a grown vocabulary (train_tokenizer --extend_from) "
      "grow its token embedding, tied decoder and bias; shards longer than its position table "
      "grow the table to --max_seq_len (docs/domain_adaptation.md).", path=True)
  config: str = option(
      "small", "Model size preset (tiny, small, medium, base, large) or a RobertaConfig "
      "JSON file, for a randomly initialized model. Ignored with --init_from.", path=True)
  dropout: float = option(
      -1.0, "Override the model's dropout (and attention dropout); < 0 keeps the "
      "model config's.")


@dataclasses.dataclass(frozen=True)
class DataOptions:
  """DATA: sequence length, the global batch, the training stream's lanes (pretraining's)."""
  max_seq_len: int = option(
      512, "Padded sequence length; must be >= the shards' max_seq_len (must match data "
      "generation) and fit the position table.", check=at_least(8))
  batch_size: int = option(
      256, "GLOBAL sequences per optimizer update = per-replica batch x replicas x "
      "--grad_accum_steps (RoBERTa: 8192).", check=POSITIVE)
  input_lanes: int = option(
      8, "Lanes of the training stream: lane l reads train shards l, l + L, ... and every "
      "step takes --batch_size / L sequences of each, so that each of W workers reads only "
      "its L/W lanes (when W divides L). The run uses the largest L <= this that divides "
      "--batch_size and the number of train shards; it is fixed for the run (config.json "
      "records it, a resume keeps it; 1: the stream before lanes).", check=POSITIVE)


@dataclasses.dataclass(frozen=True)
class OptimizerOptions:
  """OPTIMIZER: AdamW (optimizer.adamw), the schedule's peak and warmup (--warmup_steps:
  pretraining's, --warmup_ratio: fine-tuning's; each task builds its schedule from its own), and
  the update's clipping and accumulation (the train step's StepConfig)."""
  optimizer: str = option(
      "adamw", "adamw: AdamW (RoBERTa's). stable_adamw: AdamW with per-tensor update clipping "
      "(ModernBERT's StableAdamW: each tensor's rate divided by max(1, RMS of g / sqrt(v_hat)); "
      "docs/schedules.md). Both skip weight decay on biases and norms.",
      choices=("adamw", "stable_adamw"))
  learning_rate: float = option(
      6e-4, "Peak learning rate, reached after --warmup_steps (RoBERTa base: 6e-4 at 8K "
      "batch; large: 4e-4).", check=POSITIVE)
  warmup_steps: int = option(
      100, "Steps of linear warmup from 0 to --learning_rate; then linear decay to 0 at "
      "--train_steps.")
  warmup_ratio: float = option(
      0.06, "Fraction of the training steps with linear warmup from 0 to the learning "
      "rate; then linear decay to 0 (the paper: 6%).",
      check=FRACTION)
  weight_decay: float = option(
      0.01, "AdamW decoupled weight decay (not on LayerNorm or biases).")
  adam_beta1: float = option(
      0.9, "AdamW beta1, the first-moment decay (RoBERTa: 0.9).")
  adam_beta2: float = option(
      0.98, "AdamW beta2 (RoBERTa: 0.98 for stability with large batches).")
  adam_epsilon: float = option(
      1e-6, "AdamW epsilon (RoBERTa: 1e-6, for stability with large batches; keras' "
      "default is 1e-7).")
  clip_norm: float = option(
      0.0, "Global gradient-norm clipping; 0 disables (fairseq's default).",
      check=NON_NEGATIVE)
  grad_accum_steps: int = option(
      1, "Micro-batches accumulated per update on each replica: --batch_size is the "
      "global batch, split into this many.", check=POSITIVE)


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
  """RUNTIME: precision, distribution, seeds, determinism, XLA."""
  precision: str = option(
      "float32", "Compute precision; variables stay float32. fp16 uses dynamic loss "
      "scaling.", choices=PRECISIONS)
  strategy: str = option(
      "auto", "tf.distribute strategy. auto: mirrored with more than one GPU, else "
      "default; multi_worker reads TF_CONFIG.", choices=STRATEGIES)
  peer_timeout: int = option(
      600, "--strategy=multi_worker: seconds to wait for every TF_CONFIG worker to start "
      "before giving up with an error naming the missing ones (SIGTERM/Ctrl-C stop the wait).",
      check=POSITIVE)
  tpu: str = option(
      "", "TPU name or grpc:// address for --strategy=tpu (empty: the local TPU).")
  cpu_replicas: int = option(
      1, "Split the CPU into this many logical devices (to run --strategy=mirrored "
      "without GPUs, for testing).")
  seed: int = option(
      0, "Seed for init, shuffling, masking and dropout.")
  deterministic: bool = option(
      False, "Enable TF op determinism (slower; makes a run repeatable bit for bit on "
      "the same machine).")
  jit_compile: bool = option(
      False, "XLA-compile each replica's forward + backward pass (faster on GPU/TPU; on "
      "CPU oneDNN without XLA is faster).")


@dataclasses.dataclass(frozen=True)
class LoopOptions:
  """LOOP: the cadence of logs, evals and checkpoints (pretraining's), the bad-step stop (both)."""
  log_every: int = option(
      100, "Steps between console lines and train summaries.", check=POSITIVE)
  eval_every: int = option(
      0, "Steps between evals (0: start and end only).", check=NON_NEGATIVE)
  eval_steps: int = option(
      0, "Eval batches of --batch_size / --grad_accum_steps sequences (0: the whole eval "
      "split).", check=NON_NEGATIVE)
  checkpoint_every: int = option(
      1000, "Steps between checkpoints (one is also written at the end and on SIGTERM).",
      check=POSITIVE)
  keep_checkpoints: int = option(
      3, "Newest checkpoints kept in --model_dir; older ones are deleted.",
      check=POSITIVE)
  max_bad_steps: int = option(
      20, "Non-finite steps in a row before the run restores the last good checkpoint "
      "and stops.", check=POSITIVE)


GROUPS = {"model": ModelOptions, "data": DataOptions, "optimizer": OptimizerOptions,
          "runtime": RuntimeOptions, "loop": LoopOptions}
