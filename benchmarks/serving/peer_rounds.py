"""The timing of benchmarks/serving/vs_peers.py: its side workers (benchmarks/serving/peer_sides.py,
one process each, spoken to by JSON lines over pipes), the alternating rounds and their
summary. No TF or torch here.

A round gives every side, one after the other, the same work: one call of `batch` short texts,
one of `batch` long texts, then `latency_calls` calls of one short text and as many of one
long text (texts of the round's own slice of the pools). The side order reverses every round
so machine-load swings hit every side; round 0 is a warm-up (tracing, first allocations) whose
times are dropped but whose predictions count for the top-1 agreement.
"""

from __future__ import annotations

import os
import statistics
import sys

from benchmarks.common import commands, side_workers

KINDS = ("short", "long")


WorkerError = side_workers.WorkerError


class Worker(side_workers.Worker):
  """One side's process (`python -m benchmarks.serving.peer_sides`), through side_workers' pipe
  client; `calls` sends one round's calls."""

  def __init__(self, spec: dict, work: str, timeout: float):
    self.side = spec["side"]
    super().__init__(self.side, [sys.executable, "-m", "benchmarks.serving.peer_sides"], spec,
                     os.path.join(work, f"{self.side}.stderr"), timeout, commands.REPO,
                     env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})

  def calls(self, calls: list[list[str]]) -> dict:
    self._send({"calls": calls})
    return self.answer()


def round_indices(sizes: dict[str, int], r: int, batch: int) -> dict[str, list[int]]:
  """{kind: the pool indices of round r's batch}: the pools' next `batch` texts, wrapping
  around when the rounds outnumber the pool."""
  return {k: [(r * batch + i) % sizes[k] for i in range(batch)] for k in KINDS}


def round_calls(texts: dict[str, list[str]], r: int, batch: int,
                latency_calls: int) -> list[list[str]]:
  """Round r's calls: [short batch, long batch, short x1 ..., long x1 ...] (the batch-1 texts
  are the first `latency_calls` of the round's batches)."""
  index = round_indices({k: len(texts[k]) for k in KINDS}, r, batch)
  batches = [[texts[k][i] for i in index[k]] for k in KINDS]
  return batches + [[t] for b in batches for t in b[:latency_calls]]


def run_rounds(workers: dict[str, Worker], texts: dict[str, list[str]], rounds: int,
               batch: int, latency_calls: int) -> dict:
  """{side: {"rate": {kind: [texts/s per round]}, "latency": {kind: [[s per call] per round]},
  "top1": {kind: {pool index: top-1 id}}}} over rounds 1..rounds (0: the warm-up)."""
  raw = {s: {"rate": {k: [] for k in KINDS}, "latency": {k: [] for k in KINDS},
             "top1": {k: {} for k in KINDS}} for s in workers}
  sides = list(workers)
  for r in range(rounds + 1):
    calls = round_calls(texts, r, batch, latency_calls)
    index = round_indices({k: len(texts[k]) for k in KINDS}, r, batch)
    for side in (sides if r % 2 == 0 else sides[::-1]):
      got = workers[side].calls(calls)
      seconds, out = got["seconds"], raw[side]
      for i, kind in enumerate(KINDS):
        for text_index, top1 in zip(index[kind], got["top1"][i], strict=True):
          out["top1"][kind].setdefault(text_index, top1)
        if r:
          out["rate"][kind].append(len(calls[i]) / seconds[i])
          out["latency"][kind].append(seconds[2 + i * latency_calls:2 + (i + 1) * latency_calls])
    print(f"  round {r}{' (warm-up)' if not r else ''} done", flush=True)
  return raw


def _p(values: list[float], q: float) -> float:
  """The q-quantile (nearest rank) of values."""
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize(raw: dict, baseline: str) -> dict:
  """{side: {"texts_per_s": {kind}, "p50_ms", "p90_ms": {kind}, "vs_baseline": {...}}}.

  texts/s: the median round; p50/p90: over every timed batch-1 call. vs_baseline (when the
  baseline side ran): the median over rounds of the paired ratios (side / baseline texts/s;
  baseline / side round-median latency), so > 1 is faster than the baseline.
  """
  rows = {}
  base = raw.get(baseline)
  for side, out in raw.items():
    row = {"texts_per_s": {}, "p50_ms": {}, "p90_ms": {}, "vs_baseline": {}}
    for kind in KINDS:
      calls = [s for per_round in out["latency"][kind] for s in per_round]
      row["texts_per_s"][kind] = statistics.median(out["rate"][kind])
      row["p50_ms"][kind] = 1e3 * statistics.median(calls)
      row["p90_ms"][kind] = 1e3 * _p(calls, 0.9)
      if base:
        row["vs_baseline"][f"texts_per_s_{kind}"] = statistics.median(
            a / b for a, b in zip(out["rate"][kind], base["rate"][kind], strict=True))
        row["vs_baseline"][f"p50_{kind}"] = statistics.median(
            statistics.median(b) / statistics.median(a)
            for a, b in zip(out["latency"][kind], base["latency"][kind], strict=True))
    rows[side] = row
  return rows


def agreement(raw: dict, pairs: list[tuple[str, str]]) -> dict:
  """{"a vs b": {"same": n, "total": n, kind: fraction, "all": fraction}}: how often side a's
  top-1 equals side b's on the same masked words (texts with no <mask> left out)."""
  out = {}
  for a, b in pairs:
    if a not in raw or b not in raw:
      continue
    result, same_all, total_all = {}, 0, 0
    for kind in KINDS:
      ids_a, ids_b = raw[a]["top1"][kind], raw[b]["top1"][kind]
      both = [(ids_a[i], ids_b[i]) for i in ids_a if ids_a[i] >= 0 and ids_b.get(i, -1) >= 0]
      same = sum(x == y for x, y in both)
      result[kind] = same / max(1, len(both))
      same_all, total_all = same_all + same, total_all + len(both)
    out[f"{a} vs {b}"] = {**result, "all": same_all / max(1, total_all), "same": same_all,
                          "total": total_all}
  return out
