"""From shards to model-ready batches.

  packings       the packing names (block and NSP-pair formats), free of TensorFlow
  example_spec   the TFRecord record format of a packed sequence (and of a pair)
  dataset_info   the shard directory's contract (dataset_info.json): splits, files, vocab hash
  vocab_info     what masking needs of the vocabulary (size, special ids, word starts)
  masking        dynamic (and static, whole-word) 80/10/10 masking in TF ops
  pipeline       the tf.data pipeline: shards -> shuffled, masked, batched, per-replica
  unigram        the train split's unigram distribution: the plateau baseline
"""
