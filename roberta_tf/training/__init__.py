"""The training core that pretraining and every fine-tuning task share.

  task               the interfaces: Task (build_model / build_optimizer / step_config /
                     objective), Events (what the loop's events mean for a task), the Objective
                     protocol and its Sums, TrainingError, build_train_step(task, strategy)
  train_step         TrainStep, the one train step (the one gradient tape): accumulation over
                     micro-batches, all-reduce, clipping, fp16 loss scaling, the NaN guard;
                     step counters
  loop               the one loop controller: when to log, eval, save; the bad-step stop;
                     SIGTERM and preemption; time budgets; ETA
  optimizer          AdamW (β2 0.98, ε 1e-6) from the OptimizerOptions and a schedule, weight
                     decay on matrices only (by rank)
  model_config       the model config a run trains: one resolver for both tasks
  schedule           linear warmup + linear decay, by update or by a time budget's share
  checkpointing      exact-resume checkpoints, the chief/worker split, worker temp dirs
  sigterm            SIGTERM as a flag the loops check between updates
  preemption         all workers stop after the same update
  step_window        step outputs kept on device until a log step
  summaries          TensorBoard scalars/text, console progress lines with ETA
  strategy, cluster  tf.distribute strategies (default, mirrored, multi-worker, TPU); peers
The tasks: roberta_tf/pretraining/ (PretrainingTask, PretrainingEvents) and
roberta_tf/finetuning/ (FineTuningTask, FineTuningEvents).
"""
