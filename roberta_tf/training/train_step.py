"""The one distributed train step: accumulation, clipping, loss scaling, NaN guard.

Pretraining and every fine-tuning task run through it; what differs is the *objective*, a
callable `objective(model, batch) -> task.Sums` (loss_sum, count, correct, tokens; task.py):
`pretraining.objective.MlmObjective` (count = masked tokens; with NSP it fills `Sums.extras`,
the sums named by its `extra_sums`, which are summed like the others and returned as
"sum/<name>" metrics), `finetuning.objective.ProblemObjective` (count = examples).

One optimizer update ("step") consumes ``grad_accum_steps`` micro-batches on every replica, so
the global batch is per-replica batch x replicas x grad_accum_steps sequences. Every micro-batch
contributes the gradient of its loss *sum*; after the all-reduce the gradient is divided by the
global count (masked tokens, or examples). So the update is the gradient of the mean loss over
the whole global batch, whatever the split into replicas and micro-batches (1 x 4 equals 4 x 1).

A step whose loss or gradient is not finite changes no weight and no optimizer moment; it still
advances the step counter, the optimizer's iteration (so the learning-rate schedule stays on
the step count) and the data position, and is counted (``skipped_steps``, ``bad_steps_in_row``;
under fp16 an overflow with a finite loss is normal: ``overflow_steps``, the loss scale halves).

A `TrainStep` call does not wait for the device: it returns tensors, and the loop converts them only
when it logs (see loop.py and step_window.py).
"""

from __future__ import annotations

import dataclasses
import time

import tensorflow as tf

from roberta_tf.training.checkpointing import dropout_rng_states

_SUM = tf.distribute.ReduceOp.SUM
_FIRST = tf.VariableAggregation.ONLY_FIRST_REPLICA


@dataclasses.dataclass(frozen=True)
class StepConfig:
  """What the train step needs besides the model and optimizer.

  Attributes:
    grad_accum_steps: micro-batches per optimizer update on each replica.
    clip_norm: global-norm clipping of the averaged gradient; 0 disables it.
    precision: float32 | mixed_bfloat16 | mixed_float16 (fp16 turns on dynamic loss scaling).
    norm_per_micro_batch: a constant the per-micro-batch loss sum is divided by before the
      backward pass (per-replica batch x max predictions) so gradient magnitudes look like a
      mean loss's (matters for fp16 range); it cancels out exactly in the final gradient.
    loss_scale_initial / loss_scale_period: fp16 dynamic loss scaling (start, and the number of
      finite steps after which the scale doubles; an overflow halves it and skips the step).
    sequences_per_round: sequences all replicas together read per micro-batch round (per-replica
      batch x replicas); `data_position` advances by grad_accum_steps x this per update.
    jit_compile: XLA-compile each replica's forward + backward pass (meant for GPU/TPU, not
      measured there). It trains to the default step's losses (tests/test_tpu_readiness.py:
      within 1e-3 over 10 steps with dropout 0). With dropout the masks differ, because XLA's
      stateless RNG draws other bits for the same seed. Measured no faster on CPU
      (benchmarks/training/throughput.py --jit_compile; figures in docs/benchmarks.md).
  """
  grad_accum_steps: int = 1
  clip_norm: float = 0.0
  precision: str = "float32"
  norm_per_micro_batch: float = 1.0
  loss_scale_initial: float = 2.0**15
  loss_scale_period: int = 2000
  sequences_per_round: int = 0
  jit_compile: bool = False


