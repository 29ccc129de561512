"""The fine-tuning loop: one run per learning rate of the sweep, the best dev run kept.

A run: seed -> encoder (pretrained or random) + fresh head under the strategy -> AdamW (weight
decay on matrices only) with 6% linear warmup then linear decay to 0 over
epochs x ceil(examples / batch) updates -> per epoch: one shuffled pass, then the dev metrics;
the best epoch's weights are checkpointed; `early_stopping_patience` epochs without improvement
end the run. Across the sweep the run with the best dev metric is kept: its checkpoint, config
and vocab go to model_dir, its metrics to model_dir/eval_results.json (see finetuned_dir.py).

The update itself is pretraining's: `training.trainer.Trainer` with a `TaskObjective`, so
fine-tuning gets the same gradient accumulation, clipping, fp16 loss scaling and NaN guard (a
non-finite step changes no weight; `max_bad_steps` of them in a row stop the run). Each
replica's loss SUM is divided by the global number of examples in the update, so the update is
the gradient of the global batch mean under any split into replicas and micro-batches.
"""

from __future__ import annotations

import dataclasses
import math
import os
import shutil
import time

import keras
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import atomic_write
from roberta_tf.finetuning import finetuned_dir, squad
from roberta_tf.finetuning import tasks as tasks_lib
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.training import optimizer as optimizer_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training.trainer import StepConfig, Trainer

DEFAULT_MAX_SEQ_LEN = 512  # the paper's, for random init without --max_seq_len


class FinetuneError(RuntimeError):
  """A run cannot go on (diverged, inconsistent inputs); the message says what to change."""


def log(line: str) -> None:
  print(line, flush=True)


def resolve_model_config(cfg: FinetuneConfig, vocab_size: int) -> models.RobertaConfig:
  """init_from's config, else the --config preset/JSON sized for the vocab and max_seq_len."""
  if cfg.init_from:
    config = models.read_config(cfg.init_from)
    if cfg.max_seq_len > config.max_seq_len:
      raise ValueError(f"--max_seq_len={cfg.max_seq_len} exceeds the pretrained model's "
                       f"{config.max_seq_len} (its position table)")
  elif os.path.isfile(cfg.config):
    config = models.RobertaConfig.load(cfg.config)
  else:
    config = models.preset(cfg.config, vocab_size=vocab_size,
                           max_seq_len=cfg.max_seq_len or DEFAULT_MAX_SEQ_LEN)
  if cfg.dropout >= 0:
    config = config.replace(dropout=cfg.dropout, attention_dropout=cfg.dropout)
  if config.vocab_size != vocab_size:
    raise ValueError(f"the vocabulary has {vocab_size} ids, the model {config.vocab_size}: "
                     "wrong --vocab_dir?")
  return config


def build_optimizer(cfg: FinetuneConfig, learning_rate: float, total_steps: int, variables):
  """Pretraining's AdamW (the Trainer all-reduces), warmup over `warmup_ratio` of the updates
  then linear decay to 0, no weight decay on LayerNorm/bias."""
  return optimizer_lib.build_optimizer(
      variables=variables, learning_rate=learning_rate,
      warmup_steps=int(round(cfg.warmup_ratio * total_steps)), train_steps=total_steps,
      weight_decay=cfg.weight_decay, beta_1=cfg.adam_beta1, beta_2=cfg.adam_beta2,
      epsilon=cfg.adam_epsilon)


class TaskObjective:
  """A fine-tuning task as the Trainer's objective: (loss sum, examples, 0, real tokens)."""

  def __init__(self, task: tasks_lib.Task):
    self.task = task

  def __call__(self, model, batch):
    inputs, labels = batch
    outputs = model(inputs, training=True)
    loss_sum = tf.cast(self.task.loss_sum(outputs, labels), tf.float32)
    examples = tf.cast(tf.shape(inputs["input_ids"])[0], tf.float32)
    tokens = tf.reduce_sum(tf.cast(inputs["padding_mask"], tf.float32))
    return loss_sum, examples, tf.constant(0.0), tokens


