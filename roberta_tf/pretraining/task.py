"""Pretraining, whole (Model Garden's *task*; training/task.py's `Task`): the model config, the
model, AdamW, the train step's settings, the MLM objective, and what the loop's events mean for
pretraining (one stream of batches, log lines and train scalars, held-out MLM evals beside the
unigram baseline, checkpoints). run.py wires it to the loop; inputs.py builds its datasets and
model_dir_setup.py its model dir.
"""

from __future__ import annotations

import math

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.data import packings, vocab_info
from roberta_tf.models import vocab_growth
from roberta_tf.pretraining import flops, inputs, mlm_evaluation
from roberta_tf.pretraining.objective import MlmObjective
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training import checkpointing
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training import summaries as summaries_lib
from roberta_tf.training.step_window import StepWindow
from roberta_tf.training.train_step import StepConfig


class TrainingError(RuntimeError):
  """The run cannot go on (too many bad steps, inconsistent model dir, ...)."""


def uses_next_sentence(info: dict) -> bool:
  """Shards of a pair packing (the NSP input-format ablation): token types and an NSP head."""
  return info.get("packing") in packings.PAIR_PACKINGS

def model_config_for(cfg: TrainConfig, info: dict) -> models.RobertaConfig:
  """The model config: from --init_from's model dir, else the preset/JSON with the shards' vocab.

  Shards of a pair packing set BERT's two token types and NSP head on a preset/JSON model
  (a JSON with an NSP head needs pair shards); an --init_from model must already have them
  exactly when the shards are pairs.
  """
  pairs = uses_next_sentence(info)
  if cfg.init_from:
    model_config = models.read_config(cfg.init_from)
    if model_config.next_sentence_head != pairs:
      raise ValueError(
          f"--init_from={cfg.init_from!r} {'has' if model_config.next_sentence_head else 'has no'}"
          f" NSP head, but --train_data={cfg.train_data!r} is {info.get('packing')!r} shards: "
          "the pair packings (NSP) and the block packings cannot continue each other's models")
    model_config = grown_for_shards(cfg, info, model_config)
  elif files.isfile(cfg.config):
    model_config = models.RobertaConfig.load(cfg.config)
  else:
    model_config = models.preset(cfg.config, vocab_size=info["vocab"]["size"],
                                 max_positions=cfg.max_seq_len + 2,
                                 pad_id=info["special_ids"]["pad"],
                                 bos_id=info["special_ids"]["bos"],
                                 eos_id=info["special_ids"]["eos"],
                                 type_vocab_size=1 if cfg.type_embedding else 0,
                                 pre_layer_norm=cfg.pre_layer_norm, use_bias=cfg.use_bias,
                                 gated_ffn=cfg.gated_ffn)
  if pairs and not cfg.init_from:
    model_config = model_config.replace(type_vocab_size=2, next_sentence_head=True)
  elif model_config.next_sentence_head and not pairs:
    raise ValueError(f"--config={cfg.config!r} has next_sentence_head, but --train_data="
                     f"{cfg.train_data!r} is {info.get('packing')!r} shards with no "
                     "next-sentence labels: use segment_pair / sentence_pair shards")
  if cfg.dropout >= 0:
    model_config = model_config.replace(dropout=cfg.dropout, attention_dropout=cfg.dropout)
  return model_config

def grown_for_shards(cfg: TrainConfig, info: dict,
                     model_config: models.RobertaConfig) -> models.RobertaConfig:
  """--init_from's config grown to what the shards need (docs/domain_adaptation.md).

  - Shards of a larger vocabulary that extends the model's (every one of the model's tokens
    at its id in the shards' vocab.json: `data_prep.train_tokenizer --extend_from`): the
    vocab_size grows to the shards' (run.py then copies the weights with the new rows:
    models/growth.py).
  - Shards of longer sequences than the model's position table holds: the table grows to
    --max_seq_len + 2 rows (Longformer's row copies: models/position_growth.py). Shards that
    fit the table leave it as it is, whatever --max_seq_len says.

  Raises:
    ValueError / vocab_growth.VocabGrowthError naming the flags: a smaller vocabulary, one that
    does not extend the model's, or vocab files to compare that are missing.
  """
  size = info["vocab"]["size"]
  if size < model_config.vocab_size:
    raise ValueError(f"--train_data={cfg.train_data!r} was encoded with a vocabulary of {size} "
                     f"tokens, smaller than --init_from={cfg.init_from!r}'s "
                     f"{model_config.vocab_size}: continue on shards of the model's vocabulary "
                     "(or of one grown from it)")
  if size > model_config.vocab_size:
    vocab_dir = vocab_info.find_vocab_dir(cfg.train_data, info)
    if vocab_dir is None:
      raise vocab_growth.VocabGrowthError(
          f"--train_data={cfg.train_data!r} has {size} token ids, --init_from={cfg.init_from!r} "
          f"{model_config.vocab_size}: growing the model needs the shards' vocab.json (beside "
          "the shards, as build_shards copies it), to check that it extends the model's")
    vocab_growth.plan(cfg.init_from, vocab_dir)  # refuses a vocabulary that does not extend
    model_config = model_config.replace(vocab_size=size)
  if info["max_seq_len"] > model_config.max_seq_len:
    if cfg.max_seq_len < info["max_seq_len"]:
      raise ValueError(f"--max_seq_len={cfg.max_seq_len} is below the shards' max_seq_len "
                       f"{info['max_seq_len']} ({cfg.train_data})")
    model_config = model_config.replace(max_seq_len=cfg.max_seq_len)
  return model_config

