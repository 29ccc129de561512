"""The options of pretraining (roberta_tf.train) and fine-tuning (roberta_tf.finetune) that come
in groups: each group a frozen dataclass (ModelOptions, DataOptions, OptimizerOptions,
RuntimeOptions, LoopOptions) whose fields declare its options once, with their type, default,
help, choices and check. Both configs hold the groups as nested fields beside their own options:

    @dataclasses.dataclass(frozen=True)
    class FinetuneOptimizer(OptimizerOptions):
      learning_rate: float = redeclare(OptimizerOptions, "learning_rate", default=1e-5, ...)

    @dataclasses.dataclass
    class FinetuneConfig(GroupedConfig):
      ...
      optimizer: FinetuneOptimizer = nested(FinetuneOptimizer, omit=("warmup_steps",))

so code reads `cfg.optimizer.clip_norm`, `cfg.model.model_dir`, `cfg.runtime.seed`, and hands a
group whole to what uses it (`optimizer.adamw(cfg.optimizer, schedule, variables)`,
`model_config.resolve(cfg.model, ...)`).

Where a task legitimately differs (the paper fine-tunes at 1e-5 and pretrains at 6e-4;
fine-tuning's max_seq_len 0 means "the pretrained model's"; pretraining's --precision=auto), the
config holds a subclass of the group that redeclares the option with redeclare(): only what
differs (default, help, choices or check) is said there, the rest stays this module's. Defaults
and help here are pretraining's where the two differ. A group option a binary does not offer
(fine-tuning's --tpu, --input_lanes, --warmup_steps, the LOOP cadence) is left out with
options.nested(omit=...): no flag, no name of that config, the group's default in its group.

The flags stay flat: a group's options are flags under their own names (options.define_flags
walks the nested groups), with the names, defaults and help they always had. So do the names
callers use (GroupedConfig): `TrainConfig.from_dict({"model_dir": ..., "clip_norm": 1.0})`,
`cfg.replace(learning_rate=...)` route each name to its group, and `cfg.to_dict()` is the flat
{flag name: value} that config.json's "training" section and fine-tuning's sweep.json record
(records from before the nesting read back unchanged).

Groups: MODEL (the model dir and the model), DATA (sequence length and batch), OPTIMIZER, RUNTIME
(precision, distribution, seeds, determinism) and LOOP (log, eval and checkpoint cadence, the
non-finite step limit). An option of one binary only that is not of these kinds (masking,
GLUE presets, QA windows...) is declared in its config with options.option().

TensorFlow-free: `train --help` and `finetune --help` import it (strategy.py imports STRATEGIES).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from roberta_tf.common import options
from roberta_tf.common.options import NON_NEGATIVE, POSITIVE, REQUIRED, Check

# Keras dtype policies: variables stay float32; fp16 adds dynamic loss scaling (train_step.py).
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# tf.distribute strategies (training/strategy.py's make_strategy builds them).
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")


def declare(default: Any = dataclasses.MISSING, help: str = "",  # pylint: disable=redefined-builtin
            choices: tuple[str, ...] | None = None, check: Check | None = None):
  """A group dataclass's field declaring one option (its type is the field's annotation)."""
  return dataclasses.field(default=default,
                           metadata={"help": help, "choices": choices, "check": check})


@dataclasses.dataclass(frozen=True)
class ModelOptions:
  """MODEL: where the run writes, and the model it starts from (training.model_config.resolve)."""
  model_dir: str = declare(
      help="Where checkpoints, TensorBoard logs (train/, eval/) and config.json go. An "
      "existing checkpoint there is resumed.", check=REQUIRED)
  overwrite: bool = declare(
      False, "Start over: delete --model_dir's checkpoints and TensorBoard logs first. "
      "Without it a model dir with checkpoints is resumed (from the newest complete one), "
      "never overwritten.")
  init_from: str = declare(
      "", "Model dir (imported or trained) whose weights and config start a new run: "
      "continued pretraining. Shards of a grown vocabulary (train_tokenizer --extend_from) "
      "grow its token embedding, tied decoder and bias; shards longer than its position table "
      "grow the table to --max_seq_len (docs/domain_adaptation.md).")
  config: str = declare(
      "small", "Model size preset (tiny, small, medium, base, large) or a RobertaConfig "
      "JSON file, for a randomly initialized model. Ignored with --init_from.")
  dropout: float = declare(
      -1.0, "Override the model's dropout (and attention dropout); < 0 keeps the "
      "model config's.")


@dataclasses.dataclass(frozen=True)
class DataOptions:
  """DATA: sequence length, the global batch, the training stream's lanes (pretraining's)."""
  max_seq_len: int = declare(
      512, "Padded sequence length; must be >= the shards' max_seq_len (must match data "
      "generation) and fit the position table.", check=options.at_least(8))
  batch_size: int = declare(
      256, "GLOBAL sequences per optimizer update = per-replica batch x replicas x "
      "--grad_accum_steps (RoBERTa: 8192).", check=POSITIVE)
  input_lanes: int = declare(
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
  learning_rate: float = declare(
      6e-4, "Peak learning rate, reached after --warmup_steps (RoBERTa base: 6e-4 at 8K "
      "batch; large: 4e-4).", check=POSITIVE)
  warmup_steps: int = declare(
      100, "Steps of linear warmup from 0 to --learning_rate; then linear decay to 0 at "
      "--train_steps.")
  warmup_ratio: float = declare(
      0.06, "Fraction of the training steps with linear warmup from 0 to the learning "
      "rate; then linear decay to 0 (the paper: 6%).",
      check=Check(lambda v: 0 <= v < 1, "--{name} must be in [0, 1), got {value}"))
  weight_decay: float = declare(
      0.01, "AdamW decoupled weight decay (not on LayerNorm or biases).")
  adam_beta1: float = declare(
      0.9, "AdamW beta1, the first-moment decay (RoBERTa: 0.9).")
  adam_beta2: float = declare(
      0.98, "AdamW beta2 (RoBERTa: 0.98 for stability with large batches).")
  adam_epsilon: float = declare(
      1e-6, "AdamW epsilon (RoBERTa: 1e-6, for stability with large batches; keras' "
      "default is 1e-7).")
  clip_norm: float = declare(
      0.0, "Global gradient-norm clipping; 0 disables (fairseq's default).",
      check=NON_NEGATIVE)
  grad_accum_steps: int = declare(
      1, "Micro-batches accumulated per update on each replica: --batch_size is the "
      "global batch, split into this many.", check=POSITIVE)


@dataclasses.dataclass(frozen=True)
class RuntimeOptions:
  """RUNTIME: precision, distribution, seeds, determinism, XLA."""
  precision: str = declare(
      "float32", "Compute precision; variables stay float32. fp16 uses dynamic loss "
      "scaling.", choices=PRECISIONS)
  strategy: str = declare(
      "auto", "tf.distribute strategy. auto: mirrored with more than one GPU, else "
      "default; multi_worker reads TF_CONFIG.", choices=STRATEGIES)
  peer_timeout: int = declare(
      600, "--strategy=multi_worker: seconds to wait for every TF_CONFIG worker to start "
      "before giving up with an error naming the missing ones (SIGTERM/Ctrl-C stop the wait).",
      check=POSITIVE)
  tpu: str = declare(
      "", "TPU name or grpc:// address for --strategy=tpu (empty: the local TPU).")
  cpu_replicas: int = declare(
      1, "Split the CPU into this many logical devices (to run --strategy=mirrored "
      "without GPUs, for testing).")
  seed: int = declare(
      0, "Seed for init, shuffling, masking and dropout.")
  deterministic: bool = declare(
      False, "Enable TF op determinism (slower; makes a run repeatable bit for bit on "
      "the same machine).")
  jit_compile: bool = declare(
      False, "XLA-compile each replica's forward + backward pass (faster on GPU/TPU; on "
      "CPU oneDNN without XLA is faster).")


@dataclasses.dataclass(frozen=True)
class LoopOptions:
  """LOOP: the cadence of logs, evals and checkpoints (pretraining's), the bad-step stop (both)."""
  log_every: int = declare(
      100, "Steps between console lines and train summaries.", check=POSITIVE)
  eval_every: int = declare(
      0, "Steps between evals (0: start and end only).", check=NON_NEGATIVE)
  eval_steps: int = declare(
      0, "Eval batches of --batch_size / --grad_accum_steps sequences (0: the whole eval "
      "split).", check=NON_NEGATIVE)
  checkpoint_every: int = declare(
      1000, "Steps between checkpoints (one is also written at the end and on SIGTERM).",
      check=POSITIVE)
  keep_checkpoints: int = declare(
      3, "Newest checkpoints kept in --model_dir; older ones are deleted.",
      check=POSITIVE)
  max_bad_steps: int = declare(
      20, "Non-finite steps in a row before the run restores the last good checkpoint "
      "and stops.", check=POSITIVE)


GROUPS = {"model": ModelOptions, "data": DataOptions, "optimizer": OptimizerOptions,
          "runtime": RuntimeOptions, "loop": LoopOptions}
_DECLARED = ("help", "choices", "check")


def redeclare(group: type, name: str, **changes):
  """Option `name` of `group` (ModelOptions, ...) as declared there but for `changes` (default=,
  help=, choices=, check=; check=None drops the check): the field by which a config's subclass
  of the group says what differs for its binary."""
  declared = {f.name: f for f in dataclasses.fields(group)}[name]
  unknown = sorted(set(changes) - {"default", *_DECLARED})
  if unknown:
    raise TypeError(f"redeclare({group.__name__}, {name!r}): no such attribute {unknown}")
  values = {"default": declared.default, **{k: declared.metadata[k] for k in _DECLARED}}
  return declare(**{**values, **changes})


class GroupedConfig:
  """TrainConfig's and FinetuneConfig's names: their group options live in nested groups
  (cfg.optimizer.clip_norm), while callers, config.json and sweep.json name every option flat,
  by its flag's name."""

  @classmethod
  def from_dict(cls, values: dict[str, Any], *, ignore_unknown: bool = False):
    """The config of {option name: value} (a caller's, to_dict's, config.json's "training"); an
    option not given keeps its default. ValueError naming a name that is no option of the
    config, unless ignore_unknown (a record may hold an option since removed): it is dropped."""
    if ignore_unknown:
      known = {f.name for _, f in options.option_fields(cls)}
      values = {k: v for k, v in values.items() if k in known}
    return options.from_names(cls, values)

  def to_dict(self) -> dict[str, Any]:
    """{option name: value} of every option the config offers (its flags), lists for tuples:
    the flat record config.json's "training" and sweep.json keep (from_dict reads it back)."""
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in options.names_of(self).items()}

  def replace(self, **values):
    """A copy with the options named changed (`cfg.replace(learning_rate=1e-4, seed=1)`),
    each routed to its group; ValueError naming a name that is no option of the config."""
    return options.replace_names(self, **values)
