"""Runs a study: prep once, then train / evaluate / fine-tune every arm x seed, resumably.

work_dir layout:
    corpus.jsonl            the corpus subset (studies with corpus_mb > 0)
    vocab/, shards/         one vocabulary and one set of (FULL-SENTENCES) shards for every arm;
                            their validation split is the shared held-out set
    shards_<packing>/       the training shards of arms with another packing (input_format)
    runs/<arm>/seed<k>/     model/ (pretraining), finetune/, train.log, result.json
    results.json, results.md, <study>.png   (see report.py)

Each step is one of the project's binaries in its own process (printed, so it can be rerun by
hand). A run whose result.json exists is skipped, so rerunning the same command after an
interruption continues where it stopped (a half-trained model resumes from its checkpoint).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent import futures

from data_prep import corpus as corpus_lib
from roberta_tf.ablation import report, run_records, studies
from roberta_tf.ablation.settings import StudySettings
from roberta_tf.common import atomic_write, files
from roberta_tf.data import packings

EVAL_SEED = 1234  # the fixed masks of the shared held-out set: the same for every arm
SEQ_LEN = 128
_EVAL_LINE = re.compile(r"eval step (\d+): loss [\d.]+ \| perplexity ([\d.]+)")
_STEP_LINE = re.compile(r"^step (\d+)[/ ]")
_OLD_KEYS = {"task_metric": "problem_metric", "task_value": "problem_value"}


class RunnerError(RuntimeError):
  """A step of the study failed (the message names the command and its log)."""


def _run(args: Sequence[str], log_path: str | None = None, stdout_only: bool = False) -> str:
  """Runs `python -m args...`; returns its output (stdout + stderr, or stdout only). With
  log_path the output goes there as it is written (`tail -f` it to follow a training run); a
  log_path on a URL (a child process writes only local files) gets it when the step ends."""
  print("$ python -m " + shlex.join(args), flush=True)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", PYTHONUNBUFFERED="1")
  cmd = [sys.executable, "-m", *args]
  if log_path and not stdout_only and not files.is_url(log_path):
    with files.open(log_path, "w", encoding="utf-8") as log:
      returncode = subprocess.run(cmd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                  check=False).returncode
    out = files.read_text(log_path)
  else:
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    returncode, out = proc.returncode, proc.stdout if stdout_only else proc.stdout + proc.stderr
    if log_path:
      with files.open(log_path, "w", encoding="utf-8") as log:
        log.write(proc.stdout + proc.stderr)
    if returncode != 0:
      out = proc.stdout + proc.stderr
  if returncode != 0:
    lines = out.strip().splitlines()
    said = next((line for line in reversed(lines) if line.startswith("error:")), "")
    raise RunnerError(f"{args[0]} failed (exit {returncode})"
                      f"{': ' + said if said else ''}{' - log: ' + log_path if log_path else ''}"
                      "\n" + "\n".join(lines[-15:]))
  return out


def write_corpus_subset(spec: str, mb: float, path: str, text_field: str = "text") -> int:
  """Writes the first `mb` MB of the corpus's documents to `path` (.jsonl); returns documents."""
  docs, size = [], 0
  for doc in corpus_lib.iter_documents(corpus_lib.resolve_inputs(spec), text_field):
    docs.append({"text": "\n".join(doc)})
    size += sum(len(s.encode("utf-8")) + 1 for s in doc)
    if size >= mb * 1e6:
      break
  atomic_write.write_text(path, "".join(json.dumps(d) + "\n" for d in docs))
  return len(docs)


