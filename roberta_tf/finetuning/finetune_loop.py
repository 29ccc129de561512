"""The fine-tuning sweep: one run per learning rate (finetune_run.py), the best dev run kept.

Across the sweep the run with the best dev metric is kept: its checkpoint, config and vocab go
to model_dir, its metrics to model_dir/eval_results.json (see finetuned_dir.py).

Resume: the sweep records its settings in model_dir/runs/sweep.json. Rerunning the same
command on a model_dir whose sweep did not finish (a SIGTERM, a crash, a preempted machine)
continues it: finished runs are read back, the unfinished one resumes from its saved state
(run_state.py), and the result equals an uninterrupted sweep's. Other settings on such a
model_dir are refused unless --overwrite, which starts over.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import atomic_write
from roberta_tf.finetuning import finetuned_dir
from roberta_tf.finetuning import tasks as tasks_lib
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.finetune_run import (  # noqa: F401  (FinetuneError: the binary's)
    FinetuneError,
    SweepClock,
    finished_run,
    format_metrics,
    log,
    train_run,
)
from roberta_tf.training import checkpointing
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training.sigterm import SigtermFlag

DEFAULT_MAX_SEQ_LEN = 512  # the paper's, for random init without --max_seq_len
SWEEP_FILE = os.path.join("runs", "sweep.json")
_NOT_TRAINING = ("overwrite", "export_dir")  # settings that do not change the sweep's result


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


def _sweep_settings(cfg: FinetuneConfig) -> dict:
  """The settings that decide the sweep's result (the rates as swept, however given)."""
  settings = {k: v for k, v in cfg.to_dict().items()
              if k not in _NOT_TRAINING + ("learning_rate", "learning_rates")}
  return {**settings, "sweep": list(cfg.sweep)}


def unfinished_sweep(cfg: FinetuneConfig) -> dict | None:
  """The settings of the unfinished sweep in cfg.model_dir (no eval_results.json yet), or None."""
  path = os.path.join(cfg.model_dir, SWEEP_FILE)
  if (not os.path.isfile(path)
      or os.path.isfile(os.path.join(cfg.model_dir, finetuned_dir.RESULTS_FILE))):
    return None
  with open(path, encoding="utf-8") as f:
    return json.load(f)


def finetune(cfg: FinetuneConfig, strategy: tf.distribute.Strategy | None = None) -> dict:
  """Runs (or resumes) the sweep and writes the fine-tuned model dir.

  Returns eval_results.json's content, or {"stopped_by_signal": True, "learning_rate": ...}
  when SIGTERM stopped it (the state is saved; the same call again resumes).
  """
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
  before, settings = unfinished_sweep(cfg), _sweep_settings(cfg)
  resume = before == settings
  if before is not None and not resume and not cfg.overwrite:
    changed = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
    raise ValueError(f"--model_dir={cfg.model_dir!r} holds an unfinished sweep with other "
                     f"settings ({', '.join(changed)}): rerun with its flags to resume it, or "
                     "pass --overwrite to start over")
  if chief and not resume:
    finetuned_dir.check_writable(cfg.model_dir, cfg.overwrite,
                                 protected=(cfg.init_from, cfg.vocab_dir))
  task = tasks_lib.load_task(cfg, tokenizer)
  metric = cfg.metric or tasks_lib.DEFAULT_METRIC[cfg.task]
  if metric not in task.info.metric_names():
    raise ValueError(f"--metric={metric!r} is not a {cfg.task} metric here; choose one of "
                     f"{list(task.info.metric_names())}")
  if chief and not resume:
    finetuned_dir.prepare(cfg.model_dir)  # only now: bad flags or data leave nothing behind
    os.makedirs(os.path.join(cfg.model_dir, os.path.dirname(SWEEP_FILE)), exist_ok=True)
    atomic_write.write_json(os.path.join(cfg.model_dir, SWEEP_FILE), settings)
  log(f"{cfg.task}: {task.num_train} training / {task.num_eval} dev "
      f"{'features' if cfg.task == 'extractive_qa' else 'examples'}; "
      f"{'init from ' + cfg.init_from if cfg.init_from else 'random init'}; "
      f"{strategy.num_replicas_in_sync} replica(s), {cfg.precision}"
      f"{'; resuming the unfinished sweep in ' + cfg.model_dir if resume else ''}")

  runs, clock = [], SweepClock(len(cfg.sweep) * cfg.epochs)
  with SigtermFlag() as sigterm:
    for lr in cfg.sweep:
      run_dir = os.path.join(cfg.model_dir, "runs", f"lr_{lr:g}")
      run = finished_run(run_dir) or train_run(cfg, task, model_config, lr, strategy, run_dir,
                                               metric, sigterm, clock)
      if run.checkpoint is None:  # SIGTERM: the state is saved; a rerun resumes
        return {"stopped_by_signal": True, "learning_rate": lr}
      runs.append(run)
  best = runs[0]
  for run in runs[1:]:
    if tasks_lib.is_better(metric, run.metrics[metric], best.metrics[metric]):
      best = run

  if not chief:  # the chief writes the model dir; the others drop their temporary saves
    for run in runs:
      shutil.rmtree(checkpointing.worker_dir(run.run_dir, False, strategy_lib.task_id(strategy)),
                    ignore_errors=True)
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
  log(f"kept lr {best.learning_rate:g} epoch {best.best_epoch}: dev {format_metrics(best.metrics)} "
      f"-> {cfg.model_dir}")
  return results