class TrainStep:
  """Owns the step counters, accumulators and the compiled distributed train steps.

  Create it under nothing in particular: it enters ``strategy.scope()`` itself. The model and
  optimizer must have been created under the same strategy's scope.
  """

  def __init__(self, strategy: tf.distribute.Strategy, model, optimizer, config: StepConfig,
               objective):
    """Args: objective: `(model, batch) -> task.Sums` (task.py's `Objective`)."""
    self.strategy = strategy
    self.model = model
    self.optimizer = optimizer
    self.config = config
    self.objective = objective
    # Further sums an objective reports (e.g. the NSP loss): all-reduced and accumulated like
    # the others, returned as "sum/<name>" metrics.
    self.extra_sums = tuple(getattr(self.objective, "extra_sums", ()))
    self.fp16 = config.precision == "mixed_float16"
    with strategy.scope():
      var = lambda v, dtype, name: tf.Variable(v, dtype=dtype, trainable=False, name=name,
                                               aggregation=_FIRST)
      self.step = var(0, tf.int64, "step")                 # updates attempted (incl. skipped)
      # Sequences of the global training stream read: the resume position, the same for any
      # split of the global batch into replicas x accumulation steps (data/pipeline.py).
      self.data_position = var(0, tf.int64, "data_position")
      # Micro-batch rounds read: the position of checkpoints written before data_position.
      self.data_rounds = var(0, tf.int64, "data_rounds")
      self.bad_steps_in_row = var(0, tf.int64, "bad_steps_in_row")
      self.skipped_steps = var(0, tf.int64, "skipped_steps")    # non-finite loss/grad, skipped
      self.overflow_steps = var(0, tf.int64, "overflow_steps")  # fp16 overflows, skipped
      self.loss_scale = var(config.loss_scale_initial if self.fp16 else 1.0, tf.float32,
                            "loss_scale")
      self.good_steps = var(0, tf.int64, "good_steps_since_scale_change")
      # Wall-clock seconds of the training loop, summed over resumes (the --train_minutes
      # budget's accounting: training/loop.py keeps it).
      self.train_seconds = var(0.0, tf.float64, "train_seconds")
      self.optimizer.build(self.model.trainable_variables)
      self.accumulators = []
      if config.grad_accum_steps > 1:
        # One copy per replica (sync on read): each replica accumulates its own micro-batches.
        self.accumulators = [
            tf.Variable(tf.zeros_like(v), trainable=False,
                        synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM, name="grad_accum")
            for v in self.model.trainable_variables]
        self.sum_accumulators = [
            tf.Variable(0.0, trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                        aggregation=tf.VariableAggregation.SUM, name=f"{n}_accum")
            for n in ("loss", "count", "correct", "tokens", *self.extra_sums)]
    # autograph=False: the step branches on tensors with tf.cond only, and AutoGraph's source
    # conversion of every function it calls (the model's layers included) is tracing time.
    self._compute = (tf.function(self._grads, jit_compile=True, autograph=False)
                     if config.jit_compile else self._grads)
    self._fused = tf.function(self._fused_step, autograph=False)
    self._accumulate = tf.function(self._accumulate_step, autograph=False)
    self._apply_accumulated = tf.function(self._apply_accumulated_step, autograph=False)

  def checkpoint_items(self) -> dict:
    """Trackables a checkpoint must hold to resume exactly (besides model and optimizer)."""
    return {"step": self.step, "data_position": self.data_position,
            "data_rounds": self.data_rounds,
            "bad_steps_in_row": self.bad_steps_in_row, "skipped_steps": self.skipped_steps,
            "overflow_steps": self.overflow_steps, "loss_scale": self.loss_scale,
            "good_steps": self.good_steps, "train_seconds": self.train_seconds,
            "dropout_rng": dropout_rng_states(self.model)}

  # ---- replica functions -------------------------------------------------------------------
  def _grads(self, batch):
    """Gradients of this replica's (scaled) micro-batch loss sum, and the batch's sums."""
    with tf.GradientTape() as tape:
      out = self.objective(self.model, batch)  # task.Sums
      loss_sum, count, correct, tokens = (tf.cast(x, tf.float32) for x in (
          out.loss_sum, out.count, out.correct, out.tokens))
      extras = [tf.cast(out.extras[k], tf.float32) for k in self.extra_sums]
      scaled = loss_sum * (self.loss_scale / self.config.norm_per_micro_batch)
    variables = self.model.trainable_variables
    grads = tape.gradient(scaled, variables)
    unused = [v.path for v, g in zip(variables, grads, strict=True) if g is None]
    if unused:  # raised while tracing, once
      raise ValueError(f"the loss does not depend on trainable variables {unused}")
    # Dense gradients: the all-reduce and the accumulators add them (the position table's is
    # IndexedSlices; the tied token embedding's is already dense).
    grads = [tf.convert_to_tensor(g) for g in grads]
    return grads, (loss_sum, count, correct, tokens, *extras)

  def _apply(self, grads, sums):
    """All-reduce, normalize, clip, check, and apply or skip. Runs in a replica context."""
    ctx = tf.distribute.get_replica_context()
    grads = ctx.all_reduce(_SUM, grads)
    loss_sum, count, correct, tokens, *extras = ctx.all_reduce(_SUM, list(sums))
    count = tf.maximum(count, 1.0)
    factor = self.config.norm_per_micro_batch / (self.loss_scale * count)
    grads = [g * factor for g in grads]
    grad_norm = tf.linalg.global_norm(grads)
    loss = loss_sum / count
    grads_finite = tf.math.is_finite(grad_norm)
    loss_finite = tf.math.is_finite(loss)
    ok = tf.logical_and(grads_finite, loss_finite)
    if self.config.clip_norm > 0:
      # use_norm avoids a second norm pass; a non-finite norm is never applied anyway.
      safe_norm = tf.where(grads_finite, grad_norm, 1.0)
      grads, _ = tf.clip_by_global_norm(grads, self.config.clip_norm, use_norm=safe_norm)
    lr = tf.cast(self.optimizer.learning_rate, tf.float32)  # the rate this update uses
    scale = self.loss_scale.read_value()
    with tf.control_dependencies([lr, scale]):
      self._apply_if(ok, grads)
    self._update_counters(ok, loss_finite)
    return {"loss": loss, "accuracy": correct / count, "grad_norm": grad_norm,
            "count": count, "tokens": tokens, "learning_rate": lr,
            "applied": tf.cast(ok, tf.float32), "loss_scale": scale,
            **{f"sum/{k}": v for k, v in zip(self.extra_sums, extras, strict=True)}}

  def _apply_if(self, ok, grads):
    """optimizer.apply(grads) when ``ok`` (the same on every replica), else only the iteration.

    A replica context cannot branch around a merge_call, so the branch is taken in the
    cross-replica context (the pattern of keras' LossScaleOptimizer), where the optimizer
    applies the already reduced gradients (optimizer.py's `AdamW.apply` never all-reduces).
    """
    variables = self.model.trainable_variables

    def skip_fn():
      self.optimizer.iterations.assign_add(1)
      return tf.no_op()

    def cross_replica(distribution, ok, grads):
      ok = distribution.experimental_local_results(ok)[0]
      tf.cond(ok, lambda: self.optimizer.apply(grads, variables) or tf.no_op(), skip_fn)
    tf.distribute.get_replica_context().merge_call(cross_replica, args=(ok, grads))

  def _update_counters(self, ok, loss_finite):
    self.step.assign_add(1)
    self.data_rounds.assign_add(self.config.grad_accum_steps)
    self.data_position.assign_add(self.config.grad_accum_steps * self.config.sequences_per_round)
    one = tf.constant(1, tf.int64)
    zero = tf.constant(0, tf.int64)
    if self.fp16:
      # A finite loss with non-finite gradients is an fp16 overflow: normal, halve the scale.
      # At the smallest scale (1) halving cannot help any more: then it is a bad step.
      overflow = tf.logical_and(tf.logical_not(ok), loss_finite)
      bad = tf.logical_or(tf.logical_not(loss_finite),
                          tf.logical_and(overflow, self.loss_scale <= 1.0))
      self.overflow_steps.assign_add(tf.where(overflow, one, zero))
      grow = tf.logical_and(ok, self.good_steps + 1 >= self.config.loss_scale_period)
      new_scale = tf.where(ok, tf.where(grow, self.loss_scale * 2.0, self.loss_scale),
                           tf.maximum(self.loss_scale / 2.0, 1.0))
      self.loss_scale.assign(new_scale)
      self.good_steps.assign(tf.where(tf.logical_and(ok, tf.logical_not(grow)),
                                      self.good_steps + 1, zero))
    else:
      bad = tf.logical_not(ok)
    self.skipped_steps.assign_add(tf.where(bad, one, zero))
    self.bad_steps_in_row.assign(tf.where(bad, self.bad_steps_in_row + 1, zero))

  def _fused_step(self, batch):
    def replica(batch):
      grads, sums = self._compute(batch)
      return self._apply(grads, sums)
    out = self.strategy.run(replica, args=(batch,))
    return {k: self.strategy.experimental_local_results(v)[0] for k, v in out.items()}

  def _accumulate_step(self, batch):
    def replica(batch):
      grads, sums = self._compute(batch)
      for acc, g in zip(self.accumulators, grads, strict=True):
        acc.assign_add(g)
      for acc, s in zip(self.sum_accumulators, sums, strict=True):
        acc.assign_add(s)
    self.strategy.run(replica, args=(batch,))

  def _apply_accumulated_step(self):
    def replica():
      grads = [acc.read_value() for acc in self.accumulators]
      sums = [acc.read_value() for acc in self.sum_accumulators]
      out = self._apply(grads, sums)
      with tf.control_dependencies(list(out.values())):
        for acc in self.accumulators + self.sum_accumulators:
          acc.assign(tf.zeros_like(acc))
      return out
    out = self.strategy.run(replica)
    return {k: self.strategy.experimental_local_results(v)[0] for k, v in out.items()}

  # ---- host-side API -----------------------------------------------------------------------
  def __call__(self, next_batch) -> tuple[dict, float]:
    """Runs one optimizer update; ``next_batch()`` returns the next distributed micro-batch.

    Returns:
      (metrics, input_wait_s): the step's metrics as scalar tensors (loss, accuracy,
      grad_norm, count, tokens, learning_rate, applied, loss_scale, and "sum/<name>" for
      each of the objective's extra sums, summed over the global batch), not synced to the
      host; and the seconds spent waiting for the input pipeline.
    """
    wait = 0.0
    if self.config.grad_accum_steps == 1:
      t = time.perf_counter()
      batch = next_batch()
      wait += time.perf_counter() - t
      return self._fused(batch), wait
    for _ in range(self.config.grad_accum_steps):
      t = time.perf_counter()
      batch = next_batch()
      wait += time.perf_counter() - t
      self._accumulate(batch)
    return self._apply_accumulated(), wait
