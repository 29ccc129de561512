"""The options of pretraining (roberta_tf.train) and fine-tuning (roberta_tf.finetune) that come
in groups: each group a frozen dataclass (ModelOptions, DataOptions, OptimizerOptions,
RuntimeOptions, LoopOptions) whose fields declare its options once, with their type, default,
help, choices and check; both configs are composed from them:

    @dataclasses.dataclass
    class FinetuneConfig:
      ...
      learning_rate: float = use("learning_rate", default=1e-5, help="Peak learning rate ...")
      adam_beta2: float = use("adam_beta2")

      @property
      def optimizer(self) -> OptimizerOptions:
        return view(OptimizerOptions, self)

`use(name)` is the config's (flat) field of option `name` (an options.option(): the binary's flag
is made from it, and check_options() runs its check). Where a task legitimately differs (the
paper fine-tunes at 1e-5 and pretrains at 6e-4; fine-tuning's max_seq_len 0 means "the
pretrained model's"), the composing config overrides `default=`, `help=` or `check=` and the
option is still declared here only. Defaults and help here are pretraining's where the two differ.

The configs' fields stay flat: they are the flags, config.json's "training" keys and the
constructor's keywords, unchanged. Code reads a group option through its group
(`cfg.optimizer.clip_norm`, `cfg.model.model_dir`, `cfg.runtime.seed`; test_option_groups.py
checks that no flat read is left in roberta_tf/): `view(Group, config)` is the typed group of
a config's values, also handed whole to what uses it (`optimizer.adamw(cfg.optimizer,
schedule, variables)`, `model_config.resolve(cfg.model, ...)`).
A group option a config does not offer (fine-tuning's --tpu, --input_lanes) keeps the group's
default in the view.

Groups: MODEL (the model dir and the model), DATA (sequence length and batch), OPTIMIZER, RUNTIME
(precision, distribution, seeds, determinism) and LOOP (log, eval and checkpoint cadence, the
non-finite step limit). An option of one binary only that is not of these kinds (masking,
GLUE presets, QA windows...) is declared in its config with options.option().

TensorFlow-free: `train --help` and `finetune --help` import it (strategy.py imports STRATEGIES).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple, TypeVar

from roberta_tf.common import options
from roberta_tf.common.options import NON_NEGATIVE, POSITIVE, REQUIRED, Check

# Keras dtype policies: variables stay float32; fp16 adds dynamic loss scaling (train_step.py).
PRECISIONS = ("float32", "mixed_bfloat16", "mixed_float16")
# tf.distribute strategies (training/strategy.py's make_strategy builds them).
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu")


class Option(NamedTuple):
  """One option: its flag's type (the field's annotation: "int", "str", ...), default (MISSING:
  a field without one), help, choices and check (options.Check)."""
  type: str
  default: Any = dataclasses.MISSING
  help: str = ""
  choices: tuple[str, ...] | None = None
  check: Check | None = None


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
OPTIONS: dict[str, Option] = {}
GROUP_OF: dict[str, str] = {}
for _group, _cls in GROUPS.items():
  for _field in dataclasses.fields(_cls):
    assert _field.name not in OPTIONS, f"option {_field.name} is declared in two groups"
    OPTIONS[_field.name] = Option(_field.type, _field.default, _field.metadata["help"],
                                  _field.metadata["choices"], _field.metadata["check"])
    GROUP_OF[_field.name] = _group

_KEEP = object()


def use(name: str, *, default: Any = _KEEP, help: str | None = None,  # pylint: disable=redefined-builtin
        check: Check | None | object = _KEEP, choices: tuple[str, ...] | None = None):
  """The dataclass field of group option `name`, with the composing config's `default`, `help`,
  `check` (None: no check) or `choices` where they differ from the group's."""
  opt = OPTIONS[name]
  return options.option(
      opt.default if default is _KEEP else default, help or opt.help,
      choices=choices or opt.choices,
      check=opt.check if check is _KEEP else check, flag_type=opt.type,
      group=GROUP_OF[name])


Group = TypeVar("Group")


def view(group: type[Group], config) -> Group:
  """`group` (ModelOptions, OptimizerOptions, ...) of `config`'s values (a TrainConfig or
  FinetuneConfig): a group option the config has no field for keeps the group's default."""
  present = {f.name for f in dataclasses.fields(config)}
  return group(**{f.name: getattr(config, f.name) for f in dataclasses.fields(group)
                  if f.name in present})


class GroupViews:
  """The shared option groups of a config (TrainConfig, FinetuneConfig) as typed views:
  `cfg.optimizer` is its OptimizerOptions, and so on. Mixed into both configs."""

  @property
  def model(self) -> ModelOptions:
    return view(ModelOptions, self)

  @property
  def data(self) -> DataOptions:
    return view(DataOptions, self)

  @property
  def optimizer(self) -> OptimizerOptions:
    return view(OptimizerOptions, self)

  @property
  def runtime(self) -> RuntimeOptions:
    return view(RuntimeOptions, self)
