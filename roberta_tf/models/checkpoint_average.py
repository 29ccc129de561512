"""Checkpoint averaging (fairseq's scripts/average_checkpoints.py): the element-wise mean of the
weights of several checkpoints of one model, written as a new model dir.

`pick` names the checkpoints (the newest N complete ones of a model dir, or named ones),
`check_same_model` refuses checkpoints of another model or vocabulary, `average` computes the
mean, `write_average` writes the new model dir (common/atomic_write.atomic_dir: it appears
whole or not at all). Any family (models/registry.py): the pretrainer of the model dir's config
is built once and each checkpoint restored into it in turn.

The mean is exact in this sense: each float weight is the float64 mean of the N float32 values
(summed in float64 in the order given, divided by N), rounded once to float32: NumPy's
`np.mean(np.stack(ws).astype(np.float64), axis=0).astype(np.float32)`, bit for bit. Integer
weights (none in today's families) must be equal in every checkpoint and are kept.

The new model dir holds config.json (the source's, every section, plus "averaged": the source
model dir, the checkpoints and their steps), the vocabulary files, and one checkpoint
`ckpt-<newest step averaged>` of the pretrainer only: no optimizer moments (averaging Adam's
moments means nothing for a new run), no step or data position. Export, convert_checkpoint,
evaluate and finetune --init_from read it like any model dir; `train --init_from` starts a new
run from it (a fresh optimizer).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import tensorflow as tf

from roberta_tf.common import atomic_write, files
from roberta_tf.models import checkpoint_files, registry
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models.model_dir import ModelDirError

AVERAGED_SECTION = "averaged"  # config.json's record of what was averaged


def pick(model_dir: str, last: int = 0, names: tuple[str, ...] = ()) -> list[str]:
  """The checkpoint prefixes to average, oldest first: the newest `last` in `model_dir`, or
  `names` (prefixes, or names such as ckpt-600 taken in `model_dir`), each complete.

  Raises:
    ModelDirError, naming the flag: fewer than `last` checkpoints, a damaged or missing one,
      a name given twice.
  """
  if last:
    steps = checkpoint_files.steps_on_disk(model_dir)
    if len(steps) < last:
      listed = ", ".join(f"ckpt-{s}" for s in steps) or "none"
      raise ModelDirError(f"--last={last}: {model_dir} holds {len(steps)} checkpoints "
                          f"({listed})")
    prefixes = [checkpoint_files.prefix_of(model_dir, s) for s in steps[-last:]]
  else:
    prefixes = [name if "/" in name else files.join(model_dir, name) for name in names]
    twice = sorted({p for p in prefixes if prefixes.count(p) > 1})
    if twice:
      raise ModelDirError(f"--checkpoints names {', '.join(twice)} more than once")
  for prefix in prefixes:
    model_dir_lib.check_checkpoint(prefix)
  return prefixes


def check_same_model(model_dir: str, prefixes: list[str]) -> None:
  """Refuses a checkpoint (of `prefixes`) kept in another model dir whose config (bar dropout)
  or vocabulary differs from `model_dir`'s, or that is in no model dir. The shapes are checked
  again when each checkpoint is restored (ModelDirError naming the variables).

  Raises:
    ModelDirError naming the checkpoint and what differs.
  """
  home = model_dir_lib.ModelDir(model_dir)
  config, vocabulary = home.model_config(), home.vocabulary()
  ignore = registry.free_fields(config)
  fields = lambda c: {k: v for k, v in {"family": c.family, **dataclasses.asdict(c)}.items()
                      if k not in ignore}
  for prefix in prefixes:
    directory = files.dirname(prefix)
    if files.normalize(directory) == files.normalize(model_dir):
      continue
    other = model_dir_lib.ModelDir(directory, flag="--checkpoints")
    if not other.has_config():
      raise ModelDirError(f"--checkpoints: {prefix} is not in a model dir (no "
                          f"{other.config_path}): its model cannot be checked against "
                          f"--model_dir={model_dir}")
    theirs, ours = fields(other.model_config()), fields(config)
    diff = sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
    if "family" in diff:  # every other field differs too: the family says it
      diff = ["family"]
    if diff:
      raise ModelDirError(
          f"--checkpoints: {prefix} is of another model than --model_dir={model_dir} ("
          + ", ".join(f"{k}: {theirs.get(k)} there, {ours.get(k)} here" for k in diff) + ")")
    found = other.vocabulary()
    if (found is None) != (vocabulary is None) or (found and not found.same(vocabulary)):
      raise ModelDirError(f"--checkpoints: {prefix} was trained with another vocabulary than "
                          f"--model_dir={model_dir} (the vocab files of {directory} differ)")


def average(model_dir: str, prefixes: list[str]):
  """The pretrainer of `model_dir`'s config holding the mean of the checkpoints' weights (see
  the module docstring).

  Raises:
    ModelDirError: a checkpoint does not fit the model (naming it and the variables), or an
      integer weight differs between checkpoints.
  """
  pretrainer = registry.build_pretrainer(model_dir_lib.read_config(model_dir))
  totals, first = None, None
  for prefix in prefixes:
    model_dir_lib.restore(pretrainer, prefix)
    values = [np.asarray(w.numpy()) for w in pretrainer.weights]
    if totals is None:
      first = values
      totals = [v.astype(np.float64) if v.dtype.kind == "f" else v for v in values]
      continue
    for i, (w, v) in enumerate(zip(pretrainer.weights, values, strict=True)):
      if v.dtype.kind == "f":
        totals[i] += v  # float64 += float32: each value exact in float64
      elif not np.array_equal(v, first[i]):
        raise ModelDirError(f"{prefix}: the integer weight {w.path} differs from "
                            f"{prefixes[0]}'s: not averageable")
  for w, total in zip(pretrainer.weights, totals, strict=True):
    w.assign((total / len(prefixes)).astype(np.float32) if total.dtype.kind == "f" else total)
  return pretrainer


def write_average(model_dir: str, prefixes: list[str], output_dir: str,
                  overwrite: bool = False, log=print) -> str:
  """Averages `prefixes` (of `model_dir`'s model) into the new model dir `output_dir` (see the
  module docstring); returns its checkpoint prefix. Nothing is written when a check fails.

  Raises:
    ModelDirError: `output_dir` exists and is not empty (without `overwrite`), is `model_dir`
      or holds a checkpoint averaged; or a check of `check_same_model` / `average` failed.
  """
  output_dir = files.normalize(output_dir)
  sources = {files.normalize(d) for d in [model_dir, *map(files.dirname, prefixes)]}
  if output_dir in sources:
    raise ModelDirError(f"--output_dir={output_dir} is where the checkpoints are: write the "
                        "average into a new directory")
  if files.exists(output_dir) and not files.isdir(output_dir):
    raise ModelDirError(f"--output_dir={output_dir} exists and is not a directory")
  if files.isdir(output_dir) and files.listdir(output_dir) and not overwrite:
    raise ModelDirError(f"--output_dir={output_dir} exists and is not empty (pass --overwrite "
                        "to replace it)")
  check_same_model(model_dir, prefixes)
  doc = model_dir_lib.ModelDir(model_dir).read()
  pretrainer = average(model_dir, prefixes)
  steps = [checkpoint_files.step_of(p) for p in prefixes]
  doc[AVERAGED_SECTION] = {"model_dir": model_dir, "checkpoints": prefixes, "steps": steps,
                           "mean": "float64 sum of the float32 weights / N, cast to float32"}
  number = max((s for s in steps if s is not None), default=0)
  with atomic_write.atomic_dir(output_dir) as tmp:
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=pretrainer), tmp,
                                         max_to_keep=1,
                                         checkpoint_name=model_dir_lib.CHECKPOINT_NAME)
    prefix = manager.save(checkpoint_number=number)
    written = model_dir_lib.ModelDir(tmp)
    written.write(doc)
    copied = written.copy_vocabulary(model_dir)
  if not copied:
    log(f"warning: no vocabulary files in {model_dir}: export will need --vocab_dir")
  return files.join(output_dir, files.basename(prefix))
