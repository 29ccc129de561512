r"""Benchmark: data_prep.build_shards end to end, TF-native tokenizer vs Hugging Face tokenizers.

    python -m benchmarks.build_shards_speed [--corpus=../shared/corpora/python-docs.jsonl.gz] \
        [--vocab_dir=tests/testdata/hf_roberta_tiny] [--scales=1,4]

Each prep runs as its own ``python -m data_prep.build_shards`` process, with the same flags but
``--encoder``: ``tf`` (roberta_tf.tokenization.tokenizer, the project's) or ``hf``
(``tokenizers``, the peer).
Both pack and write with the same code, so their outputs must be byte-identical, which is
asserted. Reported per run: the build time (the binary's own figure, from reading the first
document to dataset_info.json; interpreter start, imports and the tokenizer's setup -- loading,
graph tracing -- excluded and the setup shown beside it), MB/s of corpus text
(uncompressed UTF-8) and of input file bytes, the process's wall time, the build's CPU time /
build time (how many cores were busy) and the process's peak RSS (``os.wait4``'s rusage). At
scale 4 the input is a directory holding the corpus file 4 times: peak RSS must not grow with the
corpus.
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
import time

from absl import app, flags

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FLAGS = flags.FLAGS
flags.DEFINE_string("corpus", os.path.join(os.path.dirname(REPO), "shared", "corpora",
                                           "python-docs.jsonl.gz"), "Corpus file.")
flags.DEFINE_string("vocab_dir", os.path.join(REPO, "tests/testdata/hf_roberta_tiny"),
                    "vocab.json + merges.txt (the fixture's 8K vocab was trained on the corpus).")
flags.DEFINE_list("scales", ["1", "4"], "Corpus repetitions to run (RSS must not grow with it).")
flags.DEFINE_list("encoders", ["tf", "hf"], "Encoders to compare; the first is the subject.")
flags.DEFINE_integer("max_seq_len", 512, "Block length.")


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


def _run(input_spec: str, out: str, encoder: str) -> dict:
  cmd = [sys.executable, "-m", "data_prep.build_shards", f"--input={input_spec}",
         f"--vocab_dir={FLAGS.vocab_dir}", f"--output_dir={out}", f"--encoder={encoder}",
         f"--max_seq_len={FLAGS.max_seq_len}", "--noprogress"]
  env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO}
  with tempfile.TemporaryFile("w+") as out_f, tempfile.TemporaryFile("w+") as err_f:
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out_f, stderr=err_f, text=True)
    # wait4 gives this child's own rusage (RUSAGE_CHILDREN would be a max over all runs so far).
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    out_f.seek(0)
    err_f.seek(0)
    stdout, stderr = out_f.read(), err_f.read()
  if proc.returncode:
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{stderr[-3000:]}")
  m = re.search(r"in ([\d.]+) s .*, ([\d.]+) cores busy; \+ ([\d.]+) s tokenizer setup",
                stdout)
  return {"stdout": stdout, "wall_s": wall, "build_s": float(m.group(1)),
          "cores": float(m.group(2)), "setup_s": float(m.group(3)), "usage": usage}


def _files(out: str) -> dict[str, bytes]:
  return {n: open(os.path.join(out, n), "rb").read() for n in sorted(os.listdir(out))}


def main(argv):
  del argv
  text_mb = _text_bytes(FLAGS.corpus) / 1e6
  file_mb = os.path.getsize(FLAGS.corpus) / 1e6
  print(f"corpus {FLAGS.corpus}: {text_mb:.2f} MB text, {file_mb:.2f} MB file; "
        f"vocab {FLAGS.vocab_dir}; {os.cpu_count()} CPUs")
  results = {}
  with tempfile.TemporaryDirectory() as tmp:
    for scale in map(int, FLAGS.scales):
      if scale == 1:
        spec = FLAGS.corpus
      else:  # a directory holding the corpus `scale` times
        spec = os.path.join(tmp, f"x{scale}")
        os.makedirs(spec)
        for k in range(scale):
          shutil.copy(FLAGS.corpus, os.path.join(spec, f"part{k}.jsonl.gz"))
      outputs = {}
      for encoder in FLAGS.encoders:
        out = os.path.join(tmp, f"out-{scale}-{encoder}")
        r = _run(spec, out, encoder)
        rss_mb = r["usage"].ru_maxrss / 1024  # Linux reports KiB
        results[(scale, encoder)] = r | {"rss_mb": rss_mb}
        print(f"x{scale} {encoder:2s}: build {r['build_s']:6.2f} s "
              f"(+ setup {r['setup_s']:4.1f} s)  "
              f"{scale * text_mb / r['build_s']:6.2f} MB/s text  "
              f"{scale * file_mb / r['build_s']:5.2f} MB/s file  "
              f"process wall {r['wall_s']:6.2f} s  cores busy {r['cores']:.2f}  "
              f"peak RSS {rss_mb:6.0f} MB", flush=True)
        outputs[encoder] = _files(out)
        shutil.rmtree(out)
      first = FLAGS.encoders[0]
      for encoder in FLAGS.encoders[1:]:
        assert outputs[encoder] == outputs[first], f"x{scale}: {encoder} and {first} differ"
      if len(FLAGS.encoders) > 1:
        print(f"x{scale}: outputs of {', '.join(FLAGS.encoders)} are byte-identical "
              f"({len(outputs[first])} files)")
  if len(FLAGS.encoders) > 1:
    subject, peer = FLAGS.encoders[:2]
    for scale in map(int, FLAGS.scales):
      ratio = results[(scale, peer)]["build_s"] / results[(scale, subject)]["build_s"]
      print(f"x{scale}: {subject} / {peer} speed = {ratio:.2f}x")
  scales = sorted(map(int, FLAGS.scales))
  if len(scales) > 1:
    for encoder in FLAGS.encoders:
      lo, hi = results[(scales[0], encoder)]["rss_mb"], results[(scales[-1], encoder)]["rss_mb"]
      print(f"{encoder}: peak RSS x{scales[0]} {lo:.0f} MB, x{scales[-1]} {hi:.0f} MB "
            f"(ratio {hi / lo:.2f})")


if __name__ == "__main__":
  app.run(main)
