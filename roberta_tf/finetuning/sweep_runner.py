"""The fine-tuning sweep: batch sizes x learning rates x seeds (sweep.py), one run each
(trial.py), the median statistics, the kept model, and GLUE's test predictions.

The best configuration is the one with the best median dev metric over its seeds; its median
seed's run is kept (sweep.py says why): its checkpoint, config and vocab go to model_dir, its
metrics and every run's and configuration's statistics to model_dir/eval_results.json, a table
to model_dir/results.md, and with a GLUE preset its test-set predictions to the leaderboard's
TSV files (predictions.py) in --predictions_dir (default model_dir).

One process at a time: the chief holds model_dir's lock (common/directory_lock.py) for the whole
sweep; a second command on the same model_dir is refused with one line and changes nothing.

Resume: the sweep records its settings in model_dir/runs/sweep.json. Rerunning the same
command on a model_dir whose sweep did not finish (a SIGTERM, a crash, a preempted machine)
continues it: finished runs are read back, the unfinished one resumes from its saved state
(run_state.py), and the result equals an uninterrupted sweep's. Other settings on such a
model_dir are refused unless --overwrite, which starts over.
"""

from __future__ import annotations

import contextlib
import dataclasses

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import atomic_write, directory_lock, files, options
from roberta_tf.finetuning import (
  finetuned_dir,
  glue,
  predictions,
  problem_loading,
  problem_types,
  sweep,
  warm_start,
)
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.events import TrialResult, format_metrics
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.tagging import tag_write
from roberta_tf.finetuning.trial import SweepClock, finished_run, run_trial
from roberta_tf.tokenization import vocab_files
from roberta_tf.training import checkpointing
from roberta_tf.training import cluster as cluster_lib
from roberta_tf.training import model_config as model_config_lib
from roberta_tf.training import strategy as strategy_lib
from roberta_tf.training.sigterm import SigtermFlag
from roberta_tf.training.summaries import log

DEFAULT_MAX_SEQ_LEN = 512  # the paper's, for random init without --max_seq_len
RUNS_DIR = "runs"
SWEEP_FILE = "sweep.json"  # in RUNS_DIR
MARKDOWN_FILE = "results.md"
# Settings that do not change the sweep's runs (predictions are made after the last run).
_NOT_TRAINING = ("overwrite", "export_dir", "predictions_dir", "glue_diagnostic", "peer_timeout")


def model_config_for(cfg: FinetuneConfig, vocab_size: int) -> models.RobertaConfig:
  """The model config (training/model_config.py's `resolve`: init_from's, else the --config
  preset/JSON, a preset sized for the vocab and max_seq_len), checked against the vocabulary and
  --max_seq_len."""
  config = model_config_lib.resolve(cfg.model, vocab_size=vocab_size,
                                    max_seq_len=cfg.data.max_seq_len or DEFAULT_MAX_SEQ_LEN)
  if cfg.model.init_from and cfg.data.max_seq_len > config.max_seq_len:
    raise ValueError(f"--max_seq_len={cfg.data.max_seq_len} exceeds the pretrained model's "
                     f"{config.max_seq_len} (its position table)")
  if config.vocab_size != vocab_size:
    raise ValueError(f"the vocabulary has {vocab_size} ids, the model {config.vocab_size}: "
                     "wrong --vocab_dir?")
  if cfg.data.max_seq_len > config.max_seq_len:
    raise ValueError(f"--max_seq_len={cfg.data.max_seq_len} exceeds --config's "
                     f"{config.max_seq_len}")
  return config


@dataclasses.dataclass(frozen=True)
class Kept:
  """The kept run: the best configuration's median seed (sweep.py), and the statistics
  eval_results.json reports beside its metrics."""
  key: sweep.RunKey
  run: TrialResult
  statistics: dict


def _sweep_settings(cfg: FinetuneConfig) -> dict:
  """The settings that decide the sweep's result (rates and batch sizes as swept, however
  given)."""
  settings = {k: v for k, v in cfg.to_dict().items() if k not in _NOT_TRAINING + (
      "learning_rate", "learning_rates", "batch_size", "batch_sizes")}
  # "sweep" (the learning rates): the key sweep.json has always had.
  return {**settings, "sweep": list(cfg.learning_rate_sweep),
          "batch_size_sweep": list(cfg.batch_size_sweep)}