def prepare(corpus: str, work_dir: str, study: studies.Study, vocab_size: int) -> dict[str, str]:
  """Vocab and shards (skipped when already there); returns packing -> shard dir, "eval" -> the
  shared held-out set's (the FULL-SENTENCES shards)."""
  spec = corpus
  if study.corpus_mb:
    spec = files.join(work_dir, "corpus.jsonl")
    if not files.exists(spec):
      n = write_corpus_subset(corpus, study.corpus_mb, spec)
      print(f"corpus subset: {n} documents, {study.corpus_mb} MB of {corpus}", flush=True)
  vocab, shards = files.join(work_dir, "vocab"), files.join(work_dir, "shards")
  if not files.exists(files.join(vocab, "merges.txt")):
    _run(["data_prep.train_tokenizer", f"--input={spec}", f"--vocab_size={vocab_size}",
          f"--output_dir={vocab}", "--overwrite", "--noprogress"])
  dirs = {"eval": shards, "full_sentences": shards}
  for packing in sorted({a.packing for a in study.arms} - {"full_sentences"}):
    dirs[packing] = files.join(work_dir, f"shards_{packing}")
  for packing, out in dirs.items():
    if packing != "eval" and not files.exists(files.join(out, "dataset_info.json")):
      # The same seed and validation fraction: every packing splits the same documents off.
      _run(["data_prep.build_shards", f"--input={spec}", f"--vocab_dir={vocab}",
            f"--output_dir={out}", f"--max_seq_len={SEQ_LEN}", "--num_shards=4",
            "--validation_fraction=0.05", f"--packing={packing}", "--overwrite",
            "--noprogress"])
  return dirs


def tokens_per_sequence(shard_dir: str) -> float:
  """Mean real tokens per training sequence of a shard dir (its dataset_info.json)."""
  train = files.read_json(files.join(shard_dir, "dataset_info.json"))["splits"]["train"]
  return train["num_tokens"] / max(train["num_sequences"], 1)


def run_arm(arm: studies.Arm, seed: int, shards: dict, run_dir: str, settings: StudySettings,
            real_per_sequence: float, beside: str = "") -> dict:
  """Pretrains, evaluates and fine-tunes one arm with one seed; returns (and saves) its result.

  ``shards``: `prepare`'s dirs; the arm trains on its packing's and is evaluated (during
  training too) on the shared held-out set. ``real_per_sequence``: `tokens_per_sequence` of
  its training shards. ``beside``: the arm of the run trained at the same time (--paired)."""
  result_path = files.join(run_dir, "result.json")
  if files.exists(result_path):  # one written before task_* became problem_* reads the same
    return {_OLD_KEYS.get(k, k): v for k, v in files.read_json(result_path).items()}
  files.makedirs(run_dir)
  start = time.time()
  model = files.join(run_dir, "model")
  train_data, eval_data = shards[arm.packing], shards["eval"]
  load_before = run_records.load_average()
  log = _run(["roberta_tf.train", f"--model_dir={model}", f"--train_data={train_data}",
              f"--eval_data={eval_data}", f"--config={settings.config}", f"--max_seq_len={SEQ_LEN}",
              f"--seed={seed}", "--dropout=0.1", "--checkpoint_every=100000",
              "--eval_steps=20", "--log_every=50",
              *arm.train_flags(settings.warmup_fraction), *settings.train_flags],
             files.join(run_dir, "train.log"))
  load = [load_before, run_records.load_average()]
  real_per_step = arm.batch_size * real_per_sequence
  # A wall-clock arm (--train_minutes) ends when its budget is spent: count the steps it took.
  steps = [int(m.group(1)) for m in map(_STEP_LINE.search, log.splitlines()) if m]
  trained = max(steps) if any(f.startswith("--train_minutes") for f in arm.flags) and steps \
      else arm.train_steps
  curve = [[round(int(m.group(1)) * real_per_step), float(m.group(2))]
           for m in map(_EVAL_LINE.search, log.splitlines()) if m]
  metrics, extra = _evaluate_arm(arm, model, train_data, eval_data, settings)
  scores = (_finetune_arm(model, seed, run_dir, settings) if settings.task_epochs
            else {"metric": "-", "-": None})  # --task_epochs=0: no downstream problem
  result = {"arm": arm.name, "seed": seed, "batch_size": arm.batch_size,
            "train_steps": trained, "learning_rate": arm.learning_rate,
            "tokens": arm.batch_size * trained * SEQ_LEN,  # sequence slots
            "real_tokens": round(trained * real_per_step), "packing": arm.packing,
            "perplexity": metrics["perplexity"], "mlm_accuracy": metrics["mlm_accuracy"],
            "problem_metric": scores["metric"], "problem_value": scores[scores["metric"]],
            "curve": curve, **extra, "flags": list(arm.flags), "load": load,
            **({"beside": beside} if beside else {}),
            "minutes": round((time.time() - start) / 60, 2)}
  atomic_write.write_json(result_path, result)
  return result


