r"""Benchmark: does our pretraining learn as well as the reference? Equal budget vs HF PyTorch.

    pip install -r requirements-bench.txt      # torch (CPU) + transformers, pinned
    python -m benchmarks.quality_vs_hf [--work_dir=runs/quality_vs_hf] [--shards=DIR] \
        [--learning_rates=5e-4,1e-3,2e-3] [--train_steps=800] [--config=small]

1. Shards: --shards, else the quickstart's data built into work_dir (8K byte-level BPE on the
   embedded `stdlib` corpus, FULL-SENTENCES, 128 tokens; 5% of the documents held out, more
   than the quickstart's 2%, so that the validation targets number in the thousands).
2. Batches, dumped once and fed to both sides (work_dir/batches/*.npz): --train_steps
   dynamically masked training batches from our input pipeline, and one fixed-mask pass over
   the validation split.
3. For each peak LR, both models start from their own library's random init (ours:
   roberta_tf's; HF: `RobertaForMaskedLM(config)`, i.e. transformers' `_init_weights`), same
   sizes, dropout 0, float32, AdamW (β 0.9/0.98, ε 1e-6, weight decay 0.01 except biases and
   LayerNorm), linear warmup + linear decay, the same batches in the same order.
4. One evaluator (NumPy, below) scores both models' logits on the same masked validation
   targets every --eval_every steps, with the unigram baseline (train-split frequencies) on the
   same targets. Printed: a table per LR, our ppl / HF ppl, and work_dir/results.{json,md} and
   work_dir/quality_vs_hf.png (held-out ppl against steps, both sides, every LR).

Known difference kept: keras' Adam adds ε to sqrt(v) before the bias correction (fairseq's
form), torch's AdamW after it; with ε 1e-6 the two differ only while sqrt(v) is ~1e-6.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import numpy as np
from absl import app, flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "runs/quality_vs_hf", "Shards, dumped batches and results.")
flags.DEFINE_string("shards", None, "A shard directory (data_prep.build_shards output); default: "
                    "build the quickstart's shards of the embedded corpus into --work_dir.")
flags.DEFINE_list("learning_rates", ["5e-4", "1e-3", "2e-3"], "Peak learning rates to compare.")
flags.DEFINE_string("config", "small", "Model size preset (both sides).")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("max_seq_len", 128, "Padded length (must be >= the shards').")
flags.DEFINE_integer("train_steps", 800, "Optimizer steps (the quickstart's).")
flags.DEFINE_integer("warmup_steps", 60, "Linear warmup steps (the quickstart's).")
flags.DEFINE_integer("eval_every", 100, "Score both models every N steps.")
flags.DEFINE_integer("seed", 0, "Data seed (masks, order) and init seed of both sides.")
flags.DEFINE_integer("threads", 2, "CPU threads for each side.")


# ---- data ----------------------------------------------------------------------------------
def build_shards(work_dir: str) -> str:
  vocab, shards = os.path.join(work_dir, "vocab"), os.path.join(work_dir, "shards")
  if os.path.exists(os.path.join(shards, "dataset_info.json")):
    return shards
  for args in (["data_prep.train_tokenizer", "--input=stdlib", "--vocab_size=8000",
                f"--output_dir={vocab}", "--overwrite"],
               ["data_prep.build_shards", "--input=stdlib", f"--vocab_dir={vocab}",
                f"--output_dir={shards}", "--max_seq_len=128", "--num_shards=4",
                "--validation_fraction=0.05", "--overwrite"]):
    print("$ python -m " + " ".join(args), flush=True)
    subprocess.run([sys.executable, "-m", *args], cwd=REPO, check=True,
                   stdout=subprocess.DEVNULL)
  return shards


def dump_batches(shards: str, model_config, out_dir: str) -> tuple[dict, dict]:
  """Our masked batches: train (--train_steps, stacked) and validation (one fixed pass)."""
  from roberta_tf.data import pipeline  # pylint: disable=import-outside-toplevel
  os.makedirs(out_dir, exist_ok=True)
  common = dict(batch_size=FLAGS.batch_size, max_seq_len=FLAGS.max_seq_len,
                model_config=model_config, seed=FLAGS.seed)
  result = []
  for split, training, steps in (("train", True, FLAGS.train_steps),
                                 ("validation", False, None)):
    path = os.path.join(out_dir, f"{split}.npz")
    ds = pipeline.build_dataset(shards, split, training=training, **common)
    if steps:
      ds = ds.take(steps)
    batches = [{k: v.numpy() for k, v in b.items()} for b in ds]
    stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
    np.savez_compressed(path, **stacked)
    result.append(stacked)
  return result[0], result[1]


# ---- the one evaluator ---------------------------------------------------------------------
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


def unigram_scores(shards, vocab_size, special_ids, val) -> dict:
  from roberta_tf.data import unigram  # pylint: disable=import-outside-toplevel
  logp = unigram.train_log_probs(shards, vocab_size, special_ids)
  targets, weights = val["mask_ids"], val["mask_weights"]
  count = weights.sum()
  ppl = math.exp(float((-logp[targets] * weights).sum() / count))
  acc = float(((targets == int(np.argmax(logp))) * weights).sum() / count)
  return {"ppl": ppl, "acc": acc}


def lr_at(step: int, peak: float) -> float:
  """The schedule both sides use (roberta_tf.training.schedule.WarmupLinearDecay)."""
  warmup, total = FLAGS.warmup_steps, FLAGS.train_steps
  if step < warmup:
    return peak * step / max(warmup, 1)
  return peak * max(0.0, (total - step) / max(total - warmup, 1))


# ---- our side ------------------------------------------------------------------------------
def run_ours(model_config, train, val, peak_lr) -> list:
  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from roberta_tf.models.pretrainer import RobertaPretrainer  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.objectives import MODEL_INPUTS  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.optimizer import build_optimizer  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.trainer import StepConfig, Trainer  # pylint: disable=import-outside-toplevel
  keras.utils.set_random_seed(FLAGS.seed)
  strategy = tf.distribute.get_strategy()
  model = RobertaPretrainer(model_config, dtype="float32")
  opt = build_optimizer(variables=model.trainable_variables, learning_rate=peak_lr,
                        warmup_steps=FLAGS.warmup_steps, train_steps=FLAGS.train_steps)
  trainer = Trainer(strategy, model, opt, StepConfig())
  logits_fn = tf.function(lambda b: model({k: b[k] for k in MODEL_INPUTS}, training=False))

  def evaluate(step):
    logits = np.concatenate([logits_fn({k: tf.constant(val[k][i]) for k in MODEL_INPUTS})
                             .numpy() for i in range(len(val["input_ids"]))])
    return step, score(logits, val["mask_ids"].reshape(-1, val["mask_ids"].shape[-1]),
                       val["mask_weights"].reshape(-1, val["mask_weights"].shape[-1]))

  curve = [evaluate(0)]
  for step in range(FLAGS.train_steps):
    batch = {k: tf.constant(v[step]) for k, v in train.items()}
    trainer.train_step(lambda batch=batch: batch)
    if (step + 1) % FLAGS.eval_every == 0 or step + 1 == FLAGS.train_steps:
      curve.append(evaluate(step + 1))
      _progress("ours", peak_lr, curve[-1])
  return curve


# ---- the reference: HF transformers RobertaForMaskedLM (PyTorch) ---------------------------
def run_hf(model_config, train, val, peak_lr) -> list:
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  torch.manual_seed(FLAGS.seed)
  torch.set_num_threads(FLAGS.threads)
  c = model_config
  hf_config = transformers.RobertaConfig(
      vocab_size=c.vocab_size, hidden_size=c.hidden_size, num_hidden_layers=c.num_layers,
      num_attention_heads=c.num_heads, intermediate_size=c.intermediate_size,
      max_position_embeddings=c.max_positions, type_vocab_size=1, layer_norm_eps=c.layer_norm_eps,
      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, hidden_act="gelu",
      initializer_range=c.initializer_range, pad_token_id=c.pad_id, bos_token_id=c.bos_id,
      eos_token_id=c.eos_id)
  model = transformers.RobertaForMaskedLM(hf_config)
  decay = [p for n, p in model.named_parameters() if not ("bias" in n or "LayerNorm" in n)]
  no_decay = [p for n, p in model.named_parameters() if "bias" in n or "LayerNorm" in n]
  opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                           {"params": no_decay, "weight_decay": 0.0}],
                          lr=peak_lr, betas=(0.9, 0.98), eps=1e-6)
  sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_at(s, 1.0))

  def masked_logits(b, i):
    ids = torch.from_numpy(b["input_ids"][i].astype(np.int64))
    mask = torch.from_numpy(b["padding_mask"][i].astype(np.int64))
    positions = torch.from_numpy(b["mask_positions"][i].astype(np.int64))
    hidden = model.roberta(input_ids=ids, attention_mask=mask).last_hidden_state
    hidden = hidden[torch.arange(ids.shape[0])[:, None], positions]
    return model.lm_head(hidden)

  def evaluate(step):
    model.eval()
    with torch.no_grad():
      logits = np.concatenate([masked_logits(val, i).numpy()
                               for i in range(len(val["input_ids"]))])
    model.train()
    return step, score(logits, val["mask_ids"].reshape(-1, val["mask_ids"].shape[-1]),
                       val["mask_weights"].reshape(-1, val["mask_weights"].shape[-1]))

  curve = [evaluate(0)]
  model.train()
  for step in range(FLAGS.train_steps):
    logits = masked_logits(train, step)
    targets = torch.from_numpy(train["mask_ids"][step].astype(np.int64))
    weights = torch.from_numpy(train["mask_weights"][step].astype(np.float32))
    xent = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    loss = (xent * weights).sum() / weights.sum().clamp(min=1.0)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    sched.step()
    if (step + 1) % FLAGS.eval_every == 0 or step + 1 == FLAGS.train_steps:
      curve.append(evaluate(step + 1))
      _progress("HF", peak_lr, curve[-1])
  return curve


def _progress(side, lr, point):
  step, s = point
  print(f"  [{side} lr {lr:g}] step {step}: ppl {s['ppl']:.1f} acc {s['acc']:.3f} "
        f"({time.strftime('%H:%M:%S')})", flush=True)


# ---- report --------------------------------------------------------------------------------
def write_report(work_dir, results, unigram) -> None:
  lines = ["| peak LR | step | roberta_tf ppl / acc | HF PyTorch ppl / acc | ours / HF ppl | "
           "unigram ppl / acc |", "|---|---|---|---|---|---|"]
  for lr, r in results.items():
    (step, ours), (_, hf) = r["ours"][-1], r["hf"][-1]
    lines.append(f"| {lr} | {step} | {ours['ppl']:,.0f} / {ours['acc']:.3f} | "
                 f"{hf['ppl']:,.0f} / {hf['acc']:.3f} | {ours['ppl'] / hf['ppl']:.3f} | "
                 f"{unigram['ppl']:,.0f} / {unigram['acc']:.3f} |")
  table = "\n".join(lines)
  print("\n" + table)
  with open(os.path.join(work_dir, "results.md"), "w", encoding="utf-8") as f:
    f.write(table + "\n")
  with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as f:
    json.dump({"unigram": unigram, "runs": results}, f, indent=2)
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  except ImportError:
    print("(matplotlib not installed: no plot)")
    return
  fig, ax = plt.subplots(figsize=(7, 4.5))
  for i, (lr, r) in enumerate(results.items()):
    color = f"C{i}"
    for side, style in (("ours", "-"), ("hf", "--")):
      steps = [p[0] for p in r[side]]
      ax.plot(steps, [p[1]["ppl"] for p in r[side]], style, color=color,
              label=f"{'roberta_tf' if side == 'ours' else 'HF PyTorch'} lr {lr}")
  ax.axhline(unigram["ppl"], color="gray", linestyle=":", label="unigram baseline")
  ax.set_yscale("log")
  ax.set_xlabel("step")
  ax.set_ylabel("held-out MLM perplexity")
  ax.set_title("Equal budget, same batches: roberta_tf vs HF RobertaForMaskedLM")
  ax.legend(fontsize=7)
  fig.tight_layout()
  path = os.path.join(work_dir, "quality_vs_hf.png")
  fig.savefig(path, dpi=110)
  print(f"plot: {path}")


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  sys.path.insert(0, REPO)
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  from roberta_tf import models  # pylint: disable=import-outside-toplevel
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  work_dir = os.path.abspath(FLAGS.work_dir)
  os.makedirs(work_dir, exist_ok=True)
  shards = FLAGS.shards or build_shards(work_dir)
  info = dataset_info.read(shards)
  special = info["special_ids"]
  model_config = models.preset(FLAGS.config, vocab_size=info["vocab"]["size"],
                               max_positions=FLAGS.max_seq_len + 2, pad_id=special["pad"],
                               bos_id=special["bos"], eos_id=special["eos"], dropout=0.0,
                               attention_dropout=0.0)
  train, val = dump_batches(shards, model_config, os.path.join(work_dir, "batches"))
  unigram = unigram_scores(shards, model_config.vocab_size, special.values(), val)
  print(f"{FLAGS.config}: {FLAGS.train_steps} steps x {FLAGS.batch_size} x {FLAGS.max_seq_len}; "
        f"validation: {int(val['mask_weights'].sum())} masked targets; unigram baseline ppl "
        f"{unigram['ppl']:.1f} acc {unigram['acc']:.3f}", flush=True)
  results = {}
  for lr in FLAGS.learning_rates:
    peak = float(lr)
    start = time.perf_counter()
    ours = run_ours(model_config, train, val, peak)
    mid = time.perf_counter()
    hf = run_hf(model_config, train, val, peak)
    results[lr] = {"ours": ours, "hf": hf, "ours_seconds": mid - start,
                   "hf_seconds": time.perf_counter() - mid}
    write_report(work_dir, results, unigram)
  return 0


if __name__ == "__main__":
  app.run(main)
