"""The one training core: pretraining and every fine-tuning task run through it.

  trainer            the train step (the one gradient tape): accumulation over micro-batches,
                     all-reduce, clipping, fp16 loss scaling, the NaN guard; step counters
  objectives         what the step minimizes: MlmObjective (pretraining), TaskObjective
  optimizer          AdamW (β2 0.98, ε 1e-6), weight decay on matrices only (by rank)
  schedule           linear warmup + linear decay
  checkpointing      exact-resume checkpoints, the chief/worker split, worker temp dirs
  sigterm            SIGTERM as a flag the loops check between updates
  step_window        step outputs kept on device until a log step
  summaries          TensorBoard scalars/text, console progress lines with ETA
  loop               the one loop controller (pretraining and fine-tuning): when to log, eval,
                     save; the bad-step stop; SIGTERM and preemption; ETA
  mlm_evaluation     the fixed-mask held-out MLM evaluator, the unigram-plateau check (the
                     library of `python -m roberta_tf.evaluate`)
  strategy           tf.distribute strategies (default, mirrored, multi-worker, TPU)
  train_config       TrainConfig: what the pretraining flags become; config.json
  pretraining_task   the pretraining task: model config, datasets, model + AdamW + Trainer
  pretraining        a pretraining run on the loop (`python -m roberta_tf.train` calls
                     pretraining.pretrain)
  losses, flops      MLM loss sums; FLOPs per step for MFU
Fine-tuning runs on the same loop and Trainer: roberta_tf/finetuning/trial.py.
"""
