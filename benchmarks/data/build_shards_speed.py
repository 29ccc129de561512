r"""Benchmark: data_prep.build_shards end to end: the local engine with the TF-native tokenizer,
the same with Hugging Face tokenizers, and the Beam engine at 1 and 2 workers.

    python -m benchmarks.data.build_shards_speed [--corpus=../shared/corpora/python-docs.jsonl.gz] \
        [--vocab_dir=tests/testdata/hf_roberta_tiny] [--scales=1,4] [--runs=tf,hf,beam1,beam2] \
        [--before=<git ref> --before_runs=tf,beam1]

Each prep runs as its own ``python -m data_prep.build_shards`` process, with the same flags but
these (``RUNS``): ``tf`` (local engine, roberta_tf.tokenization.tokenizer, the project's), ``hf``
(local engine, ``tokenizers``, the peer), ``beam1``/``beam2`` (``--engine=beam``, TF tokenizer,
DirectRunner with 1 worker in process / 2 worker processes). All must write byte-identical
outputs, which is asserted. Reported per run: the build time (the binary's own figure, from
reading the first document to dataset_info.json; interpreter start, imports and the
tokenizer's setup -- loading, graph tracing -- excluded and the setup shown beside it), MB/s of
corpus text (uncompressed UTF-8) and of input file bytes, the process's wall time, the build's
CPU time / build time (how many cores were busy; the launching process only), the process's peak RSS
(``os.wait4``'s rusage: the largest single process of its tree) and the peak of the RSS summed
over the process and its children (sampled every 0.1 s with psutil: what 2 Beam workers cost
together). For Beam the build time includes starting the workers and their tokenizer setup.
At scale 4 the input is a directory holding the corpus file 4 times: peak RSS must not grow with
the corpus. ``tf_sort1`` is ``tf`` with a 1 MB sort buffer: shards larger than that take the
external sort (data_prep/external_sort.py), with the same bytes.

``--before=REF`` adds, in the same run, ``--before_runs`` of the code at git ref REF (checked out
into a temporary worktree): e.g. the commit before a change, for a before/after row. Their
outputs are compared with each other, not with today's (a change may change the files).
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psutil
from absl import app, flags

from benchmarks.common import commands

REPO = commands.REPO

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", commands.DOCS_CORPUS, "Corpus file.")
flags.DEFINE_string("vocab_dir", commands.FIXTURE_VOCAB,
                    "vocab.json + merges.txt (the fixture's 8K vocab was trained on the corpus).")
flags.DEFINE_list("scales", ["1", "4"], "Corpus repetitions to run (RSS must not grow with it).")
RUNS = {
    "tf": ["--encoder=tf"],
    "hf": ["--encoder=hf"],
    "beam1": ["--encoder=tf", "--engine=beam", "--beam_options=--direct_num_workers=1"],
    "beam2": ["--encoder=tf", "--engine=beam", "--beam_options=--direct_num_workers=2 "
              "--direct_running_mode=multi_processing"],
    "tf_sort1": ["--encoder=tf", "--sort_buffer_mb=1"],
}
flags.DEFINE_list("runs", list(RUNS), f"Runs to compare ({', '.join(RUNS)}); the first is the "
                  "subject, the second its peer.")
flags.DEFINE_integer("max_seq_len", 512, "Block length.")
flags.DEFINE_string("before", "", "A git ref whose code also runs --before_runs (before/after).")
flags.DEFINE_list("before_runs", ["tf", "beam1"], "Runs of the --before code.")


def _text_bytes(path: str) -> int:
  """Uncompressed UTF-8 bytes of the documents' text (what MB/s of corpus means here)."""
  opener = gzip.open if path.endswith(".gz") else open
  total = 0
  with opener(path, "rb") as f:
    for line in f:
      if path.endswith((".jsonl", ".jsonl.gz")) and line.strip():
        total += len(json.loads(line)["text"].encode("utf-8"))
      elif not path.endswith((".jsonl", ".jsonl.gz")):
        total += len(line)
  return total


def _tree_rss_peak(pid: int, peak: list, done: threading.Event) -> None:
  """Samples the RSS of ``pid`` and its descendants, summed; keeps the maximum in peak[0]."""
  try:
    root = psutil.Process(pid)
  except psutil.NoSuchProcess:
    return
  while not done.wait(0.1):
    total = 0
    try:
      for p in [root, *root.children(recursive=True)]:
        try:
          total += p.memory_info().rss
        except psutil.NoSuchProcess:
          pass
    except psutil.NoSuchProcess:
      return
    peak[0] = max(peak[0], total)


