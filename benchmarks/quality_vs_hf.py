r"""Benchmark: does our pretraining learn as well as the reference, as a rate over seeds?

    pip install -r requirements-bench.txt      # torch (CPU) + transformers, pinned
    apt-get install bible-kjv                  # the `kjv` corpus (benchmarks/kjv_corpus.py)
    nice -n 10 python -m benchmarks.quality_vs_hf [--work_dir=runs/quality_vs_hf] \
        [--corpora=stdlib,kjv] [--seeds=5] [--learning_rates=1e-3,5e-4:3,2e-3:1]

Protocol (issue 27), per corpus:
1. Data: an 8K byte-level BPE trained on the corpus, FULL-SENTENCES shards of 128 tokens, 5% of
   the documents held out. A corpus is `stdlib` (data_prep's embedded Python docs), `kjv` (the
   King James Bible from Debian's bible-kjv, written by benchmarks/kjv_corpus.py), or
   NAME=INPUT for any data_prep input spec (files, globs, directories).
2. Batches, dumped once and fed to both sides: per seed, --train_steps dynamically masked
   training batches from our input pipeline (the seed sets order and masks), and one
   fixed-mask pass over the validation split (the same for every seed and side).
3. Per peak LR and seed, both models start from their own library's random init under that
   seed (ours: roberta_tf's; HF: `RobertaForMaskedLM(config)`, transformers' `_init_weights`),
   `small` sizes, dropout 0, float32, AdamW (beta 0.9/0.98, eps 1e-6, weight decay 0.01 on
   matrices only), warmup --warmup_steps then linear decay to 0 at --train_steps, same batches
   in the same order (benchmarks/quality_sides.py).
4. One evaluator (NumPy) scores both sides on the same masked validation targets every
   --eval_every steps, beside the unigram baseline (train-split frequencies). A run *left the
   plateau* when its last held-out ppl is <= 0.9x the unigram's (benchmarks/quality_report.py).

Resumable: each (corpus, LR, seed, side) run writes work_dir/<corpus>/runs/<init>/*.json and is
skipped when that file exists; results count as one benchmark run only when every record has
the same `code` hash (the files that decide a trajectory), which the report checks. Printed:
progress with an ETA, the table of rates (work_dir/results.md, results.json) and the plot
(work_dir/quality_vs_hf.png).

--init=swap is the swap test: our model trains from HF's step-0 weights of the seed and HF's
from ours, so a difference that follows the weights is the init's, one that stays with the side
is the training code's. --stop_after runs only the first steps of the schedule (diagnosis).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from absl import app, flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)

from benchmarks import quality_report, quality_sides  # noqa: E402  pylint: disable=wrong-import-position

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "runs/quality_vs_hf", "Vocabs, shards, batches, run records.")
flags.DEFINE_list("corpora", ["stdlib", "kjv"], "Corpora: stdlib, kjv, or NAME=INPUT (a data_prep "
                  "input spec); each gets its own vocab and shards.")
flags.DEFINE_integer("seeds", 5, "Seeds 0..N-1 per peak LR (fewer where --learning_rates says).")
flags.DEFINE_list("learning_rates", ["1e-3", "5e-4:3", "2e-3:1"], "Peak LRs, each optionally "
                  "LR:K to run only min(K, --seeds) seeds at it.")
flags.DEFINE_list("sides", ["ours", "hf"], "Which sides to train.")
flags.DEFINE_enum("init", "own", ["own", "swap"], "own: each side its library's init; swap: "
                  "ours from HF's init of the seed, HF from ours.")
flags.DEFINE_string("config", "small", "Model size preset (both sides).")
flags.DEFINE_integer("vocab_size", 8000, "BPE vocabulary trained on each corpus.")
flags.DEFINE_float("validation_fraction", 0.05, "Documents held out per corpus.")
flags.DEFINE_integer("max_validation_batches", 16, "Validation batches scored (fixed masks).")
flags.DEFINE_integer("batch_size", 32, "Sequences per step.")
flags.DEFINE_integer("max_seq_len", 128, "Tokens per sequence.")
flags.DEFINE_integer("train_steps", 550, "Schedule length: linear decay reaches 0 here.")
flags.DEFINE_integer("warmup_steps", 60, "Linear warmup steps.")
flags.DEFINE_integer("stop_after", 0, "Run only the first N steps of the schedule (0: all).")
flags.DEFINE_integer("eval_every", 50, "Score both models every N steps.")
flags.DEFINE_integer("threads", 2, "CPU threads for each side.")
flags.DEFINE_bool("report_only", False, "Print the table and plot from the records; train nothing.")

# What decides a run's trajectory besides the dumped batches (whose own hashes each record also
# holds): hashed into every record.
CODE_FILES = ("benchmarks/quality_sides.py",
              "roberta_tf/models/config.py", "roberta_tf/models/initializers.py",
              "roberta_tf/models/embeddings.py", "roberta_tf/models/transformer_layer.py",
              "roberta_tf/models/encoder.py", "roberta_tf/models/mlm_head.py",
              "roberta_tf/models/pretrainer.py", "roberta_tf/training/optimizer.py",
              "roberta_tf/training/schedule.py", "roberta_tf/training/trainer.py",
              "roberta_tf/training/losses.py", "roberta_tf/training/objectives.py")


def code_hash() -> str:
  h = hashlib.sha256()
  for path in CODE_FILES:
    with open(os.path.join(REPO, path), "rb") as f:
      h.update(path.encode() + b"\0" + f.read())
  return h.hexdigest()[:16]


def file_hash(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()[:16]


def parse_corpora(specs) -> dict:
  """{name: data_prep input spec or "kjv"}; exits with one line on a malformed entry."""
  corpora = {}
  for spec in specs:
    name, _, source = spec.partition("=")
    if not name or not name.replace("_", "").replace("-", "").isalnum():
      sys.exit(f"--corpora: bad corpus name in {spec!r} (use NAME or NAME=INPUT)")
    if not source and name not in ("stdlib", "kjv"):
      sys.exit(f"--corpora: {name!r} needs an input (NAME=FILES); built in: stdlib, kjv")
    corpora[name] = source or name
  return corpora


def parse_learning_rates(specs, max_seeds: int) -> dict:
  """{"1e-3": seeds, ...} from LR or LR:K entries."""
  rates = {}
  for spec in specs:
    lr, _, k = spec.partition(":")
    try:
      float(lr)
      seeds = min(int(k), max_seeds) if k else max_seeds
    except ValueError:
      sys.exit(f"--learning_rates: bad entry {spec!r} (use LR or LR:SEEDS, e.g. 5e-4:3)")
    rates[lr] = seeds
  return rates


# ---- data ------------------------------------------------------------------------------------
def _prep(args: list[str]) -> None:
  print("$ python -m " + " ".join(args), flush=True)
  subprocess.run([sys.executable, "-m", *args, "--noprogress"], cwd=REPO, check=True,
                 stdout=subprocess.DEVNULL)


def build_shards(corpus_dir: str, source: str) -> str:
  """Vocab + shards of one corpus under corpus_dir (skipped when already there)."""
  vocab, shards = os.path.join(corpus_dir, "vocab"), os.path.join(corpus_dir, "shards")
  if os.path.exists(os.path.join(shards, "dataset_info.json")):
    return shards
  if source == "kjv":
    from benchmarks import kjv_corpus  # pylint: disable=import-outside-toplevel
    source = os.path.join(corpus_dir, "kjv.txt")
    try:
      kjv_corpus.write_kjv(source)
    except RuntimeError as e:
      sys.exit(f"--corpora=kjv: {e}")
  _prep(["data_prep.train_tokenizer", f"--input={source}", f"--vocab_size={FLAGS.vocab_size}",
         f"--output_dir={vocab}", "--overwrite"])
  _prep(["data_prep.build_shards", f"--input={source}", f"--vocab_dir={vocab}",
         f"--output_dir={shards}", f"--max_seq_len={FLAGS.max_seq_len}", "--num_shards=4",
         f"--validation_fraction={FLAGS.validation_fraction}", "--overwrite"])
  return shards


def _dump(path: str, make_dataset, take: int) -> dict:
  """Stacked batches of make_dataset().take(take), cached in `path` (.npz)."""
  if os.path.exists(path):
    with np.load(path) as z:
      return {k: z[k] for k in z.files}
  batches = [{k: v.numpy() for k, v in b.items()} for b in make_dataset().take(take)]
  stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
  tmp = path + ".tmp.npz"
  np.savez_compressed(tmp, **stacked)
  os.replace(tmp, path)
  return stacked


class Corpus:
  """One corpus's shards, model config, validation batches and unigram baseline."""

  def __init__(self, name: str, source: str, work_dir: str):
    from roberta_tf import models  # pylint: disable=import-outside-toplevel
    from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
    self.name = name
    self.dir = os.path.join(work_dir, name)
    self.shards = build_shards(self.dir, source)
    info = dataset_info.read(self.shards)
    special = info["special_ids"]
    self.model_config = models.preset(
        FLAGS.config, vocab_size=info["vocab"]["size"], max_positions=FLAGS.max_seq_len + 2,
        pad_id=special["pad"], bos_id=special["bos"], eos_id=special["eos"], dropout=0.0,
        attention_dropout=0.0)
    os.makedirs(os.path.join(self.dir, "batches"), exist_ok=True)
    self.val = _dump(os.path.join(self.dir, "batches", "validation.npz"),
                     lambda: self._dataset("validation", False, 0), FLAGS.max_validation_batches)
    self.unigram = self._unigram(special.values())

  def _dataset(self, split, training, seed):
    from roberta_tf.data import pipeline  # pylint: disable=import-outside-toplevel
    return pipeline.build_dataset(self.shards, split, training=training,
                                  per_replica_batch_size=FLAGS.batch_size,
                                  max_seq_len=FLAGS.max_seq_len, model_config=self.model_config,
                                  seed=seed)

  def train_batches(self, seed: int) -> dict:
    return _dump(os.path.join(self.dir, "batches", f"train_seed{seed}.npz"),
                 lambda: self._dataset("train", True, seed), FLAGS.train_steps)

  def _unigram(self, special_ids) -> dict:
    from roberta_tf.data import unigram  # pylint: disable=import-outside-toplevel
    logp = unigram.train_log_probs(self.shards, self.model_config.vocab_size, special_ids)
    targets, weights = self.val["mask_ids"], self.val["mask_weights"]
    count = weights.sum()
    ppl = float(np.exp((-logp[targets] * weights).sum() / count))
    acc = float(((targets == int(np.argmax(logp))) * weights).sum() / count)
    return {"ppl": ppl, "acc": acc, "targets": int(count)}


