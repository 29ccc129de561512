"""The held-out figures of an arm of benchmarks/quality/domain_adaptation.py: masked-LM loss per
byte and per token under RoBERTa's eval masking, and pseudo-log-likelihood per byte (its module
docstring says why both)."""

from __future__ import annotations

import os
import random

MASK_SEEDS = (0, 1, 2)
PLL_VERSES = 300


def held_out_scores(model_dir: str, shards: str) -> dict:
  """Masked-LM loss per byte and per token on the held-out shards (split "train" of a shard
  directory built from the held-out text only), under RoBERTa's eval masking with each of
  MASK_SEEDS; and tokens per word of the held-out text."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf import models  # pylint: disable=import-outside-toplevel
  from roberta_tf.data import masking, pipeline  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization.tokenizer import token_bytes_table  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization.vocab_files import read_vocab  # pylint: disable=import-outside-toplevel

  model = models.load(model_dir)
  vocab = read_vocab(os.path.join(shards, "vocab.json"))
  lengths = np.array([len(b) for b in token_bytes_table(vocab)], np.float64)
  special = [vocab[t] for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")]
  lengths[special] = 0
  nats = masked_bytes = masked_tokens = 0.0
  text_bytes = text_tokens = 0.0
  for seed in MASK_SEEDS:
    ds = pipeline.build_dataset(shards, "train", training=False, per_replica_batch_size=64,
                                max_seq_len=128, masking=masking.MaskingConfig(),
                                model_config=model.config, seed=seed, shuffle_buffer=0)
    for batch in ds:
      logits = model(batch, training=False)
      loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=batch["mask_ids"],
                                                            logits=logits)
      weights = batch["mask_weights"].numpy()
      ids = batch["mask_ids"].numpy()
      nats += float((loss.numpy() * weights).sum())
      masked_tokens += float(weights.sum())
      masked_bytes += float((lengths[ids] * weights).sum())
      if seed == MASK_SEEDS[0]:
        real = batch["padding_mask"].numpy().astype(bool)
        text_bytes += float(lengths[batch["input_ids"].numpy()][real].sum())
        text_tokens += float((real & ~np.isin(batch["input_ids"].numpy(), special)).sum())
  return {"loss_per_byte": nats / masked_bytes, "loss_per_token": nats / masked_tokens,
          "bytes_per_masked_token": masked_bytes / masked_tokens,
          "masked_share_of_text": masked_bytes / (text_bytes * len(MASK_SEEDS)),
          "held_out_tokens": int(text_tokens), "held_out_bytes": int(text_bytes)}


def pll_per_byte(model_dir: str, vocab_dir: str, held_out: str) -> dict:
  """Pseudo-log-likelihood per byte (Salazar et al. 2020): every token of PLL_VERSES held-out
  verses (the same verses in every arm, each under 60 words) masked in turn; the sum of
  -log P(token | the rest) over all of them / the verses' UTF-8 bytes. Every byte of the text is
  scored exactly once, whatever the vocabulary: the comparable twin of the loss per byte."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf import models  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.pseudo_log_likelihood import pll_scores  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization.tokenizer import BytePairTokenizer  # pylint: disable=import-outside-toplevel

  with open(held_out, encoding="utf-8") as f:
    verses = [v for v in f.read().split("\n") if v.strip() and len(v.split()) < 60]
  verses = random.Random(0).sample(verses, min(PLL_VERSES, len(verses)))
  model, tokenizer = models.load(model_dir), BytePairTokenizer.from_dir(vocab_dir)
  nats = tokens = 0.0
  for i in range(0, len(verses), 16):
    ids, mask = tokenizer.model_inputs(tf.constant(verses[i:i + 16]), 128)
    pll, count = pll_scores(model, ids, mask, tokenizer.mask_id)
    nats -= float(tf.reduce_sum(pll))
    tokens += float(tf.reduce_sum(count))
  text_bytes = sum(len(v.encode("utf-8")) for v in verses)
  return {"pll_per_byte": nats / text_bytes, "pll_verses": len(verses),
          "pll_tokens_per_byte": tokens / text_bytes}