def unfinished_sweep(cfg: FinetuneConfig) -> dict | None:
  """The settings of the unfinished sweep in --model_dir (no eval_results.json yet), or None."""
  path = files.join(cfg.model.model_dir, RUNS_DIR, SWEEP_FILE)
  if (not files.isfile(path)
      or files.isfile(files.join(cfg.model.model_dir, finetuned_dir.RESULTS_FILE))):
    return None
  return files.read_json(path)


def run_sweep(cfg: FinetuneConfig, strategy: tf.distribute.Strategy | None = None) -> dict:
  """Runs (or resumes) the sweep and writes the fine-tuned model dir.

  Returns eval_results.json's content, or {"stopped_by_signal": True, "run": ...} when SIGTERM
  stopped it (the state is saved; the same call again resumes).
  """
  # A bad URL names its flag before the preset reads --data_dir; the rest once the preset is in.
  options.check_options(cfg, required=False)
  cfg = glue.apply_preset(cfg)
  cfg.validate()
  strategy = strategy or strategy_lib.make_strategy(
      cfg.runtime.strategy, peer_timeout_s=cfg.runtime.peer_timeout, log=log)
  # One fine-tuning process a model dir (the chief's lock, as train's): a second command on a
  # running directory is refused before it reads the sweep's state, so the first is unaffected.
  with (directory_lock.DirectoryLock(cfg.model.model_dir, holder="fine-tuning")
        if strategy_lib.is_chief(strategy) else contextlib.nullcontext()):
    # A peer lost mid-run: one line naming it (each run of the sweep resumes on a restart).
    with cluster_lib.named_failures(strategy_lib.cluster_of(strategy), cfg.model.model_dir,
                                    lambda: None):
      return _run_sweep(cfg, strategy)


def _run_sweep(cfg: FinetuneConfig, strategy: tf.distribute.Strategy) -> dict:
  """run_sweep's body, holding the model dir's lock on the chief: the model and the problem,
  the sweep's settings (resumed or new), its runs, their statistics and the kept model."""
  check_vocab_dir(cfg)
  vocab_dir = cfg.vocab_dir or cfg.model.init_from
  tokenizer = finetuned_dir.load_tokenizer(vocab_dir)
  model_config = model_config_for(cfg, tokenizer.vocab_size)
  cfg = cfg.replace(max_seq_len=cfg.data.max_seq_len or model_config.max_seq_len)
  chief = strategy_lib.is_chief(strategy)
  settings = _sweep_settings(cfg)
  resume = _resumes(cfg, settings)
  if chief and not resume:
    finetuned_dir.check_writable(cfg.model.model_dir, cfg.model.overwrite,
                                 protected=(cfg.model.init_from, cfg.vocab_dir))
  problem = problem_loading.load_problem(cfg, tokenizer)
  metric = cfg.metric or problems_lib.DEFAULT_METRIC[cfg.task]
  if metric not in problem.metric_names():
    raise ValueError(f"--metric={metric!r} is not a {cfg.task} metric here; choose one of "
                     f"{list(problem.metric_names())}")
  if chief and not resume:
    finetuned_dir.prepare(cfg.model.model_dir)  # only now: bad flags or data leave nothing behind
    files.makedirs(files.join(cfg.model.model_dir, RUNS_DIR))
    atomic_write.write_json(files.join(cfg.model.model_dir, RUNS_DIR, SWEEP_FILE), settings)
  keys = sweep.plan(cfg.batch_size_sweep, cfg.learning_rate_sweep, cfg.seed_list)
  _log_plan(cfg, problem, strategy, len(keys), resume)
  runs, stopped = _train_runs(cfg, problem, model_config, strategy, metric, keys)
  if stopped is not None:  # SIGTERM: the state is saved; a rerun resumes
    return {"stopped_by_signal": True, "run": stopped.name}
  summary = sweep.summarize([(k, r.metrics) for k, r in runs], metric,
                            lower_is_better=metric in problems_lib.LOWER_IS_BETTER)
  kept = Kept(summary["kept"], next(r for k, r in runs if k == summary["kept"]),
              _statistics(summary))
  if not chief:  # the chief writes the model dir; the others drop their temporary saves
    for _, run in runs:
      files.rmtree(checkpointing.worker_dir(run.run_dir, False, strategy_lib.task_id(strategy)),
                   ignore_errors=True)
    return {**kept.run.metrics, "metric": metric, "learning_rate": kept.run.learning_rate,
            **kept.statistics}
  return _write_model_dir(cfg, vocab_dir, model_config, problem, metric, runs, summary, kept)