# ---- runs ------------------------------------------------------------------------------------
def record_path(work_dir, corpus, lr, seed, side) -> str:
  tag = FLAGS.init + (f"_stop{FLAGS.stop_after}" if FLAGS.stop_after else "")
  return os.path.join(work_dir, corpus, "runs", tag, f"lr{lr}_seed{seed}_{side}.json")


def run_one(corpus: Corpus, lr: str, seed: int, side: str, train: dict, log) -> dict:
  spec = quality_sides.RunSpec(
      peak_lr=float(lr), seed=seed, train_steps=FLAGS.train_steps,
      warmup_steps=FLAGS.warmup_steps, stop_after=FLAGS.stop_after or FLAGS.train_steps,
      eval_every=FLAGS.eval_every, threads=FLAGS.threads)
  config = corpus.model_config
  if side == "ours":
    model = (quality_sides.build_ours(config, seed) if FLAGS.init == "own" else
             quality_sides.ours_from_hf(quality_sides.build_hf(config, seed), config))
    return quality_sides.train_ours(model, train, corpus.val, spec, log)
  model = (quality_sides.build_hf(config, seed) if FLAGS.init == "own" else
           quality_sides.hf_from_ours(quality_sides.build_ours(config, seed), config))
  return quality_sides.train_hf(model, train, corpus.val, spec, log)


