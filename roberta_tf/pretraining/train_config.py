"""The resolved configuration of a pretraining run (what --flags become; saved in config.json)."""

from __future__ import annotations

import dataclasses

from roberta_tf.common import files
from roberta_tf.common.option_groups import (
  PRECISIONS,
  DataOptions,
  LoopOptions,
  ModelOptions,
  OptimizerOptions,
  RuntimeOptions,
)
from roberta_tf.common.options import (
  FRACTION,
  NON_NEGATIVE,
  POSITIVE,
  GroupedConfig,
  Range,
  check_options,
  nested,
  option,
  redeclare,
)

# --schedule's choices (training/schedule.py builds them; its DECAY_SHAPES are --decay_shape's).
SCHEDULES = ("linear", "wsd")
DECAY_SHAPES = ("linear", "1-sqrt")


@dataclasses.dataclass(frozen=True)
class TrainRuntime(RuntimeOptions):
  """RUNTIME as pretraining offers it: --precision may also be auto (precision_choice.py)."""
  precision: str = redeclare(
      RuntimeOptions, "precision", choices=(*PRECISIONS, "auto"),
      help="Compute precision; variables stay float32. fp16 uses dynamic loss scaling. auto: "
      "time float32 and mixed_bfloat16 for a few steps of this model at start and train in "
      "the faster (cached per machine and shape; a resumed run keeps its recorded precision).")


