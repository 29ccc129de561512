"""Fine-tuning RoBERTa on downstream tasks (the paper's GLUE, RACE and SQuAD recipes).

Modules, in the order data flows through them:
  problem_data       TSV/CSV/JSONL and RACE readers -> examples; the label set
  featurize       TF-op featurization shared by training and the SavedModel:
                  `<s> A </s></s> B </s>`, longest-first pair truncation, padding
  squad           SQuAD reader, doc-stride windows, token -> character offsets, n-best decoding
  squad_tf        the same windows and best-span decoding in TF ops (for the SavedModel)
  squad_eval      the official SQuAD v1.1 / v2.0 exact-match and F1
  metrics         accuracy, F1, MCC, Pearson, Spearman
  heads           classification/regression, multiple-choice and span heads on the encoder
  problems        one Problem class per task type: datasets, loss, dev metrics
  finetune_config the resolved configuration of a run (what --flags become)
  glue            GLUE presets: each task's files, fields, labels and official metrics
  bucketing       length-bucketed batches padded to their longest example
  warm_start      the encoder (and head) a run starts from: pretrained, fine-tuned or random
  objective       ProblemObjective: a problem's loss as the train step's Sums
  task            FineTuningTask (training/task.py's Task): encoder + head, AdamW with
                  warmup + linear decay, the step's settings, and the loop's events (epochs,
                  dev metrics, the best epoch, early stopping, TensorBoard)
  trial           one run (one batch size, learning rate, seed): the task on the training
                  core's loop and TrainStep; resumable (run_state)
  run_state       a run's saved state (checkpoint + progress.json) for resume
  sweep           the paper's grid (batch sizes x learning rates x seeds) and its medians
  sweep_runner    runs the grid's trials, keeps the best configuration's median run, writes
                  eval_results.json / results.md / GLUE predictions (predictions.py); resume
  finetuned_dir   fine-tuned model directories (config.json + checkpoint + vocab)
  docs_sections   a real-text task built from the Python docs corpus (tests, benchmark)
The SavedModel export with raw-string signatures (classify / choose / answer) is
roberta_tf/serving/finetuned_export.py; the binary is roberta_tf/finetune.py.
"""
