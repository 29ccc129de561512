"""Fine-tuning RoBERTa on downstream tasks (the paper's GLUE, RACE and SQuAD recipes).

Modules, in the order data flows through them:
  problem_types   the problem types (--task's values) and batching names
  problem_data    TSV/CSV/JSONL and RACE readers -> examples; the label set
  featurize       TF-op featurization shared by training and the SavedModel:
                  `<s> A </s></s> B </s>`, longest-first pair truncation, padding
  squad/          SQuAD: read, features (windows), decode, write, tf_ops (for the SavedModel),
                  eval (the official exact-match and F1)
  metrics         accuracy, F1, MCC, Pearson, Spearman
  tagging/        token classification: CoNLL / JSON lines, words -> pieces -> windows,
                  seqeval's scores, the problem, predictions.conll, the export's TF ops,
                  RobertaForTokenClassification folders in and out
  embedding/      text embeddings: pairs and BEIR / STS data, the contrastive problem,
                  retrieval scores, sentence-transformers folders out
  heads           classification/regression, multiple-choice and span heads on the encoder
  problem_info    ProblemInfo: what a fine-tuned model remembers of its problem
  problems        one Problem class per problem type: datasets, loss, dev metrics (an
                  Evaluation)
  problem_loading load_problem: a run's problem, whole, from its flags
  finetune_config the resolved configuration of a run (what --flags become)
  glue            GLUE presets (GluePreset): each GLUE task's files, fields, labels, metrics
  bucketing       length-bucketed batches padded to their longest example
  warm_start      the encoder (and head) a run starts from: pretrained, fine-tuned or random
  objective       ProblemObjective: a problem's loss as the train step's Sums
  task            FineTuningTask (training/task.py's Task): encoder + head, AdamW with
                  warmup + linear decay, the step's settings, the problem's objective
  events          FineTuningEvents (training/task.py's Events): the loop's events (epochs,
                  dev metrics, the best epoch, early stopping, TensorBoard); TrialResult
  trial           one run (one batch size, learning rate, seed): the task and its events on
                  the training core's loop and TrainStep; resumable (run_state)
  run_state       a run's saved state (checkpoint + progress.json) for resume
  sweep           the paper's grid (batch sizes x learning rates x seeds) and its medians
  sweep_runner    runs the grid's trials, keeps the best configuration's median run, writes
                  eval_results.json / results.md / GLUE predictions (predictions.py); resume
  finetuned_dir   fine-tuned model directories (config.json + checkpoint + vocab)
  docs_sections   a real-text problem built from the Python docs corpus (tests, benchmark)
The SavedModel export with raw-string signatures (classify / choose / answer / tag) is
roberta_tf/serving/finetuned_export.py; the binary is roberta_tf/finetune.py.
"""
