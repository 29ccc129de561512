r"""Benchmark: ModernBERT forward time and peak memory against input length (issue 61).

    python -m benchmarks.serving.long_inputs [--sides=ours_blocked,ours_full,hf_sdpa,hf_eager] \
        [--lengths=512,1024,2048,4096,8192] [--repeats=2] [--threads=2]

Every (side, length) point runs in a fresh process (benchmarks/serving/long_input_side.py,
niced): a base-size encoder (random weights), batch 1, float32, one warm-up forward at 128
tokens, then --repeats forwards at the length. A point's figures are its best forward in CPU
seconds (all threads: on a shared machine wall time measures the neighbours; wall seconds are
recorded too) and the process's peak RSS. Each finished point is appended to
benchmarks/records/long_inputs.jsonl; at the end a table, and the issue's three targets at
8,192 tokens: ours_blocked >= 1.8x hf_sdpa's speed; its peak-memory growth from 1,024 to 8,192
<= 0.5x hf_sdpa's; its seconds per token at 8,192 <= 2.5x those at 1,024.
"""

import datetime
import json
import os
import subprocess
import sys

from absl import app, flags

from benchmarks.common import commands
from benchmarks.common.starting_checkpoint import git_head, host
from benchmarks.serving.long_input_side import SIDES

RECORDS = os.path.join(commands.REPO, "benchmarks", "records", "long_inputs.jsonl")

FLAGS = flags.FLAGS
flags.DEFINE_list("sides", list(SIDES), f"Sides to run, of {', '.join(SIDES)}.")
flags.DEFINE_list("lengths", ["512", "1024", "2048", "4096", "8192"], "Input lengths (tokens).")
flags.DEFINE_integer("repeats", 2, "Timed forwards per point (the best counts).")
flags.DEFINE_integer("threads", 2, "Intra-op threads of every side.")
flags.DEFINE_string("record", RECORDS, "JSON-lines file the points are appended to ('' none).")


def _point(side: str, length: int) -> dict:
  argv = [sys.executable, "-m", "benchmarks.serving.long_input_side", side, str(length),
          str(FLAGS.repeats), str(FLAGS.threads)]
  done = subprocess.run(argv, cwd=commands.REPO, capture_output=True, text=True, check=False)
  lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
  if done.returncode or not lines:
    return {"side": side, "length": length, "error": done.stderr.strip().splitlines()[-1:]}
  return json.loads(lines[-1])


def _targets(points: dict) -> list[str]:
  """The issue's three targets at 8,192 tokens, where their points ran."""
  def get(side, length):
    return points.get((side, length), {})
  ours_8k, ours_1k = get("ours_blocked", 8192), get("ours_blocked", 1024)
  hf_8k, hf_1k = get("hf_sdpa", 8192), get("hf_sdpa", 1024)
  out = []
  if "seconds" in ours_8k and "seconds" in hf_8k:
    speed = min(hf_8k["cpu_seconds"]) / min(ours_8k["cpu_seconds"])
    out.append(f"speed vs hf_sdpa at 8,192: {speed:.2f}x (target >= 1.8x): "
               f"{'holds' if speed >= 1.8 else 'does not hold'}")
  if all("seconds" in p for p in (ours_8k, ours_1k, hf_8k, hf_1k)):
    ours = ours_8k["peak_rss_mb"] - ours_1k["peak_rss_mb"]
    hf = hf_8k["peak_rss_mb"] - hf_1k["peak_rss_mb"]
    out.append(f"peak RSS growth 1,024 -> 8,192: ours {ours} MB, hf_sdpa {hf} MB, "
               f"ratio {ours / hf:.2f} (target <= 0.5): "
               f"{'holds' if ours <= 0.5 * hf else 'does not hold'}")
  if "seconds" in ours_8k and "seconds" in ours_1k:
    ratio = (min(ours_8k["cpu_seconds"]) / 8192) / (min(ours_1k["cpu_seconds"]) / 1024)
    out.append(f"ours seconds per token 8,192 / 1,024: {ratio:.2f}x (target <= 2.5x): "
               f"{'holds' if ratio <= 2.5 else 'does not hold'}")
  return out


def main(argv):
  del argv
  unknown = set(FLAGS.sides) - set(SIDES)
  if unknown:
    sys.exit(f"error: --sides: {sorted(unknown)} not among {SIDES}")
  lengths = [int(x) for x in FLAGS.lengths]
  points = {}
  for side in FLAGS.sides:
    for length in lengths:
      point = _point(side, length)
      point.update(cpu=host(), git=git_head(), repeats=FLAGS.repeats,
                   finished=datetime.datetime.now(datetime.UTC).isoformat(
                       timespec="seconds"))
      points[(side, length)] = point
      print(json.dumps(point), flush=True)
      if FLAGS.record:
        with open(FLAGS.record, "a", encoding="utf-8") as f:
          f.write(json.dumps(point, sort_keys=True) + "\n")
  print(f"\n{host()}, batch 1, float32, base size, {FLAGS.threads} threads")
  print("| side | " + " | ".join(f"{n:,}" for n in lengths) + " |")
  print("|---|" + "---|" * len(lengths))
  for side in FLAGS.sides:
    cells = []
    for length in lengths:
      p = points[(side, length)]
      cells.append(f"{min(p['cpu_seconds']):.1f} cpu s ({min(p['seconds']):.1f} wall), "
                   f"{p['peak_rss_mb']:,} MB" if "seconds" in p else "failed")
    print(f"| {side} | " + " | ".join(cells) + " |")
  for line in _targets(points):
    print(line)


if __name__ == "__main__":
  app.run(main)