def _evaluate_arm(arm: studies.Arm, model: str, train_data: str, eval_data: str,
                  settings: StudySettings) -> tuple[dict, dict]:
  """(metrics on the shared held-out set, extra results: the NSP head's on the arm's own
  pairs for a pair packing, BLiMP-format minimal pairs when --minimal_pairs names them)."""
  # RoBERTa's 15% / 80-10-10 masks whatever the arm trained with (the recipe study's 40% arm).
  metrics = json.loads(_json_tail(_run(
      ["roberta_tf.evaluate", f"--model_dir={model}", f"--eval_data={eval_data}", "--json",
       f"--seed={EVAL_SEED}", f"--batch_size={studies.MICRO_BATCH}", "--standard_masking"],
      stdout_only=True)))
  nsp = {}
  if arm.packing in packings.PAIR_PACKINGS:  # the NSP head on its own format's held-out pairs
    own = json.loads(_json_tail(_run(
        ["roberta_tf.evaluate", f"--model_dir={model}", f"--eval_data={train_data}", "--json",
         f"--seed={EVAL_SEED}", f"--batch_size={studies.MICRO_BATCH}"], stdout_only=True)))
    if "nsp_accuracy" in own:
      nsp = {"nsp_accuracy": own["nsp_accuracy"], "own_perplexity": own["perplexity"]}
  linguistic = {}
  if settings.minimal_pairs:  # BLiMP-format pairs: accuracy by pseudo-log-likelihood
    pairs = json.loads(_run(["roberta_tf.evaluate", f"--model_dir={model}",
                             f"--minimal_pairs={settings.minimal_pairs}", "--json",
                             f"--pairs_per_paradigm={settings.pairs_per_paradigm}"],
                            stdout_only=True).strip().splitlines()[-1])
    linguistic = {"blimp": pairs["accuracy"], "blimp_pairs": pairs["pairs"]}
  return metrics, {**nsp, **linguistic}


def _finetune_arm(model: str, seed: int, run_dir: str, settings: StudySettings) -> dict:
  """Fine-tunes the pretrained `model` on the study's problem (--task_train, --task_dev);
  returns its eval_results.json."""
  finetune_dir = files.join(run_dir, "finetune")
  _run(["roberta_tf.finetune", "--task=classification", f"--train_file={settings.task_train}",
        f"--eval_file={settings.task_dev}", f"--init_from={model}", f"--model_dir={finetune_dir}",
        f"--text_fields={settings.task_text_field}",
        f"--label_field={settings.task_label_field}", f"--epochs={settings.task_epochs}",
        f"--learning_rate={settings.task_learning_rate}",
        f"--max_seq_len={SEQ_LEN}", f"--seed={seed}", "--seeds=1", "--overwrite"],
       files.join(run_dir, "finetune.log"))
  return files.read_json(files.join(finetune_dir, "eval_results.json"))


def _json_tail(output: str) -> str:
  """The JSON object a binary printed last (its log lines come before it)."""
  return output[output.rindex("{\n"):] if "{\n" in output else output


# What a study writes into its work_dir (what --overwrite, or a changed failed start, removes).
_PREP_OUTPUTS = ("corpus.jsonl", "vocab", "shards", "shards_*")
_STUDY_OUTPUTS = ("study.json", *_PREP_OUTPUTS, "runs", "results.json", "results.md", "*.png")


def _remove(work_dir: str, patterns) -> list[str]:
  removed = sorted(p for pattern in patterns
                   for p in files.glob(files.join(files.escape(work_dir), pattern)))
  for path in removed:
    if files.isdir(path):
      files.rmtree(path)
    else:
      files.remove(path)
  return [files.basename(p) for p in removed]


def _has_runs(work_dir: str) -> bool:
  runs = files.join(work_dir, "runs")
  return files.isdir(runs) and bool(files.listdir(runs))


