"""A model directory: `config.json` + TF checkpoints of `tf.train.Checkpoint(model=pretrainer)`
(+ the vocabulary's vocab.json and merges.txt).

```
model_dir/
  config.json                      a config's to_json() ("family": absent = roberta), or
                                   sections: {"model": ..., "training": ..., "data": ...}
                                   (pretraining), {"model": ..., "task": ..., "finetune":
                                   ...} (fine-tuning)
  checkpoint                       the CheckpointManager index (latest_checkpoint reads it)
  ckpt-N.index, ckpt-N.data-*      variables; the object key "model" is the family's pretrainer
  vocab.json, merges.txt           the vocabulary the model reads (training copies the shards')
```
`ModelDir` is the one owner of config.json and of the vocabulary files' place in a model dir:
nothing else opens config.json. Its vocabulary is known by its content (`ModelDir.vocabulary`:
the sha256 of vocab.json and merges.txt, computed when read; tokenization/vocab_files.VocabId)
and checked wherever the model meets shards or another vocabulary (`check_vocabulary`).
Training writes more keys into the same checkpoints (optimizer, step, data position); `load`
restores only "model" and ignores the rest. A model dir may be a URL (gs://, ram://, ...):
`save` writes it locally and publishes it whole (atomic_write.atomic_dir).

Checkpoint keys follow TF's object graph: `model/encoder/_operations/<i>/<sublayer>/...` (i is
the layer's place in the functional graph: 2 = embeddings, 3.. = transformer layers, fixed by
`build_encoder`) and `model/mlm_head/...`. Keras layer names ("embeddings",
"transformer_layer_3/query", ...) are the `variable.path`s and what the converters look up.
"""

from __future__ import annotations

import gc
import logging
import re

import tensorflow as tf

from roberta_tf.common import atomic_write
from roberta_tf.common import files as fileio  # `files` is save()'s argument
from roberta_tf.models import checkpoint_files, registry
from roberta_tf.models.roberta.config import ConfigError
from roberta_tf.tokenization import vocab_files, vocab_growth
from roberta_tf.tokenization.vocab_files import VocabId

CONFIG_FILE = "config.json"
CHECKPOINT_NAME = "ckpt"
# train --keep_best's model dir inside a run's (pretraining/best_checkpoint.py); --checkpoint=best
BEST_DIR = "best"


class ModelDirError(ValueError):
  """A model directory is missing files or its checkpoint does not fit its config."""


class ModelDir:
  """A model directory's config.json sections and vocabulary files (see the module docstring).

  `flag` names the directory in messages ("--init_from", "--model_dir", ...).
  """

  def __init__(self, path: str, flag: str = "--model_dir"):
    self.path, self.flag = path, flag

  @property
  def config_path(self) -> str:
    return fileio.join(self.path, CONFIG_FILE)

  def has_config(self) -> bool:
    return fileio.isfile(self.config_path)

  def read(self) -> dict:
    """config.json as {section: value}; a bare RobertaConfig object is {"model": it}.

    Raises:
      ModelDirError: one line naming the file: absent, unreadable, not JSON, not an object.
    """
    path = self.config_path
    if not fileio.exists(path):
      raise ModelDirError(f"{path} not found: {self.path!r} is not a model directory "
                          f"(expected {CONFIG_FILE} and a TF checkpoint)")
    doc = fileio.read_json_object(path, ModelDirError)
    return doc if isinstance(doc.get("model"), dict) else {"model": doc}

  def section(self, name: str) -> dict | None:
    """config.json's `name` section ("training", "data", "task", "finetune", ...), or None when
    config.json is absent or unreadable or has no such object (for readers with a fallback)."""
    try:
      value = self.read().get(name)
    except ModelDirError:
      return None
    return value if isinstance(value, dict) else None

  def model_config(self, doc: dict | None = None):
    """The model config in config.json ("model", or the whole object; of `doc` when the
    caller has read it already), of the family it names (models/registry.py; absent:
    RobertaConfig); ModelDirError if none."""
    try:
      return registry.config_from_dict((doc or self.read())["model"])
    except (ConfigError, TypeError) as e:
      raise ModelDirError(f"{self.config_path}: {e}") from e

  def write(self, doc: dict) -> str:
    """Writes config.json (`doc`: {section: value}) atomically, creating the directory."""
    fileio.makedirs(self.path)
    return atomic_write.write_json(self.config_path, doc)

  def config_text(self) -> str:
    return fileio.read_text(self.config_path)

  def vocabulary(self) -> VocabId | None:
    """The model's vocabulary by content: of the vocab.json + merges.txt beside the
    checkpoints; else as config.json's "data" section records the training shards' (a run
    whose vocab files were not found); None when neither exists."""
    found = VocabId.of_dir(self.path)
    if found is not None:
      return found
    record = (self.section("data") or {}).get("vocab")
    if not isinstance(record, dict) or "size" not in record:
      return None
    found = VocabId.of_record(record)
    return found if found.files else None

  def copy_vocabulary(self, src_dir: str) -> list[str]:
    """Copies vocab.json + merges.txt (where present) from `src_dir`; returns the names."""
    return vocab_files.copy_vocab_files(src_dir, self.path)

  def check_vocabulary(self, other: VocabId, other_side: tuple[str, str],
                       other_dir: str | None, *, hint: str, grow: bool = False,
                       warn=None) -> vocab_growth.VocabGrowth | None:
    """Refuses `other` (shards' or a vocabulary directory's, named by `other_side` = (flag,
    value), its files in `other_dir` if known) unless it is this model's vocabulary or, with
    `grow`, one that extends it; returns the growth plan then (vocab_growth.check, which says
    in one line to `warn`, default stdout, when an older record was compared in part).

    Raises:
      vocab_growth.VocabGrowthError: one line naming both (`hint`: what to do instead).
    """
    return vocab_growth.check(self.vocabulary(), other, model_side=(self.flag, self.path),
                              other_side=other_side, model_dir=self.path, other_dir=other_dir,
                              grow=grow, hint=hint, warn=warn)


