"""Every SavedModel export, each with raw-string signatures (the tokenizer is inside).

  mlm_export        a pretrained model: fill_mask, encode, mlm_logits, tokenize; and the one
                    atomic SavedModel writer (`save_atomically`) every export uses
  finetuned_export  a fine-tuned model: classify / choose / answer
The binaries are roberta_tf/export.py (pretrained) and roberta_tf/finetune.py --export_dir.
"""
