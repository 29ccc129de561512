"""Pretraining: RoBERTa's MLM on packed shards, as one task on the shared training core.

  train_config       TrainConfig: what the pretraining flags become; config.json
  task               PretrainingTask (training/task.py's Task): the model config (the shards'
                     needs on training/model_config.py's resolver), model, AdamW, the step's
                     settings, the MLM objective
  events             PretrainingEvents (training/task.py's Events): the loop's events (logs,
                     held-out evals beside the unigram baseline, checkpoints, the restore when
                     the run diverges); MFU from the model's FLOPs (models/flops.py)
  objective          MlmObjective (and NSP for the pair-packing ablation): the loss Sums
  losses             MLM / NSP loss sums
  inputs             the distributed train/eval datasets at the data position; the unigram
                     baseline
  model_dir_setup    the model dir before the first step: --overwrite, resume checks,
                     config.json, vocabulary files
  run                pretrain(cfg): strategy, lock, task, resume, events, the loop (what
                     `python -m roberta_tf.train` calls)
  mlm_evaluation     the fixed-mask held-out MLM evaluator, the unigram-plateau check (the
                     library of `python -m roberta_tf.evaluate`)
  minimal_pair_evaluation  BLiMP-style minimal pairs by pseudo-log-likelihood
"""
