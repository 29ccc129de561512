"""Text embeddings: contrastive fine-tuning on pairs, retrieval and STS on dev.

Modules, in the order data flows through them:
  embed_data     training pairs, a BEIR-layout retrieval set, STS pairs
  embed_problem  EmbeddingProblem: multiple-negatives ranking loss over the global batch
  embed_scores   pytrec_eval's nDCG@10, MRR@10, Recall@100; STS Spearman
  st_export      a fine-tuned embedding dir as a sentence-transformers folder (convert_checkpoint)
"""
