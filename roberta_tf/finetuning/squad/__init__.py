"""SQuAD v1.1 / v2.0 extractive question answering (the paper's SQuAD recipe).

Modules, in the order data flows through them:
  read      SQuAD reader: examples, answers checked against their contexts
  features  doc-stride windows, token -> character offsets
  decode    n-best span decoding of the logits into answers
  write     predictions.json / nbest_predictions.json
  tf_ops    the same windows and best-span decoding in TF ops (for the SavedModel)
  eval      the official SQuAD v1.1 / v2.0 exact-match and F1
Importers name them squad_<module> (`from roberta_tf.finetuning.squad import read as
squad_read`). The problem that trains on them is problems.ExtractiveQAProblem.
"""