def vocab_growth_plan(cfg: TrainConfig, info: dict, model_config: models.RobertaConfig,
                      source_config: models.RobertaConfig):
  """The vocabulary growth from `source_config` (--init_from's) to `model_config`, or None."""
  if model_config.vocab_size == source_config.vocab_size:
    return None
  return vocab_growth.plan(cfg.init_from, vocab_info.find_vocab_dir(cfg.train_data, info))

def mfu_denominator(cfg: TrainConfig, strategy: tf.distribute.Strategy,
                    model_config: models.RobertaConfig) -> float:
  """FLOPs of one update / the replicas' peak FLOP/s: MFU = updates x this / seconds."""
  predictions = cfg.masking_config().resolved_max_predictions(cfg.max_seq_len)
  step_flops = flops.train_step_flops(
      num_layers=model_config.num_layers, hidden_size=model_config.hidden_size,
      intermediate_size=model_config.intermediate_size, vocab_size=model_config.vocab_size,
      seq_len=cfg.max_seq_len, predictions_per_seq=predictions, sequences=cfg.batch_size)
  peak = cfg.peak_flops or (cfg.peak_flops_fp32 if cfg.precision == "float32"
                            else cfg.peak_flops_bf16)
  return step_flops / (peak * strategy.num_replicas_in_sync)


class PretrainingTask:
  """Pretraining as the loop's task. Build with the run's config, strategy and model config;
  `build_train_step(task, strategy)` (training/task.py) then makes the model and optimizer, and
  `attach` hands the events what they act on once the checkpoint and the data exist."""

  def __init__(self, cfg: TrainConfig, strategy: tf.distribute.Strategy,
               model_config: models.RobertaConfig):
    self.cfg, self.strategy, self.model_config = cfg, strategy, model_config
    self.chief = strategy_lib.is_chief(strategy)
    self.per_replica = inputs.per_replica_batch(cfg, strategy)  # refuses an unsplittable batch
    self.final, self.history, self.start_step = {}, [], 0

  # ---- what the train step runs ----
  def build_model(self):
    return models.RobertaPretrainer(self.model_config, dtype=self.cfg.precision)

  def build_optimizer(self, model):
    cfg = self.cfg
    return optimizer_lib.adamw(
        variables=model.trainable_variables, learning_rate=cfg.learning_rate,
        warmup_steps=cfg.warmup_steps, train_steps=cfg.train_steps,
        time_budget=cfg.train_minutes > 0, weight_decay=cfg.weight_decay,
        beta_1=cfg.adam_beta1, beta_2=cfg.adam_beta2, epsilon=cfg.adam_epsilon)

  def step_config(self) -> StepConfig:
    cfg = self.cfg
    predictions = cfg.masking_config().resolved_max_predictions(cfg.max_seq_len)
    return StepConfig(
        grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
        norm_per_micro_batch=float(self.per_replica * predictions), jit_compile=cfg.jit_compile,
        sequences_per_round=self.per_replica * self.strategy.num_replicas_in_sync)

  def objective(self) -> MlmObjective:
    return MlmObjective(next_sentence=self.model_config.next_sentence_head)

  # ---- the loop's events ----
  def attach(self, train_step, ckpt: checkpointing.Checkpointer, resumed: str | None,
             train_ds, eval_ds, unigram_log_probs, summaries: summaries_lib.Summaries) -> None:
    """What the events act on: the train step, its checkpointer, the checkpoint resumed from
    (None: a fresh run), the distributed datasets, the unigram baseline, the summaries."""
    self.train_step, self.ckpt, self.resumed = train_step, ckpt, resumed
    self.iterator, self.eval_ds, self.summaries = iter(train_ds), eval_ds, summaries
    self.evaluator = mlm_evaluation.Evaluator(self.strategy, train_step.model,
                                              unigram_log_probs=unigram_log_probs)
    self.log_window = _LogWindow(self.cfg, train_step, summaries,
                                 mfu_denominator(self.cfg, self.strategy, self.model_config))
    self.start_step = int(train_step.step.numpy())

  def batches(self, step):
    del step  # one stream, positioned at the resume point when it was built
    return lambda: next(self.iterator)

  def log(self, step, window, eta_s):
    self.final = self.log_window.flush(step, window)
    summaries_lib.log(summaries_lib.progress_line(step, None if self.cfg.train_minutes else
                                                  self.cfg.train_steps, self.final,
                                                  eta_s))

  def evaluate(self, step):
    cfg = self.cfg
    if self.eval_ds is None:
      return False
    metrics = self.evaluator(self.eval_ds, cfg.eval_steps)
    self.history.append((step, metrics))
    self.summaries.scalars("eval", step, {k: metrics[k] for k in (
        "loss", "perplexity", "mlm_accuracy", "unigram_perplexity", "nsp_loss",
        "nsp_accuracy") if k in metrics})
    summaries_lib.log(mlm_evaluation.eval_line(f"eval step {step}", metrics))
    if mlm_evaluation.on_unigram_plateau(metrics, step, cfg.warmup_steps):
      summaries_lib.log(
          f"warning: at step {step} held-out perplexity {metrics['perplexity']:.1f} is within "
          f"5% of the unigram baseline {metrics['unigram_perplexity']:.1f}: the model still "
          "predicts token frequencies, not context. If this persists, try a lower "
          f"--learning_rate (now {cfg.learning_rate:g}) or a longer --warmup_steps (now "
          f"{cfg.warmup_steps}).")
    return False

  def save(self, step, window=None):
    del window  # the data position and counters are in the checkpoint already
    try:
      path = self.ckpt.save(step)  # a failed write raises CheckpointError naming the files
    except checkpointing.NonFiniteWeightsError as e:
      raise TrainingError(f"{e}; the last good checkpoint is {self.ckpt.latest}") from e
    if self.chief:
      summaries_lib.log(f"saved {path}")

  def too_many_bad_steps(self, step, bad_in_row):
    good = self.ckpt.latest
    if good:
      self.ckpt.restore(good)
    return TrainingError(
        f"{bad_in_row} steps in a row (>= --max_bad_steps={self.cfg.max_bad_steps}) had a "
        f"non-finite loss or gradient and were skipped (at step {step}); restored the last "
        f"good checkpoint {good or '(none: nothing was saved)'}. Lower --learning_rate, set "
        "--clip_norm, or check the data and --init_from.")

  def stopped(self, step, reason):
    summaries_lib.log(f"{reason}: saved step {step}; exiting cleanly (the same command "
                      "resumes)")

  def finish(self, step):
    if step > self.start_step or not self.resumed:  # a resume at --train_steps: nothing new
      self.save(step)
    summaries_lib.log(f"trained to step {step}: weights sha256 "
                      f"{checkpointing.weights_digest(self.train_step.model)[:16]}")
    self.evaluate(step)


