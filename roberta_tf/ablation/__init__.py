"""The paper's ablations (Tables 1-3) at small scale on any corpus: `python -m roberta_tf.ablate`.

  studies   the arms of each study (masking, input_format, batch_size)
  runner    prep once, then pretrain / evaluate / fine-tune every arm x seed, resumably
  report    results.md (paper-style table) and the perplexity-vs-tokens plot
"""
