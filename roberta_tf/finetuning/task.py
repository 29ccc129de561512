"""Fine-tuning on one problem (Model Garden's *task*; training/task.py's `Task`): the encoder
and head (warm_start.py), AdamW with `warmup_ratio` linear warmup then linear decay to 0 over
epochs x updates_per_epoch updates, the train step's settings and the problem's objective.
What the loop's events mean for fine-tuning (epochs, dev metrics, the best epoch, early
stopping, the run's state) is events.py's `FineTuningEvents`; trial.py runs both.
"""

from __future__ import annotations

import math

import tensorflow as tf

from roberta_tf import models
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning import warm_start
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.objective import ProblemObjective
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training.schedule import WarmupLinearDecay
from roberta_tf.training.train_step import StepConfig


def updates_per_epoch(num_train: int, batch_size: int, grad_accum_steps: int) -> int:
  """Updates in one pass: every micro-batch (the last may be partial) in groups of
  grad_accum_steps; a final incomplete group is dropped."""
  micro = math.ceil(num_train / (batch_size // grad_accum_steps))
  return max(micro // grad_accum_steps, 1)


class FineTuningTask:
  """One run's task: `cfg` holds its batch size, learning rate and seed (a sweep replaces them
  per run); `problem` its data, loss and metrics; `model_config` the encoder's architecture."""

  def __init__(self, cfg: FinetuneConfig, problem: problems_lib.Problem,
               model_config: models.RobertaConfig, strategy: tf.distribute.Strategy):
    self.cfg, self.problem, self.model_config = cfg, problem, model_config
    self.strategy = strategy
    self.steps_per_epoch = updates_per_epoch(problem.num_train, cfg.data.batch_size,
                                             cfg.optimizer.grad_accum_steps)
    self.total_steps = cfg.epochs * self.steps_per_epoch

  def epoch(self, step: int) -> int:
    """The epoch (1-based) that update `step` (after it) belongs to."""
    return (step - 1) // self.steps_per_epoch + 1

  def build_model(self):
    return warm_start.warm_started_model(self.model_config, self.problem.info,
                                         dtype=self.cfg.runtime.precision,
                                         init_from=self.cfg.model.init_from)

  def build_optimizer(self, model):
    """Pretraining's AdamW (the train step all-reduces), no weight decay on LayerNorm/bias;
    --warmup_ratio of the run's updates warm up, then the rate decays to 0 at the last."""
    options = self.cfg.optimizer
    schedule = WarmupLinearDecay(options.learning_rate,
                                 int(round(options.warmup_ratio * self.total_steps)),
                                 self.total_steps)
    return optimizer_lib.adamw(options, schedule, model.trainable_variables)

  def step_config(self) -> StepConfig:
    optimizer = self.cfg.optimizer
    micro_batch = self.cfg.data.batch_size // optimizer.grad_accum_steps  # global examples
    return StepConfig(
        grad_accum_steps=optimizer.grad_accum_steps, clip_norm=optimizer.clip_norm,
        precision=self.cfg.runtime.precision,
        norm_per_micro_batch=float(max(micro_batch // self.strategy.num_replicas_in_sync, 1)))

  def objective(self) -> ProblemObjective:
    return ProblemObjective(self.problem)
