"""Text embeddings' dev metrics, computed by the field's library: `pytrec_eval` (trec_eval's
measures, what BEIR reports): nDCG@10, MRR@10 and Recall@100 of ranking each query's corpus by
cosine similarity; Spearman's rho of cosine similarities against STS scores."""

from __future__ import annotations

import numpy as np

from roberta_tf.finetuning import metrics

RETRIEVAL = ("ndcg_at_10", "mrr_at_10", "recall_at_100")
_TOP = 100  # documents kept per query (Recall@100 needs no more; nDCG@10 and MRR@10 fewer)


def ranking(query_vectors: np.ndarray, doc_vectors: np.ndarray, query_ids, doc_ids,
            top: int = _TOP) -> dict[str, dict[str, float]]:
  """{query id: {doc id: cosine}} of each query's `top` nearest documents (vectors are
  L2-normalized, so the dot product is the cosine)."""
  run = {}
  for start in range(0, len(query_ids), 256):
    scores = query_vectors[start:start + 256] @ doc_vectors.T
    k = min(top, scores.shape[1])
    best = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    for row, qid in enumerate(query_ids[start:start + 256]):
      run[qid] = {doc_ids[j]: float(scores[row, j]) for j in best[row]}
  return run


def retrieval_scores(qrels: dict[str, dict[str, int]], run: dict[str, dict[str, float]]
                     ) -> dict[str, float]:
  """nDCG@10, MRR@10 (trec_eval's recip_rank over each query's first 10) and Recall@100, the
  means over the queries of qrels."""
  import pytrec_eval  # pylint: disable=import-outside-toplevel
  evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100"})
  top10 = {q: dict(sorted(docs.items(), key=lambda kv: (-kv[1], kv[0]))[:10])
           for q, docs in run.items()}
  mrr = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
  per_query = evaluator.evaluate(run)
  mean = lambda results, key: float(np.mean([results[q][key] for q in qrels]))
  return {"ndcg_at_10": mean(per_query, "ndcg_cut_10"), "mrr_at_10": mean(mrr, "recip_rank"),
          "recall_at_100": mean(per_query, "recall_100")}


def sts_spearman(vectors_a: np.ndarray, vectors_b: np.ndarray, scores) -> float:
  """Spearman's rho of the pairs' cosine similarities against their gold scores."""
  return metrics.spearman(np.asarray(scores, np.float64),
                          np.sum(vectors_a * vectors_b, axis=1).astype(np.float64))