class _LogWindow:
  """The updates since the last log line, and what a log step makes of them: the metrics
  (PretrainingResult.final_train) and the train scalars in TensorBoard."""

  _SCALARS = ("loss", "perplexity", "learning_rate", "grad_norm", "tokens_per_sec",
              "examples_per_sec", "mfu", "input_wait_fraction", "skipped_steps")

  def __init__(self, cfg: TrainConfig, train_step, summaries, mfu_denominator: float):
    self.cfg, self.train_step, self.summaries = cfg, train_step, summaries
    self.mfu_denominator = mfu_denominator  # an update's FLOPs / peak FLOP/s

  def flush(self, step: int, window: StepWindow) -> dict:
    w = window.summarize()
    elapsed, steps = w["elapsed_s"], len(window)
    final = {k: w[k] for k in ("loss", "accuracy", "grad_norm", "learning_rate", "loss_scale",
                               "last_step_loss")}
    final.update(tokens_per_sec=w["tokens"] / elapsed,
                 examples_per_sec=steps * self.cfg.batch_size / elapsed,
                 mfu=steps * self.mfu_denominator / elapsed,
                 input_wait_fraction=w["input_wait_s"] / elapsed,
                 perplexity=math.exp(min(final["loss"], 700.0)),
                 skipped_steps=float(self.train_step.skipped_steps.numpy()))
    if "sum/nsp_count" in w:  # NSP ablation: "loss" is MLM + NSP; report the parts
      ratio = lambda a, b: a / b if b else float("nan")  # no applied update: NaN, like loss
      final.update(mlm_loss=ratio(w["sum/mlm_loss"], w["count"]),
                   nsp_loss=ratio(w["sum/nsp_loss"], w["sum/nsp_count"]),
                   nsp_accuracy=ratio(w["sum/nsp_correct"], w["sum/nsp_count"]))
      final["perplexity"] = math.exp(min(final["mlm_loss"], 700.0))
    scalars = {k: final[k] for k in self._SCALARS}
    scalars["mlm_accuracy"] = final["accuracy"]
    for k in ("mlm_loss", "nsp_loss", "nsp_accuracy"):
      if k in final:
        scalars[k] = final[k]
    if self.train_step.fp16:
      scalars["loss_scale"] = final["loss_scale"]
      scalars["overflow_steps"] = float(self.train_step.overflow_steps.numpy())
    self.summaries.scalars("train", step, scalars)
    return final
