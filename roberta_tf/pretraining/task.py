"""Pretraining's task (Model Garden's *task*; training/task.py's `Task`): the model config, the
model, AdamW and its schedule, the train step's settings, the MLM objective, and the synthetic
MLM batch `--precision=auto` times (training/precision_probe.py). What the loop's events mean for
pretraining is events.py's `PretrainingEvents`; run.py wires both to the loop, inputs.py builds
the datasets and model_dir_setup.py the model dir.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from keras.optimizers.schedules import LearningRateSchedule

from roberta_tf import models
from roberta_tf.data import packings
from roberta_tf.models import registry
from roberta_tf.pretraining import inputs, vocab_checks
from roberta_tf.pretraining.objective import MlmObjective
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.tokenization.vocab_growth import VocabGrowth
from roberta_tf.training import model_config as model_config_lib
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import stable_adamw
from roberta_tf.training.train_step import StepConfig


def uses_next_sentence(info: dict) -> bool:
  """Shards of a pair packing (the NSP input-format ablation): token types and an NSP head."""
  return info.get("packing") in packings.PAIR_PACKINGS

def model_config_for(cfg: TrainConfig, info: dict) -> models.RobertaConfig:
  """The model config (`model_config_and_growth`'s)."""
  return model_config_and_growth(cfg, info)[0]

def model_config_and_growth(cfg: TrainConfig, info: dict
                            ) -> tuple[models.RobertaConfig, VocabGrowth | None]:
  """The model config (training/model_config.py's `resolve`: --init_from's, else the preset/JSON,
  a preset sized to the shards' vocabulary and special ids), adapted to the shards, and the
  growth plan of --init_from's vocabulary to the shards' (None: no growth). The plan is made
  once, here; run.py hands it to the weight copy.

  Shards of a pair packing set BERT's two token types and NSP head on a preset/JSON model
  (a JSON with an NSP head needs pair shards); an --init_from model must already have them
  exactly when the shards are pairs, and grows to the shards' vocabulary and length
  (`grown_for_shards`).
  """
  pairs = uses_next_sentence(info)
  plan = None
  model_config = model_config_lib.resolve(
      cfg.model, family=cfg.family, model_options=cfg.model_option,
      vocab_size=info["vocab"]["size"], max_seq_len=cfg.data.max_seq_len,
      pad_id=info["special_ids"]["pad"], bos_id=info["special_ids"]["bos"],
      eos_id=info["special_ids"]["eos"])
  nsp = getattr(model_config, "next_sentence_head", False)
  if pairs and not registry.family_of(model_config).position_table:
    raise ValueError(f"--train_data={cfg.train_data!r} is {info.get('packing')!r} shards (the "
                     f"NSP ablation's): a {model_config.family} model has no token types or "
                     "NSP head; use block-packed shards")
  if cfg.model.init_from:
    if nsp != pairs:
      raise ValueError(
          f"--init_from={cfg.model.init_from!r} "
          f"{'has' if nsp else 'has no'}"
          f" NSP head, but --train_data={cfg.train_data!r} is {info.get('packing')!r} shards: "
          "the pair packings (NSP) and the block packings cannot continue each other's models")
    model_config, plan = grown_for_shards(cfg, info, model_config)
  elif pairs:
    model_config = model_config.replace(type_vocab_size=2, next_sentence_head=True)
  if getattr(model_config, "next_sentence_head", False) and not pairs:
    raise ValueError(f"--config={cfg.model.config!r} has next_sentence_head, but --train_data="
                     f"{cfg.train_data!r} is {info.get('packing')!r} shards with no "
                     "next-sentence labels: use segment_pair / sentence_pair shards")
  return model_config, plan

def grown_for_shards(cfg: TrainConfig, info: dict, model_config: models.RobertaConfig
                     ) -> tuple[models.RobertaConfig, VocabGrowth | None]:
  """--init_from's config grown to what the shards need (docs/domain_adaptation.md), and the
  vocabulary's growth plan (None: the same vocabulary).

  - Shards of the model's vocabulary (by content), or of a larger one that extends it (every
    one of the model's tokens at its id in the shards' vocab.json: `data_prep.train_tokenizer
    --extend_from`): the vocab_size grows to the shards' (run.py then copies the weights with
    the new rows: models/growth.py). Any other vocabulary is refused (vocab_checks.py).
  - Shards of longer sequences than the model's position table holds: the table grows to
    --max_seq_len + 2 rows (Longformer's row copies: models/roberta/position_growth.py). Shards that
    fit the table leave it as it is, whatever --max_seq_len says.

  Raises:
    ValueError / vocab_growth.VocabGrowthError naming the flags: another vocabulary than the
    model's, smaller or not extending it, or vocab files to compare that are missing.
  """
  plan = vocab_checks.init_from_plan(cfg, info, model_config.vocab_size)
  if plan is not None:
    model_config = model_config.replace(vocab_size=plan.new_size)
  if not registry.family_of(model_config).position_table:
    # No position table to grow (ModernBERT's rotary positions): max_seq_len only bounds the
    # inputs and follows --max_seq_len; no weight changes (growth.differences ignores it).
    if cfg.data.max_seq_len != model_config.max_seq_len:
      model_config = model_config.replace(max_seq_len=cfg.data.max_seq_len)
    return model_config, plan
  if info["max_seq_len"] > model_config.max_seq_len:
    if cfg.data.max_seq_len < info["max_seq_len"]:
      raise ValueError(f"--max_seq_len={cfg.data.max_seq_len} is below the shards' max_seq_len "
                       f"{info['max_seq_len']} ({cfg.train_data})")
    model_config = model_config.replace(max_seq_len=cfg.data.max_seq_len)
  return model_config, plan

class PretrainingTask:
  """Pretraining as the loop's task: what the train step runs, built from the run's config,
  strategy and model config (`build_train_step(task, strategy)`, training/task.py)."""

  def __init__(self, cfg: TrainConfig, strategy: tf.distribute.Strategy,
               model_config: models.RobertaConfig):
    # --mask_rate 0 is the family's rate (train_config.py's for_family).
    cfg = cfg.for_family(registry.family_of(model_config))
    self.cfg, self.strategy, self.model_config = cfg, strategy, model_config
    self.per_replica = inputs.per_replica_batch(cfg, strategy)  # refuses an unsplittable batch
    # The learning-rate schedule build_optimizer made (run.py hands a BudgetSchedule's fraction
    # to the loop, which sets it); None before.
    self.schedule: LearningRateSchedule | None = None

  def build_model(self):
    return models.build_pretrainer(self.model_config, dtype=self.cfg.runtime.precision)

  def build_optimizer(self, model):
    """AdamW, or StableAdamW (--optimizer; --adam_*, --weight_decay), on the run's schedule
    (--schedule: after --warmup_steps linear decay to 0 at --train_steps, or
    warmup-stable-decay), or over the elapsed share of --train_minutes (the warmup's share:
    --warmup_steps / --train_steps): TrainConfig.learning_rate_schedule."""
    options = self.cfg.optimizer
    self.schedule = self.cfg.learning_rate_schedule()
    build = (stable_adamw.stable_adamw if options.optimizer == "stable_adamw" else
             optimizer_lib.adamw)
    # Not fused=True under mixed precision either: XLA-fusing each variable's update measured
    # no faster on CPU (docs/performance_training.md).
    return build(options, self.schedule, model.trainable_variables)

  def step_config(self) -> StepConfig:
    cfg = self.cfg
    predictions = cfg.masking_config().resolved_max_predictions(cfg.data.max_seq_len)
    optimizer, runtime = cfg.optimizer, cfg.runtime
    return StepConfig(
        grad_accum_steps=optimizer.grad_accum_steps, clip_norm=optimizer.clip_norm,
        precision=runtime.precision, norm_per_micro_batch=float(self.per_replica * predictions),
        jit_compile=runtime.jit_compile,
        sequences_per_round=self.per_replica * self.strategy.num_replicas_in_sync)

  def objective(self) -> MlmObjective:
    return MlmObjective(next_sentence=getattr(self.model_config, "next_sentence_head", False))


def synthetic_batch(batch_size: int, seq_len: int, max_predictions: int, vocab_size: int,
                    seed: int = 0) -> dict[str, np.ndarray]:
  """A pretraining micro-batch of the pipeline's format with random ids (every position real,
  15% of them predicted), what `--precision=auto` times (precision_choice.py): input_ids /
  padding_mask int32 [B, S], mask_positions / mask_ids int32 [B, P], mask_weights float32
  [B, P]."""
  rng = np.random.default_rng(seed)
  ids = rng.integers(5, vocab_size, size=(batch_size, seq_len), dtype=np.int32)
  predicted = max(1, min(max_predictions, round(0.15 * seq_len)))
  positions = np.sort(np.stack([rng.choice(np.arange(1, seq_len - 1), max_predictions,
                                           replace=False) for _ in range(batch_size)]), axis=1)
  weights = np.zeros((batch_size, max_predictions), np.float32)
  weights[:, :predicted] = 1.0
  return {"input_ids": ids, "padding_mask": np.ones_like(ids),
          "mask_positions": positions.astype(np.int32),
          "mask_ids": np.take_along_axis(ids, positions, axis=1),
          "mask_weights": weights}
