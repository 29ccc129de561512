"""A trained model's weights in a larger model of the same architecture: a grown vocabulary
(its plan: tokenization/vocab_growth.py; its rows: `grown_rows`, `grown_bias` here) and/or a
longer position table (models/roberta/position_growth.py).

`copy_grown(source, target, ...)` assigns every weight of `source` to the same weight of
`target`; the token embedding (= the tied MLM decoder), the decoder's bias and the position
table may be larger in `target` and grow as those modules say; every other weight must have the
same shape. `train --init_from` uses it when the shards need more ids or positions than the
init model has (pretraining/task.py: model_config_for).

A new token's row starts as
- `mean` (the default; the usual initialisation of a token spelled by existing pieces): the
  mean of its pieces' embedding rows (the plan's `pieces`: the old merges applied to its
  bytes), and its decoder bias the mean of its pieces' biases, so the new token starts where
  the model already puts its spelling;
- `normal`: N(0, initializer_range) (the model's own init) and bias 0.
The old rows are copied unchanged, so on inputs made of old ids the logits over the old ids are
the source model's exactly (the softmax over the grown vocabulary is not: the new tokens take a
share of the probability).
"""

from __future__ import annotations

import numpy as np

from roberta_tf.models import registry
from roberta_tf.models.roberta import position_growth
from roberta_tf.models.roberta.encoder import EMBEDDINGS_NAME
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer
from roberta_tf.tokenization.vocab_growth import VocabGrowth

# Config fields that may differ between the source and the grown target.
GROWABLE = ("vocab_size", "max_positions")
NEW_TOKEN_INITS = ("mean", "normal")


class GrowthError(ValueError):
  """The target is not a grown copy of the source's architecture."""


def differences(source_config, target_config) -> dict[str, tuple]:
  """{field: (source value, target value)} of the architecture fields that differ (dropout
  aside)."""
  a, b = source_config.to_dict(), target_config.to_dict()
  ignore = registry.free_fields(target_config) + ("family",)
  pairs = {k: (getattr(source_config, k, None), getattr(target_config, k, None))
           for k in sorted(set(a) | set(b)) if k not in ignore}
  return {k: pair for k, pair in pairs.items() if pair[0] != pair[1]}


def check_growable(source_config, target_config) -> dict[str, tuple]:
  """The growable fields that differ; raises GrowthError for any other difference or a
  shrink."""
  diff = differences(source_config, target_config)
  bad = {k: v for k, v in diff.items() if k not in GROWABLE or v[1] < v[0]}
  if bad:
    raise GrowthError("cannot grow the model: " + ", ".join(
        f"{k} {old} -> {new}" for k, (old, new) in bad.items())
        + " (only vocab_size and max_positions may grow)")
  return diff


def _tables(model: RobertaPretrainer) -> dict[str, object]:
  """The rows that grow: the token table (= tied decoder), the MLM decoder's bias and the
  position table, where the family has them (ModernBERT: no position table; a bias only with
  decoder_bias)."""
  embeddings = model.encoder.get_layer(EMBEDDINGS_NAME)
  tables = {"token": embeddings.token_embedding.embeddings}
  position = getattr(embeddings, "position_embedding", None)
  if position is not None:
    tables["position"] = position.embeddings
  bias = getattr(model.mlm_head, "output_bias", getattr(model.mlm_head, "decoder_bias", None))
  if bias is not None:
    tables["bias"] = bias
  return tables


def copy_grown(source: RobertaPretrainer, target: RobertaPretrainer,
               growth: VocabGrowth | None = None, new_token_init: str = "mean",
               seed: int = 0) -> dict[str, tuple[int, int]]:
  """Assigns `source`'s weights to `target`, growing the vocabulary rows and positions.

  Args:
    source: the trained model.
    target: a model whose config equals the source's but for a larger vocab_size and/or
      max_positions (check_growable).
    growth: the vocabulary's growth (vocab_growth.plan), needed when vocab_size grows.
    new_token_init: "mean" or "normal" (the module docstring).
    seed: the normal init's seed.

  Returns:
    {"vocab_size": (old, new), "max_positions": (old, new)} for what grew.
  Raises:
    GrowthError: another difference, a shrink, or a vocabulary growth without `growth` (or
      with one of other sizes).
  """
  diff = check_growable(source.config, target.config)
  if "vocab_size" in diff and (growth is None or (growth.old_size, growth.new_size)
                               != diff["vocab_size"]):
    raise GrowthError(f"vocab_size {diff['vocab_size'][0]} -> {diff['vocab_size'][1]} needs the "
                      "vocabulary's growth plan (which old pieces spell each new token)")
  src_tables, dst_tables = _tables(source), _tables(target)
  special = {id(v): name for name, v in dst_tables.items()}
  if len(source.weights) != len(target.weights):
    raise GrowthError(f"the models have {len(source.weights)} and {len(target.weights)} weights")
  rng = np.random.default_rng(seed)
  for src, dst in zip(source.weights, target.weights, strict=True):
    value = np.asarray(src.numpy())
    name = special.get(id(dst))
    if name is not None and src is not src_tables[name]:
      raise GrowthError(f"weight order differs at {dst.path}")
    if name == "token" and "vocab_size" in diff:
      value = grown_rows(value, growth, new_token_init,
                                      target.config.initializer_range, rng)
    elif name == "bias" and "vocab_size" in diff:
      value = grown_bias(value, growth, new_token_init)
    elif name == "position" and "max_positions" in diff:
      value = position_growth.grown_positions(value, target.config.max_positions,
                                              target.config.pad_id)
    if tuple(value.shape) != tuple(dst.shape):
      raise GrowthError(f"{dst.path}: shape {tuple(value.shape)} in the source, "
                        f"{tuple(dst.shape)} in the grown model")
    dst.assign(value)
  return diff


def grown_rows(old: np.ndarray, growth: VocabGrowth, init: str, stddev: float,
               rng: np.random.Generator) -> np.ndarray:
  """A token table [old_size, H] -> [new_size, H]: old rows kept, new rows by `init`."""
  _check_init(init)
  if init == "mean":
    new = np.stack([old[list(p)].mean(axis=0) for p in growth.pieces])
  else:
    new = rng.normal(0.0, stddev, size=(len(growth.tokens), old.shape[1]))
  return np.concatenate([old, new.astype(old.dtype)], axis=0)


def grown_bias(old: np.ndarray, growth: VocabGrowth, init: str) -> np.ndarray:
  """The decoder bias [old_size] -> [new_size]: mean of the pieces' biases, or 0 (normal)."""
  _check_init(init)
  if init == "mean":
    new = np.array([old[list(p)].mean() for p in growth.pieces], old.dtype)
  else:
    new = np.zeros(len(growth.tokens), old.dtype)
  return np.concatenate([old, new])


def _check_init(init: str) -> None:
  if init not in NEW_TOKEN_INITS:
    raise ValueError(f"--new_token_init={init!r}: must be one of {', '.join(NEW_TOKEN_INITS)}")
