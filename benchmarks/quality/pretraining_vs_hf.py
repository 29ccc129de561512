r"""Benchmark: does our pretraining learn as well as the reference, as a rate over seeds?

    pip install -r requirements-bench.txt      # torch (CPU) + transformers, pinned
    apt-get install bible-kjv                  # the `kjv` corpus (benchmarks/common/kjv_corpus.py)
    nice -n 10 python -m benchmarks.quality.pretraining_vs_hf [--work_dir=runs/quality_vs_hf] \
        [--corpora=stdlib,kjv] [--seeds=5] [--learning_rates=1e-3,5e-4:3] \
        [--arms=ours,hf,ours_fairseq:3,hf_no_shared:3]

Protocol (issues 27 and 35), per corpus:
1. Data: an 8K byte-level BPE trained on the corpus, FULL-SENTENCES shards of 128 tokens, 5% of
   the documents held out. A corpus is `stdlib` (data_prep's embedded Python docs), `kjv` (the
   King James Bible from Debian's bible-kjv, written by benchmarks/common/kjv_corpus.py), or
   NAME=INPUT for any data_prep input spec (files, globs, directories).
2. Batches, dumped once and fed to every arm: per seed, --train_steps dynamically masked
   training batches from our input pipeline (the seed sets order and masks), and one
   fixed-mask pass over the validation split (the same for every seed and arm).
3. Per peak LR, seed and arm, the model starts from its own library's random init under that
   seed (ours: roberta_tf's; HF: `RobertaForMaskedLM(config)`, transformers' `_init_weights`),
   `small` sizes, dropout 0, float32, AdamW (beta 0.9/0.98, eps 1e-6, weight decay 0.01 on
   matrices only), warmup --warmup_steps then linear decay to 0 at --train_steps, same batches
   in the same order (benchmarks/quality/pretraining_sides.py). The arms (pretraining_sides.ARMS):
   `ours` (roberta_tf's default, with HF's shared token-type row), `hf` (HF as it is),
   `ours_fairseq` (ours without the row) and `hf_no_shared` (HF with the row zeroed and frozen). An
   arm given as ARM:K runs K seeds, at the first peak LR only.
4. One evaluator (NumPy) scores every arm on the same masked validation targets every
   --eval_every steps, beside the unigram baseline (train-split frequencies). A run *left the
   plateau* when its last held-out ppl is <= 0.9x the unigram's
   (benchmarks/quality/parity_report.py).

Records: every finished run appends one JSON line to --records (default
benchmarks/records/learning_parity.jsonl, committed; benchmarks/common/parity_records.py) with its
key, code hash, batch hashes, curve and final figures; a run whose key is there is skipped, so an
interrupted series continues where it stopped, on this machine or another (the work dir's
vocab, shards and batches are rebuilt from the corpus). Order: the deciding pair (`ours`, `hf`)
over all seeds at the first LR, then the other arms, then the other LRs. Printed: progress with
an ETA and the tables, which also replace the generated section of --docs
(docs/learning_parity.md), with the plot beside it (docs/learning_parity.png).

--init=swap is the swap test: our model trains from HF's step-0 weights of the seed and HF's
from ours, so a difference that follows the weights is the init's, one that stays with the side
is the training code's. --stop_after runs only the first steps of the schedule; it is part of a
record's key.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import subprocess
import sys
import time

import numpy as np
from absl import app, flags

from benchmarks.common import cached_data, commands, parity_records
from benchmarks.quality import parity_report, pretraining_sides

REPO = commands.REPO

FLAGS = flags.FLAGS
flags.DEFINE_string("work_dir", "runs/quality_vs_hf", "Vocabs, shards, batches, run records.")
flags.DEFINE_list("corpora", ["stdlib", "kjv"], "Corpora: stdlib, kjv, or NAME=INPUT (a data_prep "
                  "input spec); each gets its own vocab and shards.")
flags.DEFINE_integer("seeds", 5, "Seeds 0..N-1 per peak LR (fewer where --learning_rates says).")
flags.DEFINE_list("learning_rates", ["1e-3", "5e-4:3"], "Peak LRs, each optionally "
                  "LR:K to run only min(K, --seeds) seeds at it.")
flags.DEFINE_list("arms", ["ours", "hf", "ours_fairseq:3", "hf_no_shared:3"],
                  f"Arms ({', '.join(pretraining_sides.ARMS)}); ARM:K runs min(K, --seeds) seeds "
                  "at the first peak LR only.")
flags.DEFINE_string("records", parity_records.DEFAULT_PATH, "JSON-lines file of finished runs "
                    "(appended; runs already there are skipped).")
flags.DEFINE_string("docs", os.path.join(REPO, "docs", "learning_parity.md"), "Markdown file "
                    "whose generated section gets the tables (the plot goes beside it); empty: "
                    "none.")
flags.DEFINE_enum("init", "own", ["own", "swap"], "own: each side its library's init; swap: "
                  "ours from HF's init of the seed, HF from ours.")
flags.DEFINE_string("config", "small", "Model size preset (both sides).")
flags.DEFINE_integer("vocab_size", 8000, "BPE vocabulary trained on each corpus.")
flags.DEFINE_float("validation_fraction", 0.05, "Documents held out per corpus.")
flags.DEFINE_integer("max_validation_batches", 16, "Validation batches scored (fixed masks).")
commands.define_batch_flags(batch_size=32, max_seq_len=128)
flags.DEFINE_integer("train_steps", 550, "Schedule length: linear decay reaches 0 here.")
flags.DEFINE_integer("warmup_steps", 60, "Linear warmup steps.")
flags.DEFINE_integer("stop_after", 0, "Run only the first N steps of the schedule (0: all).")
flags.DEFINE_integer("eval_every", 50, "Score both models every N steps.")
flags.DEFINE_integer("threads", 2, "CPU threads for each side.")
flags.DEFINE_string("shard", "0/1", "I/N: run only every N-th pending run from the I-th, so that N "
                    "processes (e.g. --threads=1 each) share one series and one records file.")
flags.DEFINE_bool("report_only", False, "Print the table and plot from the records; train nothing.")

# What decides a run's trajectory besides the dumped batches (whose own hashes each record also
# holds): hashed into every record.
CODE_FILES = ("benchmarks/quality/pretraining_sides.py", "roberta_tf/models/initializers.py",
              "roberta_tf/models/roberta/config.py", "roberta_tf/models/roberta/embeddings.py",
              "roberta_tf/models/roberta/transformer_layer.py",
              "roberta_tf/models/roberta/encoder.py", "roberta_tf/models/roberta/mlm_head.py",
              "roberta_tf/models/roberta/pretrainer.py", "roberta_tf/training/optimizer.py",
              "roberta_tf/training/schedule.py", "roberta_tf/training/train_step.py",
              "roberta_tf/pretraining/losses.py", "roberta_tf/pretraining/objective.py")


def code_hash() -> str:
  h = hashlib.sha256()
  for path in CODE_FILES:
    with open(os.path.join(REPO, path), "rb") as f:
      h.update(path.encode() + b"\0" + f.read())
  return h.hexdigest()[:16]


def file_hash(path: str) -> str:
  with open(path, "rb") as f:
    return hashlib.sha256(f.read()).hexdigest()[:16]


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


def parse_arms(specs, max_seeds: int) -> dict:
  """{arm: seeds or None (every LR's own count)} from ARM or ARM:K entries."""
  arms = {}
  for spec in specs:
    arm, _, k = spec.partition(":")
    if arm not in pretraining_sides.ARMS:
      sys.exit(f"--arms: unknown arm {arm!r}; choose from {', '.join(pretraining_sides.ARMS)}")
    try:
      arms[arm] = min(int(k), max_seeds) if k else None
    except ValueError:
      sys.exit(f"--arms: bad entry {spec!r} (use ARM or ARM:SEEDS, e.g. ours_fairseq:3)")
  return arms


def plan(corpora, rates: dict, arms: dict) -> list[tuple]:
  """(corpus, lr, seed, arm) in run order: the full arms at the first LR over all seeds (seed
  by seed, every corpus), then the limited arms there, then the other LRs' full arms."""
  jobs = []
  first = next(iter(rates))
  for tier, lrs, chosen in ((0, [first], [a for a, k in arms.items() if k is None]),
                            (1, [first], [a for a, k in arms.items() if k is not None]),
                            (2, list(rates)[1:], [a for a, k in arms.items() if k is None])):
    del tier
    for lr in lrs:
      seeds = max([rates[lr] if arms[a] is None else min(arms[a], rates[lr]) for a in chosen],
                  default=0)
      for seed in range(seeds):
        for name in corpora:
          for arm in chosen:
            if seed < (rates[lr] if arms[arm] is None else min(arms[arm], rates[lr])):
              jobs.append((name, lr, seed, arm))
  return jobs


# ---- data ------------------------------------------------------------------------------------
def _dump(path: str, make_dataset, take: int) -> dict:
  """Stacked batches of make_dataset().take(take), cached in `path` (.npz)."""
  if os.path.exists(path):
    with np.load(path) as z:
      return {k: z[k] for k in z.files}
  batches = [{k: v.numpy() for k, v in b.items()} for b in make_dataset().take(take)]
  stacked = {k: np.stack([b[k] for b in batches]) for k in batches[0]}
  tmp = f"{path}.tmp{os.getpid()}.npz"  # processes sharing a series may dump the same seed
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
    self.shards = cached_data.corpus_shards(
        self.dir, source, vocab_size=FLAGS.vocab_size, max_seq_len=FLAGS.max_seq_len,
        validation_fraction=FLAGS.validation_fraction)
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
    self.validation_hash = file_hash(os.path.join(self.dir, "batches", "validation.npz"))

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
def run_key(corpus: str, lr: str, seed: int, arm: str) -> tuple:
  return parity_records.key_of({
      "corpus": corpus, "lr": lr, "seed": seed, "arm": arm, "init": FLAGS.init,
      "train_steps": FLAGS.train_steps, "warmup_steps": FLAGS.warmup_steps,
      "stop_after": FLAGS.stop_after or FLAGS.train_steps})


def run_one(corpus: Corpus, lr: str, seed: int, arm: str, train: dict, log) -> dict:
  spec = pretraining_sides.RunSpec(
      peak_lr=float(lr), seed=seed, train_steps=FLAGS.train_steps,
      warmup_steps=FLAGS.warmup_steps, stop_after=FLAGS.stop_after or FLAGS.train_steps,
      eval_every=FLAGS.eval_every, threads=FLAGS.threads)
  config = corpus.model_config
  side = pretraining_sides.side_of(arm)
  if FLAGS.init == "swap":
    if arm not in ("ours", "hf"):
      sys.exit(f"--init=swap trains the arms ours and hf only, not {arm!r}")
    model = (pretraining_sides.ours_from_hf(pretraining_sides.build_hf(config, seed), config)
             if side == "ours" else
             pretraining_sides.hf_from_ours(pretraining_sides.build_ours(config, seed), config))
  else:
    model = pretraining_sides.build_arm(arm, config, seed)
  train_fn = pretraining_sides.train_ours if side == "ours" else pretraining_sides.train_hf
  return train_fn(model, train, corpus.val, spec, log)


def git_revision() -> str:
  try:
    head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=REPO, check=True,
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                           check=True, capture_output=True, text=True).stdout.strip()
  except (OSError, subprocess.CalledProcessError):
    return "unknown"
  return head + ("+dirty" if dirty else "")


def report(records: list[dict]) -> None:
  rows = parity_report.summarize(records)
  text = ("### Every arm, per corpus and peak LR\n\n" + parity_report.arms_table(rows)
          + "\n\n### Per seed (final held-out ppl, x the unigram's)\n\n"
          + parity_report.per_seed_table(records) + "\n\n" + parity_report.provenance(records)
          + "\n")
  print("\n" + text, flush=True)
  if FLAGS.docs:
    plot_path = os.path.splitext(FLAGS.docs)[0] + ".png"
    plotted = parity_report.plot(records, plot_path)
    if plotted:
      text += f"\n![held-out ppl against steps]({os.path.basename(plot_path)})\n"
    parity_report.write_docs_section(FLAGS.docs, text)
    print(f"tables written into {FLAGS.docs}" + (f"; plot: {plotted}" if plotted else ""))


def done_runs(records: list[dict], loaded: dict) -> set:
  """The keys of the records made on the corpora as they are now: a record whose validation
  batches differ from `loaded`'s (the corpus or its prep changed since) is of other data, so
  its run is due again (the report never puts the two in one row: parity_report)."""
  done, stale = set(), {}
  for r in records:
    corpus = loaded.get(r["corpus"])
    if corpus is not None and r["batches"]["validation"] != corpus.validation_hash:
      stale[r["corpus"]] = stale.get(r["corpus"], 0) + 1
      continue
    done.add(parity_records.key_of(r))
  for name, count in stale.items():
    print(f"{name}: {count} record(s) are of other data (validation batches not "
          f"{loaded[name].validation_hash}: the corpus or its prep changed since); their runs "
          "are due again", flush=True)
  return done


def pending(done: set, corpora) -> tuple[list[tuple], int, int]:
  """(this process's runs still to do, the plan's runs, how many of them are recorded), over
  `corpora` (their names, in --corpora's order)."""
  rates = parse_learning_rates(FLAGS.learning_rates, FLAGS.seeds)
  arms = parse_arms(FLAGS.arms, FLAGS.seeds)
  jobs = plan(corpora, rates, arms)
  todo = [j for j in jobs if run_key(*j) not in done]
  try:
    index, count = (int(x) for x in FLAGS.shard.split("/"))
    assert 0 <= index < count
  except (ValueError, AssertionError):
    sys.exit(f"--shard={FLAGS.shard!r}: use I/N with 0 <= I < N, e.g. 1/2")
  return todo[index::count], len(jobs), len(jobs) - len(todo)


def record_of(corpus: Corpus, job: tuple, result: dict, code: str, revision: str) -> dict:
  """The JSON line of a finished run: its key, figures, code and batch hashes."""
  from roberta_tf.training import precision_probe  # pylint: disable=import-outside-toplevel
  name, lr, seed, arm = job
  losses = result.pop("train_loss")
  result.pop("grad_norm")
  record = dict(zip(parity_records.KEY_FIELDS, run_key(name, lr, seed, arm), strict=True))
  record.update(
      result, code=code, git=revision,
      # Bit for bit only on the same kind of CPU (oneDNN picks its kernels by it).
      host={"cpus": os.cpu_count(), "machine": precision_probe.machine_key()},
      finished=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
      batches={"train": file_hash(os.path.join(corpus.dir, "batches", f"train_seed{seed}.npz")),
               "validation": corpus.validation_hash},
      unigram_ppl=corpus.unigram["ppl"], final=result["curve"][-1][1],
      train_loss_every_10=[round(float(np.mean(losses[k:k + 10])), 4)
                           for k in range(0, len(losses), 10)])
  record["escaped"] = parity_report.escaped(record)
  return record


def run_all(todo: list[tuple], loaded: dict, records_path: str) -> None:
  """Every pending run in order, each recorded as it finishes, with progress and an ETA."""
  code, revision = code_hash(), git_revision()  # what this process runs: read once, at start
  stop = FLAGS.stop_after or FLAGS.train_steps
  seconds_per_step = []
  for i, (name, lr, seed, arm) in enumerate(todo):
    corpus = loaded[name]
    train = corpus.train_batches(seed)
    label = f"[{i + 1}/{len(todo)}] {name} lr {lr} seed {seed} {arm}"

    def log(step, s, loss, label=label):
      print(f"  {label} step {step}: held-out ppl {s['ppl']:,.1f} acc {s['acc']:.3f}, "
            f"train loss {loss:.3f} ({time.strftime('%H:%M:%S')})", flush=True)
    result = run_one(corpus, lr, seed, arm, train, log)
    record = record_of(corpus, (name, lr, seed, arm), result, code, revision)
    parity_records.append(records_path, record)
    seconds_per_step.append(record["seconds"] / stop)
    eta = statistics.median(seconds_per_step) * stop * (len(todo) - i - 1)
    final = record["final"]["ppl"]
    print(f"{label}: ppl {final:,.1f} ({final / corpus.unigram['ppl']:.2f}x unigram) in "
          f"{record['seconds'] / 60:.1f} min; ETA {eta / 3600:.1f} h "
          f"({time.strftime('%H:%M', time.localtime(time.time() + eta))})", flush=True)


def main(argv):
  del argv
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
  # torch's OpenMP threads spin while they wait; beside other jobs (the benchmark runs niced)
  # that burns their time slices: a `small` HF step took 1.7x as long as with passive waiting.
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  records_path = os.path.abspath(FLAGS.records)
  if FLAGS.report_only:
    report(parity_records.read(records_path))
    return 0
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(FLAGS.threads)
  tf.config.threading.set_inter_op_parallelism_threads(FLAGS.threads)
  work_dir = os.path.abspath(FLAGS.work_dir)
  loaded = {name: Corpus(name, source, work_dir)
            for name, source in cached_data.parse_corpora(FLAGS.corpora).items()}
  for c in loaded.values():
    print(f"{c.name}: validation {c.unigram['targets']:,} masked targets, unigram ppl "
          f"{c.unigram['ppl']:,.1f} acc {c.unigram['acc']:.3f}", flush=True)
  todo, planned, recorded = pending(done_runs(parity_records.read(records_path), loaded), loaded)
  stop = FLAGS.stop_after or FLAGS.train_steps
  print(f"{FLAGS.config}, {stop} of {FLAGS.train_steps} steps x {FLAGS.batch_size} x "
        f"{FLAGS.max_seq_len}, init {FLAGS.init}, code {code_hash()}: {planned} runs, "
        f"{recorded} in {records_path} already, {len(todo)} to go"
        + (f" in this process (--shard={FLAGS.shard})" if FLAGS.shard != "0/1" else ""),
        flush=True)
  run_all(todo, loaded, records_path)
  report(parity_records.read(records_path))
  return 0


if __name__ == "__main__":
  app.run(main)