def _measured_build(input_spec: str, out: str, run: str, code: str = REPO) -> dict:
  """Runs ``run`` (a RUNS key) of the build_shards in the checkout ``code``."""
  cmd = [sys.executable, "-m", "data_prep.build_shards", f"--input={input_spec}",
         f"--vocab_dir={FLAGS.vocab_dir}", f"--output_dir={out}", *RUNS[run],
         f"--max_seq_len={FLAGS.max_seq_len}", "--noprogress"]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": code}
  with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=code, env=env, stdout=out_f, stderr=err_f, text=True)
    peak, done = [0], threading.Event()
    sampler = threading.Thread(target=_tree_rss_peak, args=(proc.pid, peak, done))
    sampler.start()
    # wait4 gives this child's own rusage (RUSAGE_CHILDREN would be a max over all runs so far).
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    done.set()
    sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    out_f.seek(0)
    err_f.seek(0)
    stdout, stderr = out_f.read(), err_f.read()
  if proc.returncode:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{stderr[-3000:]}")
  m = re.search(r"in ([\d.]+) s .*, ([\d.]+) cores busy; \+ ([\d.]+) s tokenizer setup",
                stdout)
  return {"stdout": stdout, "wall_s": wall, "build_s": float(m.group(1)),
          "cores": float(m.group(2)), "setup_s": float(m.group(3)), "usage": usage,
          "tree_rss_mb": peak[0] / 1e6}


def _files(out: str) -> dict[str, bytes]:
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


def _before_checkout(tmp: str) -> str | None:
  """A worktree of --before under ``tmp`` (None without --before)."""
  if not FLAGS.before:
    return None
  path = os.path.join(tmp, "before")
  subprocess.run(["git", "-C", REPO, "worktree", "add", "--detach", path, FLAGS.before],
                 check=True, capture_output=True)
  return path


def main(argv):
  del argv
  text_mb = _text_bytes(FLAGS.corpus) / 1e6
  file_mb = os.path.getsize(FLAGS.corpus) / 1e6
  print(f"corpus {FLAGS.corpus}: {text_mb:.2f} MB text, {file_mb:.2f} MB file; "
        f"vocab {FLAGS.vocab_dir}; {os.cpu_count()} CPUs")
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    before = _before_checkout(tmp)
    runs = [(run, REPO) for run in FLAGS.runs]
    if before:
      runs += [(run, before) for run in FLAGS.before_runs]
    try:
      for scale in map(int, FLAGS.scales):
        _run_scale(scale, runs, tmp, text_mb, file_mb, results)
    finally:
      if before:
        subprocess.run(["git", "-C", REPO, "worktree", "remove", "--force", before], check=False)
  names = [_name(run, code) for run, code in runs]
  for name in names[1:]:
    for scale in map(int, FLAGS.scales):
      ratio = results[(scale, name)]["build_s"] / results[(scale, names[0])]["build_s"]
      print(f"x{scale}: {names[0]} / {name} speed = {ratio:.2f}x")
  scales = sorted(map(int, FLAGS.scales))
  if len(scales) > 1:
    for name in names:
      lo, hi = results[(scales[0], name)]["rss_mb"], results[(scales[-1], name)]["rss_mb"]
      lo_t, hi_t = (results[(sc, name)]["tree_rss_mb"] for sc in (scales[0], scales[-1]))
      print(f"{name}: peak RSS x{scales[0]} {lo:.0f} MB, x{scales[-1]} {hi:.0f} MB "
            f"(ratio {hi / lo:.2f}); all processes {lo_t:.0f} / {hi_t:.0f} MB")


def _name(run: str, code: str) -> str:
  return run if code == REPO else f"{run}@{FLAGS.before}"


def _run_scale(scale: int, runs: list, tmp: str, text_mb: float, file_mb: float,
               results: dict) -> None:
  """Every run at one corpus scale; fills ``results[(scale, name)]``; checks identical files."""
  if scale == 1:
    spec = FLAGS.corpus
  else:  # a directory holding the corpus `scale` times
    spec = os.path.join(tmp, f"x{scale}")
    os.makedirs(spec)
    for k in range(scale):
      shutil.copy(FLAGS.corpus, os.path.join(spec, f"part{k}.jsonl.gz"))
  outputs = {}
  for run, code in runs:
    name = _name(run, code)
    out = os.path.join(tmp, f"out-{scale}-{name}")
    r = _measured_build(spec, out, run, code)
    rss_mb = r["usage"].ru_maxrss / 1024  # Linux reports KiB
    results[(scale, name)] = r | {"rss_mb": rss_mb}
    print(f"x{scale} {name:10s}: build {r['build_s']:6.2f} s "
          f"(+ setup {r['setup_s']:4.1f} s)  "
          f"{scale * text_mb / r['build_s']:6.2f} MB/s text  "
          f"{scale * file_mb / r['build_s']:5.2f} MB/s file  "
          f"process wall {r['wall_s']:6.2f} s  cores busy {r['cores']:.2f} "
          f"(CPU {r['build_s'] * r['cores']:5.1f} s)  "
          f"peak RSS {rss_mb:6.0f} MB (all processes {r['tree_rss_mb']:6.0f} MB)",
          flush=True)
    outputs.setdefault(code, {})[name] = _files(out)
    shutil.rmtree(out)
  for same_code in outputs.values():
    names = list(same_code)
    for name in names[1:]:
      assert same_code[name] == same_code[names[0]], f"x{scale}: {name} and {names[0]} differ"
    if len(names) > 1:
      print(f"x{scale}: outputs of {', '.join(names)} are byte-identical "
            f"({len(same_code[names[0]])} files)")


if __name__ == "__main__":
  app.run(main)