def check_vocab_dir(cfg: FinetuneConfig) -> None:
  """Refuses --vocab_dir of another vocabulary than --init_from's (the one its weights were
  pretrained on: the text would become ids whose rows mean other tokens), by content
  (vocab_files.VocabId: a merges.txt that differs too), in one line naming both."""
  if not (cfg.vocab_dir and cfg.model.init_from):
    return
  given = vocab_files.VocabId.of_dir(cfg.vocab_dir)
  if given is not None:  # else the tokenizer's load names the missing file
    models.model_dir.ModelDir(cfg.model.init_from, "--init_from").check_vocabulary(
        given, ("--vocab_dir", cfg.vocab_dir), cfg.vocab_dir,
        hint="fine-tune with the vocabulary the model was pretrained on (without --vocab_dir: "
        "--init_from's)")


def _resumes(cfg: FinetuneConfig, settings: dict) -> bool:
  """True when --model_dir holds an unfinished sweep of these settings; raises ValueError for
  one of other settings (without --overwrite, which starts over)."""
  before = unfinished_sweep(cfg)
  if before is None or before == settings:
    return before is not None
  if not cfg.model.overwrite:
    changed = sorted(k for k in set(before) | set(settings) if before.get(k) != settings.get(k))
    raise ValueError(f"--model_dir={cfg.model.model_dir!r} holds an unfinished sweep with other "
                     f"settings ({', '.join(changed)}): rerun with its flags to resume it, or "
                     "pass --overwrite to start over")
  return False


_UNITS = {problem_types.EXTRACTIVE_QA: "features", problem_types.TOKEN_CLASSIFICATION: "windows",
          problem_types.EMBEDDING: "texts (documents and queries)"}


def _log_plan(cfg: FinetuneConfig, problem, strategy, num_runs: int, resume: bool) -> None:
  log(f"{cfg.glue_task or cfg.task}: {problem.num_train} training / {problem.num_eval} dev "
      f"{_UNITS.get(cfg.task, 'examples')}; "
      f"{warm_start.describe(cfg.model.init_from, problem.info)}; {num_runs} runs ("
      f"{len(cfg.batch_size_sweep)} batch sizes x {len(cfg.learning_rate_sweep)} learning rates x "
      f"{cfg.seeds} seeds); {cfg.batching} batches; {strategy.num_replicas_in_sync} "
      f"replica(s), {cfg.runtime.precision}"
      f"{'; resuming the unfinished sweep in ' + cfg.model.model_dir if resume else ''}")


def _train_runs(cfg: FinetuneConfig, problem, model_config: models.RobertaConfig, strategy,
                metric: str, keys: list[sweep.RunKey]):
  """Every run of the grid in plan order (a finished one read back): ([(key, TrialResult)],
  None), or (the runs so far, the key of the run a signal stopped)."""
  runs, clock = [], SweepClock(len(keys) * cfg.epochs)
  with SigtermFlag() as sigterm:
    for key in keys:
      run_dir = files.join(cfg.model.model_dir, RUNS_DIR, key.name)
      run_cfg = cfg.replace(batch_size=key.batch_size, seed=key.seed,
                            learning_rate=key.learning_rate)
      run = finished_run(run_dir) or run_trial(run_cfg, problem, model_config, strategy, run_dir,
                                               metric, sigterm, clock, label=key.label(keys))
      if run.checkpoint is None:
        return runs, key
      runs.append((key, run))
  return runs, None