def check_settings(work_dir: str, settings: dict, overwrite: bool = False) -> None:
  """Records the study's settings in work_dir/study.json; refuses a work_dir that holds
  another study's runs (seeds and arms may change: a rerun with more seeds or other arms adds
  runs; an arm of the same name must be defined the same).

  With `overwrite` an earlier study's outputs are deleted first. A start that failed before
  any run (say a bad --corpus) never blocks a corrected command: its prep is replaced.
  """
  path = files.join(work_dir, "study.json")
  settings = json.loads(json.dumps(settings))  # as it reads back (tuples become lists)
  if overwrite:
    removed = _remove(work_dir, _STUDY_OUTPUTS)
    if removed:
      print(f"--overwrite: deleted {', '.join(removed)} from {work_dir}", flush=True)
  if files.exists(path):
    before = files.read_json(path)
    for arm in before.get("arms", []):  # recorded before arms had a packing
      arm.setdefault("packing", "full_sentences")
      arm.setdefault("warmup_fraction", None)  # and before an arm could set its own warmup
    # Arms may come and go (--arm, --extra_arm: each has its own runs dir) as seeds do; an arm
    # name keeps its definition. study.json then holds every arm run there.
    arms_before = {a["name"]: a for a in before.get("arms", [])}
    arms_now = {a["name"]: a for a in settings.get("arms", [])}
    clash = any(arms_before[n] != a for n, a in arms_now.items() if n in arms_before)
    differ = sorted({k for k in set(before) | set(settings)
                     if k != "arms" and before.get(k) != settings.get(k)} |
                    ({"arms"} if clash else set()))
    if not differ:
      if set(arms_now) - set(arms_before):
        atomic_write.write_json(path, {**settings, "arms": list({**arms_before, **arms_now}
                                                               .values())})
      return
    if _has_runs(work_dir):
      raise RunnerError(f"{work_dir} holds a study run with other settings ({', '.join(differ)}:"
                        f" {[before.get(k) for k in differ]} there); pass --overwrite to delete "
                        "it and start over, or use another --work_dir")
    removed = _remove(work_dir, _PREP_OUTPUTS)
    print(f"note: {work_dir} held the unfinished start of a study with other settings "
          f"({', '.join(differ)}); replaced{': deleted ' + ', '.join(removed) if removed else ''}",
          flush=True)
  atomic_write.write_json(path, settings)


def run_study(name: str, study: studies.Study, corpus: str, work_dir: str,
              seeds: Sequence[int], settings: StudySettings, overwrite: bool = False,
              parallel: int = 1, paired: bool = False, records: str = "") -> list[dict]:
  """Every arm x seed, with progress and ETA; writes results.json/.md and the plot.

  `parallel` runs that many arm x seed jobs at once (each a chain of processes), in job order;
  at equal wall clock (the recipe study) every arm then trains beside another one, as the
  recipes of benchmarks/quality/budget_recipe.py do. `paired`: every arm after the first runs
  beside a run of the first (runs/<first>/seed<k>.beside.<arm>), pair after pair. `records`:
  a JSON-lines file that gets each finished run (run_records.append). The corpus is checked
  before anything is written (a bad --corpus leaves no study.json).
  """
  corpus_lib.resolve_inputs(corpus)  # raises CorpusError naming what matches nothing
  if files.exists(work_dir) and not files.isdir(work_dir):
    raise RunnerError(f"--work_dir={work_dir} exists and is not a directory")
  files.makedirs(work_dir)
  check_settings(work_dir, {"study": name, "corpus": corpus, **dataclasses.asdict(settings),
                            "arms": [dataclasses.asdict(a) for a in study.arms],
                            "corpus_mb": study.corpus_mb}, overwrite=overwrite)
  shards = prepare(corpus, work_dir, study, settings.vocab_size)
  per_sequence = {p: tokens_per_sequence(d) for p, d in shards.items() if p != "eval"}
  study = studies.equalize_tokens(study, per_sequence)
  on_result = (lambda r: run_records.append(records, r, study=name, corpus=corpus)
               ) if records else None
  if paired:
    results = _run_pairs(study.arms, seeds, work_dir, shards, settings, per_sequence, on_result)
  else:
    jobs = [(arm, seed) for seed in seeds for arm in study.arms]  # seed-major: all arms early
    run_dirs = [files.join(work_dir, "runs", arm.slug, f"seed{seed}") for arm, seed in jobs]
    results = _run_jobs(jobs, run_dirs, shards, settings, per_sequence, parallel,
                        on_result=on_result)
  report.write(name, results, work_dir)
  return results