def load_records(work_dir: str, corpora) -> dict:
  records = {}
  for name in corpora:
    for lr, seeds in parse_learning_rates(FLAGS.learning_rates, FLAGS.seeds).items():
      for seed in range(seeds):
        for side in FLAGS.sides:
          path = record_path(work_dir, name, lr, seed, side)
          if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
              records[(name, lr, seed, side)] = json.load(f)
  return records


def report(work_dir: str, records: dict, unigram: dict) -> None:
  rows = quality_report.summarize(records, unigram)
  codes = sorted({r["code"] for r in records.values()})
  text = (quality_report.table(rows) + "\n\nPer seed:\n\n" + quality_report.per_seed_table(rows)
          + f"\n\ncode versions among the records: {len(codes)} ({', '.join(codes)})\n")
  print("\n" + text, flush=True)
  with open(os.path.join(work_dir, "results.md"), "w", encoding="utf-8") as f:
    f.write(text)
  with open(os.path.join(work_dir, "results.json"), "w", encoding="utf-8") as f:
    json.dump({"unigram": unigram, "rows": rows, "code_versions": codes}, f, indent=2)
  path = quality_report.plot(records, unigram, os.path.join(work_dir, "quality_vs_hf.png"))
  print(f"plot: {path}" if path else "(matplotlib not installed: no plot)")


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  # torch's OpenMP threads spin while they wait; beside other jobs (the benchmark runs niced)
  # that burns their time slices: a `small` HF step took 1.7x as long as with passive waiting.
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  work_dir = os.path.abspath(FLAGS.work_dir)
  corpora = parse_corpora(FLAGS.corpora)
  rates = parse_learning_rates(FLAGS.learning_rates, FLAGS.seeds)
  loaded = {name: Corpus(name, source, work_dir) for name, source in corpora.items()}
  unigram = {name: c.unigram for name, c in loaded.items()}
  for c in loaded.values():
    print(f"{c.name}: validation {c.unigram['targets']:,} masked targets, unigram ppl "
          f"{c.unigram['ppl']:,.1f} acc {c.unigram['acc']:.3f}", flush=True)
  code = code_hash()
  stop = FLAGS.stop_after or FLAGS.train_steps
  # Each LR's seeds spread evenly over the run (LR:K with few seeds, the record's, near the
  # end), so that a partial run already covers every corpus and the main LRs.
  order = list(rates)
  jobs = sorted(((name, lr, seed, side) for lr in order for seed in range(rates[lr])
                 for name in loaded for side in FLAGS.sides),
                key=lambda j: ((j[2] + 1) / rates[j[1]], order.index(j[1]), j[2]))
  todo = [j for j in jobs if not os.path.exists(record_path(work_dir, *j))]
  print(f"{FLAGS.config}, {stop} of {FLAGS.train_steps} steps x {FLAGS.batch_size} x "
        f"{FLAGS.max_seq_len}, init {FLAGS.init}, code {code}: {len(jobs)} runs, "
        f"{len(jobs) - len(todo)} done before, {len(todo)} to go", flush=True)
  if FLAGS.report_only:
    todo = []
  seconds_per_step = []
  for i, (name, lr, seed, side) in enumerate(todo):
    corpus = loaded[name]
    train = corpus.train_batches(seed)
    label = f"[{i + 1}/{len(todo)}] {name} lr {lr} seed {seed} {side}"

    def log(step, s, loss, label=label):
      print(f"  {label} step {step}: held-out ppl {s['ppl']:,.1f} acc {s['acc']:.3f}, "
            f"train loss {loss:.3f} ({time.strftime('%H:%M:%S')})", flush=True)
    record = run_one(corpus, lr, seed, side, train, log)
    batches = {"train": file_hash(os.path.join(corpus.dir, "batches", f"train_seed{seed}.npz")),
               "validation": file_hash(os.path.join(corpus.dir, "batches", "validation.npz"))}
    record.update(code=code, batches=batches, corpus=name, lr=lr, seed=seed, side=side,
                  init=FLAGS.init, unigram_ppl=corpus.unigram["ppl"], train_steps=FLAGS.train_steps,
                  warmup_steps=FLAGS.warmup_steps)
    path = record_path(work_dir, name, lr, seed, side)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
      json.dump(record, f)
    os.replace(path + ".tmp", path)
    seconds_per_step.append(record["seconds"] / stop)
    eta = statistics.median(seconds_per_step) * stop * (len(todo) - i - 1)
    final = record["curve"][-1][1]["ppl"]
    print(f"{label}: ppl {final:,.1f} ({final / corpus.unigram['ppl']:.2f}x unigram) in "
          f"{record['seconds'] / 60:.1f} min; ETA {eta / 3600:.1f} h "
          f"({time.strftime('%H:%M', time.localtime(time.time() + eta))})", flush=True)
  report(work_dir, load_records(work_dir, loaded), unigram)
  return 0


if __name__ == "__main__":
  app.run(main)