def _statistics(summary: dict) -> dict:
  """The best configuration's median and spread of every metric, the kept run, and every
  configuration's and the whole grid's statistics (sweep.summarize's)."""
  kept_key, best_config = summary["kept"], summary["configs"][summary["best_config"]]
  return {"median": {k: v["median"] for k, v in best_config["metrics"].items()},
          "spread": {k: {s: v[s] for s in ("min", "max", "q1", "q3", "values")}
                     for k, v in best_config["metrics"].items()},
          "best_config": {"batch_size": best_config["batch_size"],
                          "learning_rate": best_config["learning_rate"]},
          "kept_run": {"run": kept_key.name, "seed": kept_key.seed,
                       "chosen_as": sweep.KEPT_SEED},
          "configs": summary["configs"], "overall": summary["overall"]}


def _write_model_dir(cfg: FinetuneConfig, vocab_dir: str, model_config: models.RobertaConfig,
                     problem, metric: str, runs: list, summary: dict, kept: Kept) -> dict:
  """The chief's model dir: the kept run's weights, config, vocabulary (and QA predictions),
  GLUE's test predictions, results.md and eval_results.json (last); returns the latter."""
  best, kept_key = kept.run, kept.key
  # The kept run's weights become the model dir's checkpoint (float32 variables either way).
  model = finetuned_dir.new_model(model_config, problem.info, dtype="float32")
  finetuned_dir.restore(model, best.checkpoint)
  finetuned_dir.write_config(cfg.model.model_dir, model_config, problem.info, cfg.to_dict())
  finetuned_dir.save_checkpoint(cfg.model.model_dir, model, best.best_epoch)
  finetuned_dir.copy_tokenizer(vocab_dir, cfg.model.model_dir)
  copied = {problem_types.EXTRACTIVE_QA: ("predictions.json", "nbest_predictions.json"),
            problem_types.TOKEN_CLASSIFICATION: (tag_write.DEV_FILE, tag_write.TEST_FILE)}
  for name in copied.get(cfg.task, ()):
    if files.isfile(files.join(best.run_dir, name)):
      atomic_write.copy_file(files.join(best.run_dir, name), files.join(cfg.model.model_dir, name))
  written = []
  if problem.test_sets:
    written = predictions.write_glue_predictions(
        cfg.predictions_dir or cfg.model.model_dir, problem, model,
        cfg.eval_batch_size or kept_key.batch_size)
    log(f"test predictions of {kept_key.name}: {', '.join(written)}")
  results = {**best.metrics, "metric": metric, "learning_rate": best.learning_rate,
             "batch_size": kept_key.batch_size, "seed": kept_key.seed,
             "epoch": best.best_epoch, "init_from": cfg.model.init_from or None, **kept.statistics,
             "test_predictions": [files.basename(p) for p in written],
             **({"test": best.test} if best.test is not None else {}),
             "runs": [{"batch_size": k.batch_size, "learning_rate": r.learning_rate,
                       "seed": k.seed, "epoch": r.best_epoch, "metrics": r.metrics,
                       **({"test": r.test} if r.test is not None else {}),
                       "history": r.history} for k, r in runs]}
  title = (f"{cfg.glue_task or cfg.task}: {len(cfg.batch_size_sweep)} batch sizes x "
           f"{len(cfg.learning_rate_sweep)} learning rates x {cfg.seeds} seeds")
  atomic_write.write_text(files.join(cfg.model.model_dir, MARKDOWN_FILE),
                          sweep.markdown(summary, metric, title, best.best_epoch))
  atomic_write.write_json(files.join(cfg.model.model_dir, finetuned_dir.RESULTS_FILE), results)
  _log_kept(cfg, metric, summary, kept)
  return results


def _log_kept(cfg: FinetuneConfig, metric: str, summary: dict, kept: Kept) -> None:
  best_config = summary["configs"][summary["best_config"]]
  spread, median = kept.statistics["spread"][metric], kept.statistics["median"][metric]
  log(f"best configuration bs {best_config['batch_size']} lr {best_config['learning_rate']:g}: "
      f"dev {metric} median {median:.4f} (min {spread['min']:.4f}, max "
      f"{spread['max']:.4f}, {cfg.seeds} seeds); kept {kept.key.name} epoch "
      f"{kept.run.best_epoch}: dev {format_metrics(kept.run.metrics)} -> {cfg.model.model_dir}")