def _run_pairs(arms: Sequence[studies.Arm], seeds: Sequence[int], work_dir: str, shards: dict,
               settings: StudySettings, per_sequence: dict[str, float],
               on_result=None) -> list[dict]:
  """--paired: per seed, each arm after the first beside a run of the first, both started
  together; the next pair starts when both are done (evaluated too)."""
  if len(arms) < 2:
    raise RunnerError("--paired needs two arms at least (the first is the reference)")
  results, ref = [], arms[0]
  for seed in seeds:
    for arm in arms[1:]:
      jobs = [(ref, seed, arm.name), (arm, seed, ref.name)]
      run_dirs = [files.join(work_dir, "runs", ref.slug, f"seed{seed}.beside.{arm.slug}"),
                  files.join(work_dir, "runs", arm.slug, f"seed{seed}")]
      results += _run_jobs(jobs, run_dirs, shards, settings, per_sequence, 2,
                           on_result=on_result)
  return results


def _run_jobs(jobs: list, run_dirs: list[str], shards: dict, settings: StudySettings,
              per_sequence: dict[str, float], parallel: int, on_result=None) -> list[dict]:
  """Runs the (arm, seed[, beside]) jobs not done before, `parallel` at once, printing each
  result with an ETA (and handing it to `on_result`); returns every job's result, in job
  order."""
  done = lambda i: files.exists(files.join(run_dirs[i], "result.json"))
  cost = lambda arm: arm.batch_size * arm.train_steps  # sequences read: what the time scales with
  fresh = [i for i in range(len(jobs)) if not done(i)]
  for i, (arm, seed, *_) in enumerate(jobs):
    if not done(i):
      continue
    print(f"[{i + 1}/{len(jobs)}] {arm.name}, seed {seed} (done before)", flush=True)
  results = [None] * len(jobs)
  spent, cost_done, start_all = [], 0, time.time()

  def one(i: int) -> dict:
    arm, seed, *beside = jobs[i]
    if i in fresh:
      print(f"[{i + 1}/{len(jobs)}] {arm.name}, seed {seed}"
            + (f" (beside {beside[0]})" if beside else ""), flush=True)
    start = time.time()
    result = run_arm(arm, seed, shards, run_dirs[i], settings, per_sequence[arm.packing],
                     *beside)
    return result, time.time() - start

  with futures.ThreadPoolExecutor(max(1, parallel)) as pool:
    pending = {pool.submit(one, i): i for i in range(len(jobs))}
    for future in futures.as_completed(pending):
      i = pending[future]
      try:
        results[i], seconds = future.result()  # a failed run raises RunnerError here
      except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # the running ones finish, no new ones
        raise
      if i not in fresh:
        continue
      if on_result:
        on_result(results[i])
      spent.append(seconds)
      cost_done += cost(jobs[i][0])
      left = [jobs[j][0] for j in fresh if not done(j)]
      r = results[i]
      # The runs so far, per sequence read, times what the runs left read (the input_format
      # study's sentence-pair arm reads ~5x the others' sequences), over the runs at once.
      eta = sum(spent) / cost_done * sum(cost(a) for a in left) / max(1, parallel)
      print(f"  {r['arm']}, seed {r['seed']}: held-out perplexity {r['perplexity']:.1f}, "
            + (f"{r['problem_metric']} {r['problem_value']:.3f}, "
               if r["problem_value"] is not None else "") + f"{seconds / 60:.1f} min; "
            f"{len(left)} runs left, ETA {eta / 60:.0f} min "
            f"({(time.time() - start_all) / 60:.0f} min so far)",
            flush=True)
  return results
