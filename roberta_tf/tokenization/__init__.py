"""The TF-native byte-level BPE tokenizers (GPT-2 / RoBERTa, and tokenizer.json pipelines such as
ModernBERT's), identical in ids to HF `tokenizers`.

Modules, in the order text flows through them:
  pretokenize     GPT-2's regex split rebuilt from per-byte character classes (no regex engine)
  bpe_merge       the vectorized merge loop over integer pair ranks
  long_words      words over the cap: merged in 32-byte pieces, seams re-merged (linear time)
  tokenizer       `BytePairTokenizer` (a tf.Module: eager, tf.function, tf.data, SavedModel) and
                  the byte <-> unicode alphabet of byte-level pieces
  vocab_files     the single owner of vocab.json + merges.txt: file names, special tokens,
                  reading (with checks), hashing, copying (no TensorFlow: data_prep uses it);
                  a vocabulary known by its content (`VocabId`)
  tokenizer_json  an HF tokenizer.json of the byte-level BPE pipeline (ModernBERT's), read and
                  checked; what it cannot run is refused naming the part (no TensorFlow)
  added_tokens    HF's added-token split (leftmost-longest, lstrip/rstrip) in TF ops
  nfc             Unicode NFC in core TF ops (exports need no tensorflow_text), HF's tables
  pipeline_tokenizer  `PipelineTokenizer`: a tokenizer.json's pipeline (NFC, added tokens,
                  BytePairTokenizer, the template) in TF ops; `load_tokenizer` for any folder
  vocabulary      `Vocabulary`: either kind of folder (vocab.json + merges.txt, tokenizer.json
                  alone or in an HF model folder) as special ids, templates, size and files
  vocab_growth    a grown vocabulary's plan (new ids, the old pieces spelling each) and the one
                  check of whether a model's vocabulary may meet another
"""
