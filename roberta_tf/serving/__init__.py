"""Every SavedModel export, each with raw-string signatures (the tokenizer is inside).

  mlm_export          a pretrained model: fill_mask, encode, mlm_logits, tokenize, score
  finetuned_export    a fine-tuned model: classify / choose / answer
  saved_model_writer  the one atomic SavedModel writer every export uses; its exports load in
                      TF Serving's session-based loader as well as in `tf.saved_model.load`
The binaries are roberta_tf/export.py (pretrained) and roberta_tf/finetune.py --export_dir.
"""
