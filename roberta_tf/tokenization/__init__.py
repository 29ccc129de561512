"""The TF-native byte-level BPE tokenizer (GPT-2 / RoBERTa), identical in ids to HF `tokenizers`.

Modules, in the order text flows through them:
  pretokenize     GPT-2's regex split rebuilt from per-byte character classes (no regex engine)
  bpe_merge       the vectorized merge loop over integer pair ranks
  long_words      words over the cap: merged in 32-byte pieces, seams re-merged (linear time)
  tokenizer       `BytePairTokenizer` (a tf.Module: eager, tf.function, tf.data, SavedModel) and
                  the byte <-> unicode alphabet of byte-level pieces
  vocab_files     the single owner of vocab.json + merges.txt: file names, special tokens,
                  reading (with checks), hashing, copying (no TensorFlow: data_prep uses it);
                  a vocabulary known by its content (`VocabId`)
  vocab_growth    a grown vocabulary's plan (new ids, the old pieces spelling each) and the one
                  check of whether a model's vocabulary may meet another
"""