def updates_per_epoch(num_train: int, batch_size: int, grad_accum_steps: int) -> int:
  """Updates in one pass: every micro-batch (the last may be partial) in groups of
  grad_accum_steps; a final incomplete group is dropped."""
  micro = math.ceil(num_train / (batch_size // grad_accum_steps))
  return max(micro // grad_accum_steps, 1)


@dataclasses.dataclass
class RunResult:
  learning_rate: float
  best_epoch: int
  metrics: dict
  history: list
  checkpoint: str
  run_dir: str


def _format(metrics: dict) -> str:
  return " ".join(f"{k} {v:.4f}" for k, v in metrics.items() if not k.endswith("total"))


def _worker_dir(strategy: tf.distribute.Strategy, run_dir: str) -> str:
  """Where this worker saves: run_dir on the chief; a multi-worker run's other workers must
  take part in every save too, so they write to run_dir/workertemp_<id> (removed at the end)."""
  if strategy_lib.is_chief(strategy):
    return run_dir
  return os.path.join(run_dir, f"workertemp_{strategy.cluster_resolver.task_id}")


def train_run(cfg: FinetuneConfig, task: tasks_lib.Task, model_config: models.RobertaConfig,
              learning_rate: float, strategy: tf.distribute.Strategy, run_dir: str,
              metric: str) -> RunResult:
  """Fine-tunes one model at one learning rate (see the module docstring)."""
  chief = strategy_lib.is_chief(strategy)
  save_dir = _worker_dir(strategy, run_dir)
  keras.utils.set_random_seed(cfg.seed)
  replicas = strategy.num_replicas_in_sync
  micro_batch = cfg.batch_size // cfg.grad_accum_steps  # global examples per micro-batch
  steps_per_epoch = updates_per_epoch(task.num_train, cfg.batch_size, cfg.grad_accum_steps)
  total_steps = cfg.epochs * steps_per_epoch
  with strategy.scope():
    model = finetuned_dir.build_model(model_config, task.info, dtype=cfg.precision,
                                      init_from=cfg.init_from)
    opt = build_optimizer(cfg, learning_rate, total_steps, model.trainable_variables)
  trainer = Trainer(strategy, model, opt, StepConfig(
      grad_accum_steps=cfg.grad_accum_steps, clip_norm=cfg.clip_norm, precision=cfg.precision,
      norm_per_micro_batch=float(max(micro_batch // replicas, 1))), objective=TaskObjective(task))

  def epoch_batches(epoch):
    ds = task.train_dataset(micro_batch, cfg.seed + epoch - 1)
    ds = strategy.experimental_distribute_dataset(ds) if replicas > 1 else ds
    return iter(ds)

  eval_ds = task.eval_dataset(cfg.eval_batch_size or cfg.batch_size)
  predict = tf.function(lambda inputs: model(inputs, training=False),
                        input_signature=[eval_ds.element_spec])

  def evaluate():
    outputs = [{k: v.numpy() for k, v in predict(batch).items()} for batch in eval_ds]
    return task.evaluate(outputs)

  def train_epoch(epoch) -> float:
    """One pass; the mean loss of its applied updates (weighted by examples)."""
    batches = epoch_batches(epoch)
    outputs = [trainer.train_step(lambda: next(batches))[0] for _ in range(steps_per_epoch)]
    rows = [{k: float(v.numpy()) for k, v in out.items()} for out in outputs]
    bad = int(trainer.bad_steps_in_row.numpy())
    if bad >= cfg.max_bad_steps:
      raise FinetuneError(
          f"learning rate {learning_rate:g}: {bad} updates in a row (>= --max_bad_steps="
          f"{cfg.max_bad_steps}) had a non-finite loss or gradient and were skipped (epoch "
          f"{epoch}); lower the learning rate, set --clip_norm, or check --init_from")
    applied = [r for r in rows if r["applied"]]
    if not applied:
      return float("nan")
    return sum(r["loss"] * r["count"] for r in applied) / sum(r["count"] for r in applied)

  os.makedirs(save_dir, exist_ok=True)
  history, best, best_epoch, since_best, prefix = [], None, 0, 0, ""
  for epoch in range(1, cfg.epochs + 1):
    start = time.perf_counter()
    train_loss = train_epoch(epoch)
    dev = evaluate()
    improved = tasks_lib.is_better(metric, dev[metric], best)
    history.append({"epoch": epoch, "step": epoch * steps_per_epoch, "train_loss": train_loss,
                    "skipped_steps": int(trainer.skipped_steps.numpy()), "dev": dev,
                    "seconds": time.perf_counter() - start})
    log(f"lr {learning_rate:g} epoch {epoch}/{cfg.epochs}: train_loss {train_loss:.4f} | dev "
        f"{_format(dev)} | {history[-1]['seconds']:.1f}s{' (best)' if improved else ''}")
    if improved:
      best, best_epoch, since_best = dev[metric], epoch, 0
      prefix = finetuned_dir.save_checkpoint(save_dir, model, epoch)
      if chief and isinstance(task, tasks_lib.ExtractiveQATask):
        squad.write_predictions(run_dir, *task.predictions)
    else:
      since_best += 1
      if cfg.early_stopping_patience and since_best >= cfg.early_stopping_patience:
        log(f"lr {learning_rate:g}: early stop after epoch {epoch} ({since_best} epochs without "
            f"a better dev {metric}; best {best:.4f} at epoch {best_epoch})")
        break
  metrics_at_best = history[best_epoch - 1]["dev"]
  result = RunResult(learning_rate, best_epoch, metrics_at_best, history, prefix, run_dir)
  if chief:
    atomic_write.write_json(os.path.join(run_dir, finetuned_dir.RESULTS_FILE),
                             {**metrics_at_best, "learning_rate": learning_rate,
                              "epoch": best_epoch, "history": history})
  return result


def finetune(cfg: FinetuneConfig, strategy: tf.distribute.Strategy | None = None) -> dict:
  """Runs the sweep and writes the fine-tuned model dir; returns eval_results.json's content."""
  cfg.validate()
  strategy = strategy or strategy_lib.make_strategy(cfg.strategy)
  vocab_dir = cfg.vocab_dir or cfg.init_from
  tokenizer = finetuned_dir.load_tokenizer(vocab_dir)
  model_config = resolve_model_config(cfg, tokenizer.vocab_size)
  if cfg.max_seq_len > model_config.max_seq_len:
    raise ValueError(f"--max_seq_len={cfg.max_seq_len} exceeds --config's "
                     f"{model_config.max_seq_len}")
  cfg = dataclasses.replace(cfg, max_seq_len=cfg.max_seq_len or model_config.max_seq_len)
  chief = strategy_lib.is_chief(strategy)
  if chief:
    finetuned_dir.check_writable(cfg.model_dir, cfg.overwrite,
                                 protected=(cfg.init_from, cfg.vocab_dir))
  task = tasks_lib.load_task(cfg, tokenizer)
  metric = cfg.metric or tasks_lib.DEFAULT_METRIC[cfg.task]
  if metric not in task.info.metric_names():
    raise ValueError(f"--metric={metric!r} is not a {cfg.task} metric here; choose one of "
                     f"{list(task.info.metric_names())}")
  if chief:
    finetuned_dir.prepare(cfg.model_dir)  # only now: bad flags or data leave nothing behind
  log(f"{cfg.task}: {task.num_train} training / {task.num_eval} dev "
      f"{'features' if cfg.task == 'extractive_qa' else 'examples'}; "
      f"{'init from ' + cfg.init_from if cfg.init_from else 'random init'}; "
      f"{strategy.num_replicas_in_sync} replica(s), {cfg.precision}")

  runs = [train_run(cfg, task, model_config, lr, strategy,
                    os.path.join(cfg.model_dir, "runs", f"lr_{lr:g}"), metric)
          for lr in cfg.sweep]
  best = runs[0]
  for run in runs[1:]:
    if tasks_lib.is_better(metric, run.metrics[metric], best.metrics[metric]):
      best = run

  if not chief:  # the chief writes the model dir; the others drop their temporary saves
    for run in runs:
      shutil.rmtree(_worker_dir(strategy, run.run_dir), ignore_errors=True)
    return {**best.metrics, "metric": metric, "learning_rate": best.learning_rate}
  # The kept run's weights become the model dir's checkpoint (float32 variables either way).
  model = finetuned_dir.build_model(model_config, task.info, dtype="float32")
  finetuned_dir.restore(model, best.checkpoint)
  finetuned_dir.write_config(cfg.model_dir, model_config, task.info, cfg.to_dict())
  finetuned_dir.save_checkpoint(cfg.model_dir, model, best.best_epoch)
  finetuned_dir.copy_tokenizer(vocab_dir, cfg.model_dir)
  if cfg.task == "extractive_qa":
    for name in ("predictions.json", "nbest_predictions.json"):
      shutil.copyfile(os.path.join(best.run_dir, name), os.path.join(cfg.model_dir, name))
  results = {**best.metrics, "metric": metric, "learning_rate": best.learning_rate,
             "epoch": best.best_epoch, "init_from": cfg.init_from or None,
             "runs": [{"learning_rate": r.learning_rate, "epoch": r.best_epoch,
                       "metrics": r.metrics, "history": r.history} for r in runs]}
  atomic_write.write_json(os.path.join(cfg.model_dir, finetuned_dir.RESULTS_FILE), results)
  log(f"kept lr {best.learning_rate:g} epoch {best.best_epoch}: dev {_format(best.metrics)} "
      f"-> {cfg.model_dir}")
  return results
