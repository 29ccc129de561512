"""Fine-tuning RoBERTa on downstream tasks (the paper's GLUE, RACE and SQuAD recipes).

Modules, in the order data flows through them:
  task_data       TSV/CSV/JSONL and RACE readers -> examples; the label set
  featurize       TF-op featurization shared by training and the SavedModel:
                  `<s> A </s></s> B </s>`, longest-first pair truncation, padding
  squad           SQuAD reader, doc-stride windows, token -> character offsets, n-best decoding
  squad_tf        the same windows and best-span decoding in TF ops (for the SavedModel)
  squad_eval      the official SQuAD v1.1 / v2.0 exact-match and F1
  metrics         accuracy, F1, MCC, Pearson, Spearman
  heads           classification/regression, multiple-choice and span heads on the encoder
  tasks           one class per task type: datasets, loss, dev metrics
  finetune_config the resolved configuration of a run (what --flags become)
  finetune_run    one run on the training core's Trainer: AdamW, 6% warmup + linear decay,
                  epochs, early stopping, TensorBoard, SIGTERM; resumable (run_state)
  run_state       a run's saved state (checkpoint + progress.json) for resume
  finetune_loop   the LR sweep: runs, the best kept, resume of an unfinished sweep
  finetuned_dir   fine-tuned model directories (config.json + checkpoint + vocab)
  docs_sections   a real-text task built from the Python docs corpus (tests, benchmark)
The SavedModel export with raw-string signatures (classify / choose / answer) is
roberta_tf/serving/finetuned_export.py; the binary is roberta_tf/finetune.py.
"""
