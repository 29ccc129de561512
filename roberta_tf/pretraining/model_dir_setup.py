"""A pretraining model dir before the first step: resume checks, --overwrite, config.json and
the vocabulary files (run on the chief, holding the dir's lock; `run.pretrain` calls them in
this order: clean_model_dir, check_resumable, check_schedule_change, prepare_model_dir)."""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files, framework_internals
from roberta_tf.data import vocab_info
from roberta_tf.models import checkpoint_files, registry
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.pretraining import inputs
from roberta_tf.pretraining.train_config import TrainConfig, write_config_json
from roberta_tf.training import checkpointing
from roberta_tf.training import summaries as summaries_lib

# What --overwrite deletes from a model dir: its checkpoints and TensorBoard logs (config.json
# and the vocab files are written again by the run).
_RUN_OUTPUTS = ("ckpt-*", checkpoint_files.INDEX_FILE, checkpoint_files.INDEX_FILE + ".tmp*",
                checkpoint_files.DAMAGED_DIR, "train", "eval", "workertemp_*")

def clean_model_dir(cfg: TrainConfig, log) -> None:
  """On the chief, holding the model dir's lock, before anything is written there: with
  --overwrite deletes the earlier run's checkpoints and logs; else removes what a killed save
  left (ckpt-N_temp/) and refuses a dir whose checkpoint files hold no complete checkpoint
  (before config.json is rewritten). The restore itself (Checkpointer.restore_latest) picks
  the newest complete checkpoint and says why."""
  if cfg.model.overwrite:
    removed = [p for pattern in _RUN_OUTPUTS
               for p in files.glob(files.join(files.escape(cfg.model.model_dir), pattern))]
    for path in removed:
      if files.isdir(path):
        files.rmtree(path)
      else:
        files.remove(path)
    if removed:
      log(f"--overwrite: deleted {len(removed)} checkpoint files and log directories of the "
          f"earlier run in {cfg.model.model_dir}")
    return
  stale = checkpoint_files.remove_stale_temps(cfg.model.model_dir)
  if stale:
    log(f"removed what an interrupted save left in {cfg.model.model_dir}: {', '.join(stale)}")
  steps = checkpoint_files.steps_on_disk(cfg.model.model_dir)
  if steps and checkpoint_files.newest_complete(cfg.model.model_dir) is None:
    problems = "; ".join(
        f"ckpt-{s}: {checkpoint_files.problem(checkpoint_files.prefix_of(cfg.model.model_dir, s))}"
        for s in reversed(steps))
    raise checkpointing.CheckpointError(
        f"--model_dir={cfg.model.model_dir} holds checkpoint files but no complete checkpoint "
        f"({problems}): restore the files, or pass --overwrite to start over (it deletes them)")

def recorded_training(model_dir: str) -> TrainConfig | None:
  """The TrainConfig config.json's "training" section records, or None (no such section: an
  import, a fine-tuned dir, no config.json yet)."""
  training = model_dir_lib.ModelDir(model_dir).section("training")
  return None if training is None else TrainConfig.from_record(training)

def changed(before: TrainConfig, cfg: TrainConfig, names: tuple[str, ...]) -> list[str]:
  """"--name: old -> new" of each option in `names` whose value differs between the configs."""
  old, new = before.to_dict(), cfg.to_dict()
  return [f"--{k}: {old[k]!r} -> {new[k]!r}" for k in names if old[k] != new[k]]