def read_config(model_dir: str):
  """The model config (any family's) in `model_dir/config.json` (ModelDir.model_config)."""
  return ModelDir(model_dir).model_config()


def latest_checkpoint(model_dir: str) -> str:
  """The prefix of the newest checkpoint in `model_dir`, or a clear error.

  Read from the files on disk (checkpoint_files), so a model dir without its `checkpoint`
  index file still has one. A damaged newest checkpoint (a file missing or truncated) is an
  error naming the file and the newest complete one to pass as --checkpoint instead: the
  caller asked for the newest, and silently reading an older one would be a wrong answer.
  """
  steps = checkpoint_files.steps_on_disk(model_dir)
  if not steps:
    if not fileio.isdir(model_dir):
      raise ModelDirError(f"{model_dir!r} is not a directory (expected a model dir: config.json "
                          f"and {CHECKPOINT_NAME}-N checkpoint files)")
    raise ModelDirError(f"no TF checkpoint in {model_dir!r} (expected {CHECKPOINT_NAME}-N.index "
                        f"and {CHECKPOINT_NAME}-N.data-* files, as tf.train.CheckpointManager "
                        "writes)")
  prefix = checkpoint_files.prefix_of(model_dir, steps[-1])
  what = checkpoint_files.problem(prefix)
  if what:
    raise ModelDirError(checkpoint_files.damaged_message(prefix, what))
  return prefix


def check_checkpoint(prefix: str) -> None:
  """Raises ModelDirError unless `prefix` names a complete checkpoint (its files are there)."""
  # A prefix with an index file is a checkpoint, whatever isdir says (ram:// calls every
  # prefix of a file name a directory).
  if fileio.isdir(prefix) and not fileio.exists(prefix + ".index"):
    raise ModelDirError(f"checkpoint {prefix!r} is a directory; give a checkpoint prefix such as "
                        f"{fileio.join(prefix, CHECKPOINT_NAME)}-N")
  if not fileio.exists(prefix + ".index") and not checkpoint_files.files_of(prefix):
    directory = fileio.dirname(prefix) or "."
    raise ModelDirError(f"checkpoint {prefix!r} not found (no {prefix}.index; give a prefix "
                        f"such as {fileio.join(directory, CHECKPOINT_NAME)}-N)")
  what = checkpoint_files.problem(prefix)
  if what:
    raise ModelDirError(checkpoint_files.damaged_message(prefix, what))


def resolve_checkpoint(model_dir: str, checkpoint: str | None = None) -> str:
  """The checkpoint a reader of `model_dir` reads: `checkpoint` (a prefix, checked), "best"
  (the newest checkpoint of model_dir/best/, written by train --keep_best), or by default the
  newest in `model_dir` (latest_checkpoint).

  Raises:
    ModelDirError: the checkpoint is not there or damaged (naming it), or "best" without a
      best/ directory (naming --keep_best).
  """
  if checkpoint == BEST_DIR:
    best = fileio.join(model_dir, BEST_DIR)
    if not checkpoint_files.steps_on_disk(best):
      raise ModelDirError(f"--checkpoint=best: no best checkpoint in {best} (train writes one "
                          "with --keep_best and --eval_data)")
    return latest_checkpoint(best)
  if checkpoint:
    check_checkpoint(checkpoint)
    return checkpoint
  return latest_checkpoint(model_dir)


