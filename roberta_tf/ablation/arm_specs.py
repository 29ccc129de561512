"""Arms written as text: `LABEL: --flag=value ...`, the built-in arms of the `modern` study and
the ones a user adds with `ablate --extra_arm`.

    "ModernBERT small, 30%: --family=modernbert --mask_rate=0.3"
    "RoBERTa tiny, 2x LR: --config=tiny --learning_rate=2e-3"

Everything after the label is `roberta_tf.train` flags on top of the study's base recipe (for
`modern`: flags/quickstart.flags). `--batch_size` and `--learning_rate` set the arm's batch and
peak rate (its nominal steps follow the batch, so the warmup keeps its share and the run as many
evals); the flags the runner sets itself (data, model dir, seed, budget) are refused.

TensorFlow-free.
"""

from __future__ import annotations

import shlex

# The flags every run gets from the runner: an arm that set them would not be the study's.
RUNNER_FLAGS = ("model_dir", "train_data", "eval_data", "seed", "train_minutes", "train_steps",
                "grad_accum_steps", "warmup_steps", "flagfile", "init_from", "overwrite")
MASK_FLAG = "--mask_rate"  # the training mask rate (evaluation masks 15% for every arm)


class ArmSpecError(ValueError):
  """A malformed arm spec (the message names the spec and what is wrong)."""


def parse(spec: str) -> tuple[str, dict[str, str], tuple[str, ...]]:
  """(label, {"batch_size"/"learning_rate": value given}, the other flags in order).

  Raises:
    ArmSpecError: no label, a token that is not `--name[=value]`, a flag the runner sets, or a
      --batch_size / --learning_rate that is not a positive number.
  """
  label, colon, rest = spec.partition(":")
  label = label.strip()
  if not label or (not colon and spec.strip().startswith("--")):
    raise ArmSpecError(f"arm {spec!r}: start with its label, 'LABEL: --flag=value ...'")
  try:
    tokens = shlex.split(rest)
  except ValueError as e:
    raise ArmSpecError(f"arm {label!r}: {e}") from None
  sizes, flags = {}, []
  for token in tokens:
    name, _, value = token[2:].partition("=")
    if not token.startswith("--") or not name:
      raise ArmSpecError(f"arm {label!r}: {token!r} is not a --flag[=value]")
    if name in RUNNER_FLAGS:
      raise ArmSpecError(f"arm {label!r}: --{name} is set by the study for every arm")
    if name in ("batch_size", "learning_rate"):
      try:
        number = int(value) if name == "batch_size" else float(value)
      except ValueError:
        number = 0
      if number <= 0:
        raise ArmSpecError(f"arm {label!r}: --{name}={value!r} must be a positive number")
      sizes[name] = value
    else:
      flags.append(token)
  return label, sizes, tuple(flags)


# The `modern` study (issue 62): the quickstart recipe against the modern choices one at a time
# and together, at equal wall clock. Each is quickstart.flags plus these flags.
BF16 = "--precision=mixed_bfloat16"  # 1.4x the quickstart's steps on an AVX512-BF16 CPU
_MB_TINY = f"--family=modernbert --config=tiny {MASK_FLAG}=0.3 {BF16}"
_WSD = "--schedule=wsd --decay_fraction=0.2 --decay_shape=1-sqrt"
MODERN_ARMS = (
    "quickstart (RoBERTa small, post-LN, 15%):",
    f"RoBERTa small, bf16: {BF16}",
    f"RoBERTa small, 30% masking: {MASK_FLAG}=0.3",
    "RoBERTa tiny (more steps): --config=tiny",
    f"RoBERTa tiny, 30%, bf16: --config=tiny {MASK_FLAG}=0.3 {BF16}",
    f"ModernBERT small, 30%: --family=modernbert {MASK_FLAG}=0.3",
    f"ModernBERT small, 30%, bf16: --family=modernbert {MASK_FLAG}=0.3 {BF16}",
    f"ModernBERT small, 15%, bf16: --family=modernbert {MASK_FLAG}=0.15 {BF16}",
    f"ModernBERT tiny, 30%, bf16: --family=modernbert --config=tiny {MASK_FLAG}=0.3 {BF16}",
    f"ModernBERT small, 30%, bf16, 2x peak LR: --family=modernbert {MASK_FLAG}=0.3 {BF16} "
    "--learning_rate=2e-3",
    f"ModernBERT small, 30%, bf16, half the batch: --family=modernbert {MASK_FLAG}=0.3 {BF16} "
    "--batch_size=8",
    # The training half of the modern recipe (docs/schedules.md), on ModernBERT tiny: ModernBERT's
    # warmup-stable-decay with a 1-sqrt decay over the budget's last 20%, its StableAdamW, and
    # a higher peak rate (pre-norm trains stably at one).
    f"ModernBERT tiny, 30%, bf16, 2x peak LR: {_MB_TINY} --learning_rate=2e-3",
    f"ModernBERT tiny, 30%, bf16, wsd: {_MB_TINY} {_WSD}",
    f"ModernBERT tiny, 30%, bf16, StableAdamW: {_MB_TINY} --optimizer=stable_adamw",
    f"ModernBERT tiny, 30%, bf16, wsd, StableAdamW, 2x peak LR: {_MB_TINY} {_WSD} "
    "--optimizer=stable_adamw --learning_rate=2e-3",
)