def check_resumable(model_dir: str, model_config, shards_max_seq_len: int = 0) -> None:
  """Refuses to resume a model dir whose checkpoints belong to another architecture.

  Checked before config.json is rewritten, so a wrong --config/--init_from never leaves the old
  checkpoints beside a config.json that does not describe them. Dropout may change, and so may
  the position table grow when the train shards (`shards_max_seq_len`) hold sequences longer
  than it: the next phase of a shorter-then-longer schedule (run.py grows the table).
  """
  if not checkpoint_files.steps_on_disk(model_dir):
    return
  try:
    old = model_dir_lib.read_config(model_dir)
  except ValueError:
    return  # no readable config.json yet: the restore itself will check the shapes
  ignore = registry.free_fields(model_config)
  # Every field, defaults included (to_dict leaves the ablation's fields out when unset).
  new_d = {"family": model_config.family, **dataclasses.asdict(model_config)}
  old_d = {"family": old.family, **dataclasses.asdict(old)}
  diff = sorted(k for k in new_d if k not in ignore and new_d[k] != old_d.get(k))
  if (diff == ["max_positions"] and new_d["max_positions"] > old_d["max_positions"]
      and shards_max_seq_len > old.max_seq_len):
    return  # a longer phase: the table grows on resume (run.py, shorter_checkpoint_config)
  if diff:
    hint = ("--config/--init_from it was trained with" if diff != ["type_vocab_size"] else
            "token-type table it was trained with (--model_option=type_vocab_size=N)")
    if diff == ["vocab_size"] and new_d["vocab_size"] > old_d["vocab_size"]:
      hint = (f"vocabulary it was trained with; to continue it on shards of a grown vocabulary, "
              f"start a new model dir from it: --init_from={model_dir} --model_dir=NEW")
    raise ValueError(
        f"--model_dir={model_dir!r} holds checkpoints of another model ("
        + ", ".join(f"{k}: {old_d.get(k)} there, {new_d[k]} now" for k in diff)
        + f"): use a new --model_dir, or the {hint}")

def shorter_checkpoint_config(model_dir: str, model_config):
  """The config of the newest complete checkpoint in `model_dir` when its position table is
  shorter than `model_config`'s (a longer phase resuming a shorter one's model dir: run.py grows
  the table), else None. Read from the checkpoint's shapes, so a resume stopped before its first
  grown save (config.json already rewritten) grows again."""
  prefix = checkpoint_files.newest_complete(model_dir)
  if prefix is None or not registry.family_of(model_config).position_table:
    return None
  shape = _checkpoint_shape(prefix, "model",
                            ("position_embedding", framework_internals.EMBEDDING_TABLE))
  if not shape or shape[0] >= model_config.max_positions:
    return None
  return model_config.replace(max_positions=shape[0])

def _checkpoint_shape(prefix: str, root: str, tail: tuple[str, ...]) -> list[int] | None:
  """The shape of the variable at object path `root`/.../`tail` in a checkpoint (its object
  graph: a training checkpoint files a model variable under the key of whichever path reached
  it first, often the optimizer's), or None when unreadable or absent."""
  try:
    reader = checkpoint_files.reader(prefix)  # not tf.train.load_checkpoint: URLs (see there)
    graph = framework_internals.checkpoint_object_graph(reader)
  except (tf.errors.OpError, ValueError, IndexError, RuntimeError):
    # Unreadable (IndexError: TF's reader on a short data file): the restore names the problem.
    return None
  start = [c.node_id for c in graph.nodes[0].children if c.local_name == root]
  queue, seen = [(n, ()) for n in start], set(start)
  while queue:
    node, path = queue.pop(0)
    if path[-len(tail):] == tail:
      keys = [a.checkpoint_key for a in graph.nodes[node].attributes
              if a.name == "VARIABLE_VALUE"]
      return list(reader.get_variable_to_shape_map()[keys[0]]) if keys else None
    for child in graph.nodes[node].children:
      if child.node_id not in seen:
        seen.add(child.node_id)
        queue.append((child.node_id, (path + (child.local_name,))[-len(tail):]))
  return None

# Settings that shape the update at a step besides the data: a resume that changes them goes on
# from the checkpoint's step under the new values (see check_schedule_change).
SCHEDULE_SETTINGS = ("learning_rate", "warmup_steps", "train_steps", "train_minutes",
                     "schedule", "decay_steps", "decay_fraction", "decay_shape", "decay_floor",
                     "optimizer", "weight_decay", "adam_beta1", "adam_beta2", "adam_epsilon",
                     "clip_norm")

