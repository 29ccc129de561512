"""Text embeddings as a fine-tuning problem: contrastive training on pairs, retrieval on dev.

Loss: multiple-negatives ranking (sentence-transformers' MultipleNegativesRankingLoss): each
anchor's cosine similarity, times `scale` (--similarity_scale, 20), with every positive and hard
negative of the GLOBAL batch -- gathered from every replica and worker (ReplicaContext.
all_gather, whose gradient flows back to the replica that made each vector) -- and the
cross-entropy of its own positive. So N replicas x B rows train as 1 replica x N*B rows: the
same candidates, loss and gradient. `symmetric` (--symmetric_loss) averages it with the
positives' loss over the anchors (MultipleNegativesSymmetricRankingLoss). With
--grad_accum_steps > 1 the candidates are one micro-batch's (global over replicas).

Dev: the BEIR-style set's corpus and queries embedded (problem_data's order: documents, then
queries, then STS sentences), each query's documents ranked by cosine, scored by pytrec_eval
(embed_scores.py); with an STS file also Spearman's rho ("sts_spearman").
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from roberta_tf.finetuning import bucketing, featurize
from roberta_tf.finetuning.embedding import embed_data, embed_scores
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.problems import Evaluation, Problem, ragged_dataset


def _global(x: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
  """(x gathered from every replica along axis 0, the offset of this replica's rows in it)."""
  ctx = tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync == 1:
    return x, tf.constant(0, tf.int32)
  sizes = ctx.all_gather(tf.shape(x)[:1], axis=0)                     # [replicas]
  replica = tf.cast(ctx.replica_id_in_sync_group, tf.int32)
  offset = tf.reduce_sum(sizes[:replica])
  return ctx.all_gather(x, axis=0), offset


def ranking_loss_sum(embeddings: tf.Tensor, scale: float, symmetric: bool = False) -> tf.Tensor:
  """Summed loss of this replica's rows (see the module docstring).

  Args:
    embeddings: float32 [b, T, H], L2-normalized: each row's anchor, positive (and negative).
  """
  anchors, candidates = embeddings[:, 0], embeddings[:, 1:]
  b = tf.shape(anchors)[0]
  columns = []
  for t in range(candidates.shape[1]):  # positives first, then negatives (ST's order)
    gathered, offset = _global(candidates[:, t])
    columns.append(gathered)
  targets = offset + tf.range(b)
  logits = scale * tf.matmul(anchors, tf.concat(columns, 0), transpose_b=True)
  loss = tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets,
                                                                      logits=logits))
  if not symmetric:
    return loss
  all_anchors, _ = _global(anchors)
  back = scale * tf.matmul(candidates[:, 0], all_anchors, transpose_b=True)
  return 0.5 * (loss + tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(
      labels=targets, logits=back)))


class EmbeddingProblem(Problem):
  """Rows of (anchor, positive[, negative]) in, L2-normalized vectors out."""

  def __init__(self, info: ProblemInfo, tokenizer, train: list[tuple[str, ...]],
               dev: embed_data.RetrievalSet, sts=None, *, scale: float = 20.0,
               symmetric: bool = False, batching: str = bucketing.RANDOM):
    super().__init__(info, tokenizer.pad_id, batching)
    self.scale, self.symmetric = scale, symmetric
    self._tokenizer = tokenizer
    width = len(train[0])
    ids = self._ids([t for row in train for t in row])
    self._train = (tf.RaggedTensor.from_uniform_row_length(ids, width),  # [N, T, None]
                   np.zeros(len(train), np.int32))
    self.num_train = len(train)
    self.dev, self.sts = dev, sts
    texts = dev.docs + dev.queries + (list(sts[0]) + list(sts[1]) if sts else [])
    self._eval = (self._ids(texts), np.zeros(len(texts), np.int32))
    self.num_eval = len(texts)

  def _ids(self, texts) -> tf.RaggedTensor:
    return featurize.build_inputs(featurize.tokenize(self._tokenizer, texts), None,
                                  self.info.max_seq_len, self._tokenizer.template)

  def eval_dataset(self, batch_size: int) -> tf.data.Dataset:
    # Sorted by length would be faster; file order keeps evaluate's split simple.
    ds = ragged_dataset(*self._eval, self.pad_id)
    return bucketing.batch(ds, batch_size, self.pad_id, self._padded_length()).map(
        lambda inputs, labels: inputs)

  def metric_names(self):
    return self.info.metric_names() + (("sts_spearman",) if self.sts else ())

  def loss_sum(self, outputs, labels):
    del labels
    return ranking_loss_sum(outputs["embeddings"], self.scale, self.symmetric)

  def evaluate(self, batch_outputs):
    vectors = np.concatenate([b["embeddings"] for b in batch_outputs]).astype(np.float32)
    dev = self.dev
    n_docs, n_queries = len(dev.docs), len(dev.queries)
    run = embed_scores.ranking(vectors[n_docs:n_docs + n_queries], vectors[:n_docs],
                               dev.query_ids, dev.doc_ids)
    scores = embed_scores.retrieval_scores(dev.qrels, run)
    if self.sts:
      pairs = vectors[n_docs + n_queries:]
      half = len(pairs) // 2
      scores["sts_spearman"] = embed_scores.sts_spearman(pairs[:half], pairs[half:],
                                                         self.sts[2])
    return Evaluation(scores)


def load(cfg, tokenizer) -> EmbeddingProblem:
  """A run's embedding problem (cfg: a FinetuneConfig)."""
  train = embed_data.read_pairs(cfg.train_file, cfg.text_fields)
  dev = embed_data.read_beir(cfg.eval_file)
  sts = embed_data.read_sts(cfg.sts_file) if cfg.sts_file else None
  info = ProblemInfo(cfg.task, cfg.data.max_seq_len, text_fields=tuple(cfg.text_fields),
                     pooling=cfg.pooling)
  return EmbeddingProblem(info, tokenizer, train, dev, sts, scale=cfg.similarity_scale,
                          symmetric=cfg.symmetric_loss, batching=cfg.batching)
