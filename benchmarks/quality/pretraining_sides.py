"""The two sides of benchmarks/quality/pretraining_vs_hf.py, trained on the same dumped batches.

Ours: `RobertaPretrainer` + `optimizer.adamw` + the project's `TrainStep` (the code the `train`
binary runs). The reference: Hugging Face `RobertaForMaskedLM` (PyTorch) + `torch.optim.AdamW`
with the same hyperparameters, weight-decay groups and schedule. One evaluator (`score`, NumPy,
float64) scores both sides' logits on the same masked validation targets.

Batches are dicts of stacked NumPy arrays, [steps, B, ...] for training and [batches, B, ...] for
validation: input_ids, padding_mask [B, S]; mask_positions, mask_ids, mask_weights [B, P].
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import numpy as np

MODEL_INPUTS = ("input_ids", "padding_mask", "mask_positions")


@dataclasses.dataclass(frozen=True)
class RunSpec:
  """One training run of one side.

  Attributes:
    peak_lr: the schedule's peak.
    seed: the init seed (keras / torch global seeds set right before the model is built).
    train_steps: the schedule's length (linear decay reaches 0 there).
    warmup_steps: linear warmup from 0.
    stop_after: optimizer steps actually run (<= train_steps; < for short diagnostic runs).
    eval_every: score on the validation batches every N steps (and at the last one).
    threads: CPU threads for the side's math.
  """
  peak_lr: float
  seed: int
  train_steps: int
  warmup_steps: int
  stop_after: int
  eval_every: int
  threads: int = 2


def score(logits: np.ndarray, targets: np.ndarray, weights: np.ndarray) -> dict:
  """Perplexity and accuracy of logits [N, P, V] on targets [N, P] with weights [N, P]."""
  logits = logits.astype(np.float64)
  logits -= logits.max(-1, keepdims=True)
  log_z = np.log(np.exp(logits).sum(-1))
  picked = np.take_along_axis(logits, targets[..., None].astype(np.int64), -1)[..., 0]
  nll = (log_z - picked) * weights
  correct = (logits.argmax(-1) == targets) * weights
  count = weights.sum()
  return {"ppl": math.exp(nll.sum() / count), "acc": float(correct.sum() / count)}


def _score_batches(logits_of: Callable[[int], np.ndarray], val: dict) -> dict:
  logits = np.concatenate([logits_of(i) for i in range(len(val["input_ids"]))])
  p = val["mask_ids"].shape[-1]
  return score(logits, val["mask_ids"].reshape(-1, p), val["mask_weights"].reshape(-1, p))


def lr_at(step: int, spec: RunSpec) -> float:
  """The rate update `step` (0-based) uses: roberta_tf.training.schedule.WarmupLinearDecay,
  which also gives update 0 a rate of 0 (as transformers' get_linear_schedule_with_warmup)."""
  if step < spec.warmup_steps:
    return spec.peak_lr * step / max(spec.warmup_steps, 1)
  return spec.peak_lr * max(0.0, (spec.train_steps - step) /
                            max(spec.train_steps - spec.warmup_steps, 1))


def _eval_steps(spec: RunSpec) -> set:
  return {s for s in range(1, spec.stop_after + 1)
          if s % spec.eval_every == 0 or s == spec.stop_after}


# ---- building each side's model (and each from the other's weights: the swap test) --------
# The four arms of the shared-vector question (issue 35): each library as it is, and each with
# the one difference that moved with the weights in the swap test, HF's token-type row (one
# N(0, 0.02) vector added to every token), added to ours or removed from HF's.
ARMS = {
    "ours": ("ours", "roberta_tf's default: the shared row (type_vocab_size=1)"),
    "hf": ("hf", "transformers' RobertaForMaskedLM as it is"),
    "ours_fairseq": ("ours", "roberta_tf without the row (type_vocab_size=0, fairseq's shape)"),
    "hf_no_shared": ("hf", "transformers' with the row zeroed and frozen"),
}


def side_of(arm: str) -> str:
  """"ours" or "hf": which library trains the arm."""
  return ARMS[arm][0]


def build_arm(arm: str, model_config, seed: int):
  """The arm's model at step 0 under `seed` (each library's own init)."""
  if arm == "ours":
    return build_ours(model_config.replace(type_vocab_size=1), seed)
  if arm == "ours_fairseq":
    return build_ours(model_config.replace(type_vocab_size=0), seed)
  model = build_hf(model_config, seed)
  if arm == "hf_no_shared":
    row = model.roberta.embeddings.token_type_embeddings.weight
    row.data.zero_()
    row.requires_grad_(False)  # no gradient, so AdamW neither updates nor decays it
  return model


def build_ours(model_config, seed: int):
  import keras  # pylint: disable=import-outside-toplevel

  from roberta_tf.models.registry import build_pretrainer  # pylint: disable=import-outside-toplevel
  keras.backend.clear_session()
  keras.utils.set_random_seed(seed)
  return build_pretrainer(model_config, dtype="float32")


def hf_config(model_config):
  import transformers  # pylint: disable=import-outside-toplevel
  c = model_config
  return transformers.RobertaConfig(
      vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
      num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size,
      max_position_embeddings=c.max_positions, type_vocab_size=1, layer_norm_eps=c.layer_norm_eps,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu",
      initializer_range=c.initializer_range, pad_token_id=c.pad_id, bos_token_id=c.bos_id,
      eos_token_id=c.eos_id)


def build_hf(model_config, seed: int):
  """transformers' own init (`_init_weights`) under torch seed `seed`."""
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.manual_seed(seed)
  return transformers.RobertaForMaskedLM(hf_config(model_config))


def hf_from_ours(ours, model_config):
  """An HF model holding our model's weights (its token-type row: ours', or 0 without one)."""
  import torch  # pylint: disable=import-outside-toplevel

  from roberta_tf.models.roberta import hf_weights  # pylint: disable=import-outside-toplevel
  model = build_hf(model_config, 0)
  state = {k: torch.from_numpy(v) for k, v in hf_weights.to_hf_tensors(ours).items()}
  missing, unexpected = model.load_state_dict(state, strict=False)
  assert not unexpected and set(missing) <= {"lm_head.decoder.weight", "lm_head.decoder.bias",
                                             "roberta.embeddings.position_ids",
                                             "roberta.embeddings.token_type_ids"}, (missing,)
  return model


def ours_from_hf(hf_model, model_config):
  """Our model (with the shared row) holding the HF model's weights, row included."""
  from roberta_tf.models.roberta import hf_weights  # pylint: disable=import-outside-toplevel
  ours = build_ours(model_config.replace(type_vocab_size=1), 0)
  tensors = {k: v.detach().numpy().copy() for k, v in hf_model.state_dict().items()}
  hf_weights.set_from_hf_tensors(ours, tensors, "HF model")
  return ours


# ---- training --------------------------------------------------------------------------------
def train_ours(model, train: dict, val: dict, spec: RunSpec, log: Callable) -> dict:
  """Trains `model` (a RobertaPretrainer) on train[:stop_after]; returns the run's record."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.common.option_groups import OptimizerOptions  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.objective import MlmObjective  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.optimizer import adamw  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.schedule import WarmupLinearDecay  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.train_step import StepConfig, TrainStep  # pylint: disable=import-outside-toplevel
  opt = adamw(OptimizerOptions(learning_rate=spec.peak_lr),
              WarmupLinearDecay(spec.peak_lr, spec.warmup_steps, spec.train_steps),
              model.trainable_variables)
  train_step = TrainStep(tf.distribute.get_strategy(), model, opt, StepConfig(), MlmObjective())
  logits_fn = tf.function(lambda b: model(b, training=False))

  def evaluate():
    return _score_batches(
        lambda i: logits_fn({k: tf.constant(val[k][i]) for k in MODEL_INPUTS}).numpy(), val)

  return _loop(spec, evaluate, lambda step: _ours_step(train_step, train, step), log)


def _ours_step(train_step, train, step):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  batch = {k: tf.constant(v[step]) for k, v in train.items()}
  metrics, _ = train_step(lambda: batch)
  return float(metrics["loss"]), float(metrics["grad_norm"])


def train_hf(model, train: dict, val: dict, spec: RunSpec, log: Callable) -> dict:
  """Trains an HF RobertaForMaskedLM the same way; returns the run's record.

  Weight decay 0.01 on every matrix (rank >= 2: kernels, the token, position and type tables),
  none on biases and LayerNorm parameters: the rule of roberta_tf.training.optimizer.decays
  (HF's usual name filter "bias"/"LayerNorm" would decay lm_head.layer_norm.weight).
  """
  import torch  # pylint: disable=import-outside-toplevel
  torch.set_num_threads(spec.threads)
  params = [p for p in model.parameters() if p.requires_grad]  # the tied decoder appears once
  opt = torch.optim.AdamW([{"params": [p for p in params if p.ndim >= 2], "weight_decay": 0.01},
                           {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0}],
                          lr=spec.peak_lr, betas=(0.9, 0.98), eps=1e-6)
  sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, spec) / spec.peak_lr)

  def masked_logits(b, i):
    ids = torch.from_numpy(b["input_ids"][i].astype(np.int64))
    mask = torch.from_numpy(b["padding_mask"][i].astype(np.int64))
    positions = torch.from_numpy(b["mask_positions"][i].astype(np.int64))
    hidden = model.roberta(input_ids=ids, attention_mask=mask).last_hidden_state
    hidden = hidden[torch.arange(ids.shape[0])[:, None], positions]
    return model.lm_head(hidden)

  def evaluate():
    model.eval()
    with torch.no_grad():
      result = _score_batches(lambda i: masked_logits(val, i).numpy(), val)
    model.train()
    return result

  def step_fn(step):
    logits = masked_logits(train, step)
    targets = torch.from_numpy(train["mask_ids"][step].astype(np.int64))
    weights = torch.from_numpy(train["mask_weights"][step].astype(np.float32))
    xent = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    loss = (xent * weights).sum() / weights.sum().clamp(min=1.0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    grad_norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params
                               if p.grad is not None))
    opt.step()
    sched.step()
    return float(loss.detach()), float(grad_norm)

  model.train()
  return _loop(spec, evaluate, step_fn, log)


def _loop(spec: RunSpec, evaluate, step_fn, log) -> dict:
  """Runs step_fn(0..stop_after-1), evaluating at step 0 and every eval_every steps."""
  curve = [(0, evaluate())]
  losses, norms = [], []
  evals = _eval_steps(spec)
  start = time.perf_counter()
  for step in range(spec.stop_after):
    loss, norm = step_fn(step)
    losses.append(round(loss, 5))
    norms.append(round(norm, 5))
    if step + 1 in evals:
      curve.append((step + 1, evaluate()))
      log(step + 1, curve[-1][1], float(np.mean(losses[-spec.eval_every:])))
  return {"curve": curve, "train_loss": losses, "grad_norm": norms,
          "seconds": time.perf_counter() - start}