def check_schedule_change(cfg: TrainConfig, log=None) -> None:
  """On a resume whose schedule or optimizer flags differ from the checkpoint's run: one line
  naming the old and new values and what happens (the run continues on the new schedule from
  the checkpoint's step, with the learning rate there under both). A --train_steps below the
  checkpoint's step leaves nothing to train and is refused.

  Raises:
    ValueError: --train_steps < the newest checkpoint's step, naming both.
  """
  steps = checkpoint_files.steps_on_disk(cfg.model.model_dir)
  if not steps or cfg.model.overwrite:
    return
  before = recorded_training(cfg.model.model_dir)
  if before is None:
    return
  step = max(steps)
  differs = changed(before, cfg, SCHEDULE_SETTINGS)
  if cfg.train_steps < step and not cfg.train_minutes:
    raise ValueError(
        f"--model_dir={cfg.model.model_dir!r} holds a checkpoint at step {step}, past "
        f"--train_steps={cfg.train_steps} (the run was started with {before.train_steps}): "
        f"nothing to train; pass a --train_steps above {step} to continue it, or --overwrite to "
        "start over")
  if not differs or log is None:
    return
  where = ""
  if not (cfg.train_minutes or before.train_minutes):  # a budget's rate depends on the clock
    old, new = (float(c.learning_rate_schedule()(step)) for c in (before, cfg))
    where = f", where the learning rate is {new:.3g} (the old schedule's: {old:.3g})"
  log(f"warning: resuming at step {step} with a changed schedule ({'; '.join(differs)}): "
      f"continuing on the new schedule from step {step}{where}; the optimizer's moments are "
      "kept")

# Settings that fix which sequences (and masks) each step reads; see warn_if_data_order_changed.
DATA_ORDER_SETTINGS = ("train_data", "batch_size", "max_seq_len", "seed",
                       "shuffle_buffer", "mask_rate", "max_predictions_per_seq", "masking",
                       "whole_word_masking", "dupe_factor")

def warn_if_data_order_changed(cfg: TrainConfig) -> None:
  """Logs a warning when a resume changes what the data position means.

  The position is a count of sequences of the global stream; with another global batch, seed
  or data, the resumed run reads a different stream than an uninterrupted one would have (it
  still trains, but is no longer exact). Replicas and accumulation steps may change freely.
  """
  if not checkpoint_files.steps_on_disk(cfg.model.model_dir):
    return
  before = recorded_training(cfg.model.model_dir)
  if before is None:
    return
  differs = changed(before, cfg, DATA_ORDER_SETTINGS)
  if differs:
    summaries_lib.log("warning: resuming with changed data settings (" + "; ".join(differs)
                      + "): the data stream will not continue exactly where it stopped")

def prepare_model_dir(cfg: TrainConfig, info: dict, model_config: models.RobertaConfig,
                      replicas: int) -> None:
  """On the chief, before the first step: warn about changed data settings on resume, write
  config.json (model + training + data, with the evaluation's mask rate), copy
  vocab.json/merges.txt beside the checkpoints."""
  warn_if_data_order_changed(cfg)
  # "training" records the run's input lanes as resolved (a resume's are the recorded ones).
  cfg = cfg.replace(input_lanes=inputs.input_lanes(cfg, info))
  write_config_json(cfg.model.model_dir, model_config.to_dict(), cfg,
                    extra={"data": {"train": cfg.train_data, "eval": cfg.eval_data,
                                    "vocab": info["vocab"], "special_ids": info["special_ids"],
                                    "replicas": replicas,
                                    # training's rate is "training"'s mask_rate
                                    "eval_mask_rate": registry.EVAL_MASK_RATE}})
  vocab_dir = vocab_info.find_vocab_dir(cfg.train_data, info)
  # A resume reaches here only on shards of the model dir's own vocabulary (vocab_checks).
  model_dir = model_dir_lib.ModelDir(cfg.model.model_dir)
  if vocab_dir is None or len(model_dir.copy_vocabulary(vocab_dir)) < 2:
    summaries_lib.log(f"warning: vocab.json/merges.txt of {cfg.train_data} not found (sha256 "
                      f"{info['vocab']['sha256'][:12]}...): export will need --vocab_dir")