@dataclasses.dataclass
class TrainConfig(GroupedConfig):
  """Everything a pretraining run needs besides the model config: each option is also the
  binary's flag of the same name, with this help (roberta_tf/common/options.py). The options
  fine-tuning shares live in the nested groups declared in roberta_tf/common/option_groups.py
  (`cfg.model`, `cfg.data`, `cfg.optimizer`, `cfg.runtime`, `cfg.loop`; all of their options
  are flags of train but fine-tuning's --warmup_ratio); the rest are pretraining's own fields.
  Built and changed by flat option names: TrainConfig.from_dict({...}), cfg.replace(...);
  to_dict() is config.json's "training"."""
  model: ModelOptions = nested(ModelOptions)
  train_data: str = option(
      help="Shard directory written by data_prep.build_shards (its 'train' split is read).",
      path=True)
  eval_data: str = option(
      "", "Shard directory whose 'validation' split is the held-out set (usually the same as "
      "--train_data). Empty: no eval.", path=True)
  new_token_init: str = option(
      "mean", "With --init_from and shards of a grown vocabulary (data_prep.train_tokenizer "
      "--extend_from): how each new token's embedding row (also the tied decoder's) and decoder "
      "bias start. mean: the mean of the rows (and biases) of the old pieces that spell it; "
      "normal: N(0, the model's initializer_range), bias 0.", choices=("mean", "normal"))
  # Data and masking (must match data generation: max_seq_len <= the shards' max_seq_len).
  max_predictions_per_seq: int = option(
      0, "Prediction slots per sequence; 0 derives it from --max_seq_len and --mask_rate with "
      "headroom.")
  mask_rate: float = option(
      0.0, "The mask rate: fraction of non-special tokens selected for prediction (of them "
      "--mask_token_prob become <mask>, --random_token_prob a random token). 0: the model "
      "family's (roberta 0.15, as RoBERTa; modernbert 0.3, as ModernBERT). The held-out "
      "evaluation masks 0.15 whatever the rate, so runs at different rates compare.",
      check=Range(lambda v: 0 <= v < 1, "in [0, 1)"))
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
      "and parity checks).", check=NON_NEGATIVE)
  skip_corrupt_shards: bool = option(
      False, "Skip (and count) corrupt shards instead of failing.")
  # Batch and optimization.
  data: DataOptions = nested(DataOptions)  # --max_seq_len, --batch_size, --input_lanes
  # Pretraining's schedule is --warmup_steps (fine-tuning's is --warmup_ratio).
  optimizer: OptimizerOptions = nested(OptimizerOptions, omit=("warmup_ratio",))
  train_steps: int = option(
      1000, "Optimizer updates; the LR reaches 0 here.", check=POSITIVE)
  train_minutes: float = option(
      0.0, "A time budget: stop after this many minutes of training (the loop's wall clock, "
      "summed over resumes) with a final checkpoint and eval. The learning rate's warmup and "
      "decay then follow the elapsed share of the budget (the warmup's share: --warmup_steps / "
      "--train_steps), and --train_steps no longer ends the run. 0: no budget.",
      check=NON_NEGATIVE)
  # The learning rate after the warmup (docs/schedules.md).
  schedule: str = option(
      "linear", "The learning rate after the warmup. linear: RoBERTa's linear decay to 0 at "
      "--train_steps (or at the end of --train_minutes). wsd: warmup-stable-decay, the peak held, "
      "then a decay of --decay_steps (or --decay_fraction) of --decay_shape down to "
      "--decay_floor; a stable phase's checkpoint can be decayed later (--decay_from).",
      choices=SCHEDULES)
  decay_steps: int = option(
      0, "--schedule=wsd: the decay's updates, the run's last (a --decay_from branch: its "
      "whole run). 0: --decay_fraction of --train_steps.", check=NON_NEGATIVE)
  decay_fraction: float = option(
      0.0, "--schedule=wsd: the decay's share of --train_steps, or with --train_minutes of the "
      "time budget (its last share; --decay_steps / --train_steps when that is given). 0 and "
      "--decay_steps 0: no decay, the peak holds to the end (a stable phase to branch from).",
      check=FRACTION)
  decay_shape: str = option(
      "linear", "--schedule=wsd: the decay's shape. linear, or 1-sqrt (ModernBERT's: the rate "
      "falls with the square root of the decay's share done).", choices=DECAY_SHAPES)
  decay_floor: float = option(
      0.0, "--schedule=wsd: the rate the decay ends at, as a fraction of --learning_rate "
      "(ModernBERT: 0.001).", check=FRACTION)
  decay_from: str = option(
      "", "A decay branch: a checkpoint (MODEL_DIR/ckpt-N) or a model dir (its newest) in the "
      "stable phase of a --schedule=wsd run. This run takes its whole training state (weights, "
      "the optimizer's moments and step, the data position, the dropout RNG) into the new "
      "--model_dir and trains only the decay: --decay_steps updates, so --train_steps becomes "
      "N + --decay_steps. Needs --schedule=wsd and the source run's data, batch and seed flags "
      "(a difference is named). Resuming the branch's model dir goes on from its own "
      "checkpoints.", path=True)
  # The architecture of a new model: the family's preset (--config), shaped by its fields.
  family: str = option(
      "roberta", "Model family of a preset --config (models/registry.py): roberta, or "
      "modernbert (rotary, alternating local/global attention, GeGLU; "
      "models/modernbert/). A JSON --config's \"family\" and --init_from's own win.",
      choices=("roberta", "modernbert"))
  model_option: tuple[str, ...] = option(
      (), "FIELD=VALUE set on the new model's config (a preset or JSON --config), checked by "
      "its family's config class; once per field. RoBERTa's budget-recipe options: "
      "pre_layer_norm=true (pre-LN layers, HF's roberta-prelayernorm), use_bias=false "
      "(Cramming's no linear biases), gated_ffn=true (GEGLU feed-forward), type_vocab_size=0 "
      "(fairseq's exact shape, without the preset's one learned token-type row: "
      "docs/learning_parity.md). Not with --init_from (it keeps its architecture).",
      repeated=True)
  runtime: TrainRuntime = nested(TrainRuntime)  # precision, distribution, seeds, determinism
  loop: LoopOptions = nested(LoopOptions)  # log, eval and checkpoint cadence; the bad-step stop
  peak_flops: float = option(
      0.0, "Peak FLOP/s of one replica, for MFU. 0: measured at start, a 2048^3 matmul in the "
      "precision trained in on the run's device (cached per machine; the log says the figure).")

  def __post_init__(self):
    # A record (config.json's "training", to_dict) holds the list; the config, the tuple.
    self.model_option = tuple(self.model_option)

  def validate(self) -> None:
    """Raises ValueError naming the flag for inconsistent settings: each option's own checks
    (options.check_options: required, choices, range, path), then the settings that depend on
    each other."""
    check_options(self)
    warmup = self.optimizer.warmup_steps
    checks = [
        (0 <= warmup <= self.train_steps,
         f"--warmup_steps={warmup} must be in [0, --train_steps={self.train_steps}]"),
        (self.mask_token_prob + self.random_token_prob <= 1,
         "--mask_token_prob + --random_token_prob must be <= 1"),
        (not (self.train_minutes and warmup >= self.train_steps),
         f"--train_minutes: the warmup's share --warmup_steps / --train_steps = "
         f"{warmup}/{self.train_steps} must be below 1"),
        (not (self.train_minutes and self.runtime.strategy == "multi_worker"),
         "--train_minutes with --strategy=multi_worker is not supported: each worker's clock "
         "would end the run at a different update"),

    ]
    checks += self._schedule_checks()
    model_dir = self.model.model_dir
    checks.append((not files.exists(model_dir) or files.isdir(model_dir),
                   f"--model_dir={model_dir} exists and is not a directory"))
    for ok, message in checks:
      if not ok:
        raise ValueError(message)

  def _schedule_checks(self) -> list[tuple[bool, str]]:
    """validate()'s checks of --schedule and the decay's flags."""
    wsd_only = [f"--{name}" for name, default in (
        ("decay_steps", 0), ("decay_fraction", 0.0), ("decay_shape", "linear"),
        ("decay_floor", 0.0), ("decay_from", "")) if getattr(self, name) != default]
    warmup = self.optimizer.warmup_steps
    return [
        (self.schedule == "wsd" or not wsd_only,
         f"{', '.join(wsd_only)} set the decay of --schedule=wsd; the run's is "
         f"--schedule={self.schedule}"),
        (not (self.decay_steps and self.decay_fraction),
         "--decay_steps and --decay_fraction both set the decay's length: give one"),
        (self.decay_from or self.train_minutes or warmup + self.decay_length() <=
         self.train_steps,
         f"--warmup_steps={warmup} + the decay's {self.decay_length()} updates must fit in "
         f"--train_steps={self.train_steps}"),
        (not (self.train_minutes and self.decay_share() + warmup / self.train_steps > 1),
         f"--train_minutes: the warmup's share {warmup}/{self.train_steps} + the decay's "
         f"share {self.decay_share():g} must be at most 1"),
        (not self.decay_from or (self.decay_steps and not self.train_minutes),
         "--decay_from branches a decay of --decay_steps updates (> 0) from its checkpoint "
         "(not with --train_minutes)"),
    ]

  def decay_length(self) -> int:
    """--schedule=wsd's decay in updates: --decay_steps, else --decay_fraction x
    --train_steps (rounded); 0: no decay."""
    return self.decay_steps or round(self.decay_fraction * self.train_steps)

  def decay_share(self) -> float:
    """--schedule=wsd's decay as a share of the run (what a --train_minutes budget decays
    over): --decay_fraction, else --decay_steps / --train_steps."""
    return self.decay_fraction or self.decay_steps / self.train_steps

  def learning_rate_schedule(self):
    """The run's learning-rate schedule (training/schedule.py), of the update count or, with
    --train_minutes, of the budget's elapsed share (a BudgetSchedule: create it under the
    strategy's scope); the warmup's share of a budget is --warmup_steps / --train_steps."""
    # Imported here: this module stays TensorFlow-free, so `train --help` is instant.
    from roberta_tf.training import schedule as lib  # pylint: disable=import-outside-toplevel
    peak, warmup = self.optimizer.learning_rate, self.optimizer.warmup_steps
    wsd = self.schedule == "wsd"
    if self.train_minutes > 0:
      return lib.BudgetSchedule(peak, warmup / self.train_steps,
                                decay_fraction=self.decay_share() if wsd else None,
                                shape=self.decay_shape, decay_floor=self.decay_floor)
    if wsd:
      return lib.WarmupStableDecay(peak, warmup, self.train_steps, self.decay_length(),
                                   shape=self.decay_shape, decay_floor=self.decay_floor)
    return lib.WarmupLinearDecay(peak, warmup, self.train_steps)

  @classmethod
  def from_record(cls, training: dict) -> TrainConfig:
    """The config config.json's "training" section records: an option since renamed under its
    new name (--mask_prob: --mask_rate), one since removed dropped (as it always was)."""
    if "mask_prob" in training:  # --mask_rate's name until issue 62
      training = {"mask_rate": training["mask_prob"], **training}
    return cls.from_dict(training, ignore_unknown=True)

  def for_family(self, family) -> TrainConfig:
    """This config with --mask_rate 0 resolved to `family`'s rate (models/registry.Family):
    what config.json records and the masking reads."""
    return self if self.mask_rate else self.replace(mask_rate=family.mask_rate)

  def masking_config(self, evaluation_rate: float | None = None):
    """The pipeline's MaskingConfig: training's (--mask_rate, resolved by `for_family`), or
    with `evaluation_rate` the held-out evaluation's (registry.EVAL_MASK_RATE; its prediction
    slots derived from that rate unless --max_predictions_per_seq fixes them)."""
    if not (evaluation_rate or self.mask_rate):
      raise ValueError("--mask_rate 0 is the model family's rate: call for_family first")
    # Imported here: this module stays TensorFlow-free, so `train --help` is instant.
    from roberta_tf.data.masking import MaskingConfig  # pylint: disable=import-outside-toplevel
    return MaskingConfig(
        mask_prob=evaluation_rate or self.mask_rate, mask_token_prob=self.mask_token_prob,
        random_token_prob=self.random_token_prob, whole_word=self.whole_word_masking,
        static=self.masking == "static", dupe_factor=self.dupe_factor,
        max_predictions_per_seq=self.max_predictions_per_seq or None)


def write_config_json(model_dir: str, model_config: dict, train_config: TrainConfig | None,
                      extra: dict | None = None) -> str:
  """Writes model_dir/config.json: {"model": ..., "training": ..., ...} atomically."""
  # Imported here: the flags' module stays free of TensorFlow (models/ imports it).
  from roberta_tf.models.model_dir import ModelDir  # pylint: disable=import-outside-toplevel
  doc = {"model": model_config}
  if train_config is not None:
    doc["training"] = train_config.to_dict()
  doc.update(extra or {})
  return ModelDir(model_dir).write(doc)