def restore(pretrainer, checkpoint_prefix: str) -> None:
  """Restores the "model" key of a checkpoint into `pretrainer`; every model variable must match.

  Raises:
    ModelDirError: the checkpoint is unreadable (damaged: the message names its files), lacks
      some of the model's variables, or has a variable of another shape (the TF message names
      both shapes).
  """
  # A failed restore leaves TF's restore state behind, which logs a warning for every value it
  # did not restore (a hundred lines: the optimizer's, the counters') when it is collected:
  # that is when the TF error is dropped, here, with TF's Python logger quieted.
  logger = tf.get_logger()
  level = logger.level
  logger.setLevel(logging.ERROR)
  try:
    failure = _restore_failure(pretrainer, checkpoint_prefix)
    if failure is not None:
      gc.collect()  # the restore state, if a reference cycle kept it past the TF error
  finally:
    logger.setLevel(level)
  if failure is not None:
    raise failure


def _restore_failure(pretrainer, checkpoint_prefix: str) -> ModelDirError | None:
  """`restore`'s work: None when restored, else the error to raise (not chained to TF's, whose
  traceback would keep the failed restore's state alive past the quieted logger)."""
  try:
    status = tf.train.Checkpoint(model=pretrainer).restore(checkpoint_prefix)
    status.expect_partial()  # Optimizer, step and data state are the train step's business.
    status.assert_existing_objects_matched()
  except AssertionError as e:
    # TF's message prints whole variable values; name the variables and shapes instead.
    missing = re.findall(r"Variable path=([^,]+), shape=(\([^)]*\))", str(e))
    listed = ", ".join(f"{name} {shape}" for name, shape in missing) or str(e)[:500]
    return ModelDirError(f"checkpoint {checkpoint_prefix} lacks variables of the model built "
                         f"from its config ({pretrainer.config}): {listed}")
  except (tf.errors.DataLossError, tf.errors.OutOfRangeError, IndexError) as e:
    # IndexError: TF's CheckpointReader on a short data file ("Read less bytes than requested").
    return ModelDirError(checkpoint_files.damaged_message(
        checkpoint_prefix, checkpoint_files.read_problem(checkpoint_prefix, e)))
  except (tf.errors.OpError, ValueError) as e:
    return ModelDirError(f"checkpoint {checkpoint_prefix} does not fit the model built from its "
                         f"config ({pretrainer.config}): {e}")
  return None


def load(model_dir: str, dtype=None, checkpoint: str | None = None, serving: bool = False):
  """The pretrainer described by `model_dir`, with its weights.

  Args:
    model_dir: a directory written by `save`, the converter or training.
    dtype: dtype policy to build with (weights are float32 either way).
    checkpoint: a checkpoint prefix to read instead of the newest one in `model_dir`, or
      "best" (`resolve_checkpoint`).
    serving: build the exports' inference-only layout (registry.build_pretrainer).

  Returns:
    The family's pretrainer (registry.build_pretrainer) with the checkpoint's weights.
  """
  config = read_config(model_dir)
  prefix = resolve_checkpoint(model_dir, checkpoint)
  pretrainer = registry.build_pretrainer(config, dtype=dtype, serving=serving)
  restore(pretrainer, prefix)
  return pretrainer


def save(model_dir: str, pretrainer, overwrite: bool = False,
         files: dict[str, str] | None = None) -> str:
  """Writes `pretrainer` as a new model directory (config.json + one checkpoint).

  The directory is assembled under a temporary name and renamed when complete, so an
  interrupted save never leaves a directory that looks like a model.

  Args:
    model_dir: the directory to create (absent or empty unless `overwrite`).
    pretrainer: the model; its `config` goes to config.json.
    overwrite: replace an existing non-empty `model_dir`.
    files: {name in model_dir: source path} copied in before the rename (e.g. vocab.json and
      merges.txt), so the directory never appears without them.

  Returns:
    The checkpoint prefix inside `model_dir`.
  """
  model_dir = fileio.normalize(model_dir)
  if fileio.isdir(model_dir) and fileio.listdir(model_dir) and not overwrite:
    raise ModelDirError(f"{model_dir!r} exists and is not empty; refusing to overwrite it")
  if fileio.exists(model_dir) and not fileio.isdir(model_dir):
    raise ModelDirError(f"{model_dir!r} exists and is not a directory")
  # Disk full: no half-written copy. On a URL `tmp` is a local directory, uploaded when done.
  with atomic_write.atomic_dir(model_dir) as tmp:
    pretrainer.config.save(fileio.join(tmp, CONFIG_FILE))
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=pretrainer), tmp,
                                         max_to_keep=1, checkpoint_name=CHECKPOINT_NAME)
    prefix = manager.save(checkpoint_number=0)
    for name, src in (files or {}).items():
      fileio.copy(src, fileio.join(tmp, name))  # `src` may be a URL (a preset's vocabulary)
  return fileio.join(model_dir, fileio.basename(prefix))
