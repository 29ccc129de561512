"""Linguistic evaluation of a checkpoint on minimal pairs (BLiMP): `evaluate --minimal_pairs`.

Each sentence is scored by its pseudo-log-likelihood (models/pseudo_log_likelihood.py; the
SavedModel's `score` signature computes the same), tokenized by the model dir's own TF-native
tokenizer exactly as the SavedModel tokenizes (`<s> ... </s>`, truncated to max_seq_len). A pair
is right when the good sentence's PLL is higher (data/minimal_pairs.py). The accuracy, overall
and per phenomenon, also goes to TensorBoard: run `eval`, tags `blimp/accuracy` and
`blimp/<phenomenon>`, at the checkpoint's training step.
"""

from __future__ import annotations

import time

import numpy as np
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.data import minimal_pairs
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models import pseudo_log_likelihood
from roberta_tf.tokenization import pipeline_tokenizer, vocab_files


def score_texts(pretrainer, tokenizer, texts: list[str], max_seq_len: int, batch_size: int = 32,
                log=None) -> np.ndarray:
  """PLL float64 [len(texts)], `batch_size` texts per call (progress to `log` every ~10 s)."""

  @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
  def score(batch):
    ids, mask = tokenizer.model_inputs(batch, max_seq_len)
    return pseudo_log_likelihood.pll_scores(pretrainer, ids, mask, tokenizer.mask_id)[0]

  out, start, last = [], time.monotonic(), time.monotonic()
  for i in range(0, len(texts), batch_size):
    out.append(score(tf.constant(texts[i:i + batch_size])).numpy())
    if log and time.monotonic() - last > 10:
      done = min(i + batch_size, len(texts))
      eta = (time.monotonic() - start) / done * (len(texts) - done)
      log(f"scored {done:,}/{len(texts):,} sentences, ETA {eta:.0f} s")
      last = time.monotonic()
  return np.concatenate(out).astype(np.float64) if out else np.zeros([0])


def _checkpoint_step(checkpoint: str) -> int:
  tail = files.basename(checkpoint).rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else 0


def evaluate_minimal_pairs(model_dir: str, path: str, *, checkpoint: str | None = None,
                           batch_size: int = 32, max_seq_len: int | None = None,
                           per_paradigm: int = 0, write_summaries: bool = True,
                           log=None) -> dict:
  """Scores every pair of `path` (a BLiMP .jsonl[.gz] file or directory) with the model.

  `per_paradigm` > 0 scores a fixed sample of that many pairs per paradigm
  (minimal_pairs.read).

  Returns:
    {"accuracy", "pairs", "by_phenomenon", "by_paradigm", "checkpoint"}.
  Raises:
    MinimalPairsError, ModelDirError, ValueError: naming the file or flag.
  """
  pairs = minimal_pairs.read(path, per_paradigm=per_paradigm)
  config = models.read_config(model_dir)
  if not vocab_files.vocabulary_files(model_dir):  # neither kind (half of one: the loader says)
    raise ValueError(f"no {vocab_files.VOCAB_FILE} + {vocab_files.MERGES_FILE} or "
                     f"{vocab_files.TOKENIZER_FILE} in --model_dir={model_dir!r}: minimal pairs "
                     "are tokenized with the model dir's vocabulary")
  tokenizer = pipeline_tokenizer.load_tokenizer(model_dir)
  if tokenizer.vocab_size != config.vocab_size:
    raise ValueError(f"the vocabulary in {model_dir!r} has {tokenizer.vocab_size} ids, the "
                     f"model {config.vocab_size}")
  max_seq_len = max_seq_len or config.max_seq_len
  if not 3 <= max_seq_len <= config.max_seq_len:
    raise ValueError(f"--max_seq_len={max_seq_len}: must be in [3, {config.max_seq_len}]")
  checkpoint = model_dir_lib.resolve_checkpoint(model_dir, checkpoint)
  pretrainer = models.load(model_dir, dtype="float32", checkpoint=checkpoint)
  scores = score_texts(pretrainer, tokenizer, [p.good for p in pairs] + [p.bad for p in pairs],
                       max_seq_len, batch_size, log)
  result = minimal_pairs.summarize(pairs, scores[:len(pairs)], scores[len(pairs):])
  result["checkpoint"] = checkpoint
  if write_summaries:
    writer = tf.summary.create_file_writer(files.join(model_dir, "eval"))
    with writer.as_default(step=_checkpoint_step(checkpoint)):
      tf.summary.scalar("blimp/accuracy", result["accuracy"],
                        description=f"minimal pairs right (PLL), {result['pairs']} pairs of "
                        f"{files.basename(files.normalize(path))}")
      for name, value in result["by_phenomenon"].items():
        tf.summary.scalar(f"blimp/{name}", value)
    writer.close()
  return result
