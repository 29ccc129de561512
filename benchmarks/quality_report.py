"""Rates, medians and the plot of benchmarks/quality_vs_hf.py from its per-run JSON records.

A run *leaves the plateau* when its held-out perplexity at the last step is at most
ESCAPE_FRACTION x the unigram baseline's on the same targets. Per corpus and peak LR the table
gives, over seeds, how many runs of each side left it, each side's median (min-max) perplexity,
and the median (min-max) of the per-seed ratio ours / HF (seeds where both sides have run).
"""

from __future__ import annotations

import os
import statistics

ESCAPE_FRACTION = 0.9


def escaped(record: dict, unigram_ppl: float) -> bool:
  return record["curve"][-1][1]["ppl"] <= ESCAPE_FRACTION * unigram_ppl


def final_ppl(record: dict) -> float:
  return record["curve"][-1][1]["ppl"]


def _spread(values) -> str:
  if not values:
    return "-"
  med = statistics.median(values)
  if len(values) == 1:
    return f"{med:,.0f}" if med >= 10 else f"{med:.3f}"
  fmt = (lambda v: f"{v:,.0f}") if med >= 10 else (lambda v: f"{v:.3f}")
  return f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))})"


def summarize(records: dict, unigram: dict) -> list[dict]:
  """records: {(corpus, lr, seed, side): record}; unigram: {corpus: {"ppl", "acc"}}.

  Returns one row a (corpus, lr) with seeds, escapes per side, ppls and ratios.
  """
  rows = []
  keys = sorted({(c, lr) for c, lr, _, _ in records}, key=lambda k: (k[0], float(k[1])))
  for corpus, lr in keys:
    base = unigram[corpus]["ppl"]
    sides = {side: {key[2]: r for key, r in records.items()
                    if (key[0], key[1], key[3]) == (corpus, lr, side)} for side in ("ours", "hf")}
    both = sorted(set(sides["ours"]) & set(sides["hf"]))
    rows.append({
        "corpus": corpus, "lr": lr, "unigram_ppl": base, "seeds": both,
        "ours_escaped": sum(escaped(sides["ours"][s], base) for s in both),
        "hf_escaped": sum(escaped(sides["hf"][s], base) for s in both),
        "ours_ppl": [final_ppl(sides["ours"][s]) for s in both],
        "hf_ppl": [final_ppl(sides["hf"][s]) for s in both],
        "ratio": [final_ppl(sides["ours"][s]) / final_ppl(sides["hf"][s]) for s in both],
        "step": sides["ours"][both[0]]["curve"][-1][0] if both else None})
  return rows


def table(rows: list[dict]) -> str:
  lines = ["| corpus | peak LR | seeds | left the plateau: ours | HF | held-out ppl ours, "
           "median (min-max) | HF | ours / HF ppl, median (min-max) | unigram ppl |",
           "|---|---|---|---|---|---|---|---|---|"]
  for r in rows:
    n = len(r["seeds"])
    lines.append(
        f"| {r['corpus']} | {r['lr']} | {n} | {r['ours_escaped']}/{n} | {r['hf_escaped']}/{n} "
        f"| {_spread(r['ours_ppl'])} | {_spread(r['hf_ppl'])} | {_spread(r['ratio'])} "
        f"| {r['unigram_ppl']:,.0f} |")
  return "\n".join(lines)


def per_seed_table(rows: list[dict]) -> str:
  lines = ["| corpus | peak LR | seed | ours ppl | HF ppl | ours / HF |",
           "|---|---|---|---|---|---|"]
  for r in rows:
    for seed, o, h in zip(r["seeds"], r["ours_ppl"], r["hf_ppl"], strict=True):
      lines.append(f"| {r['corpus']} | {r['lr']} | {seed} | {o:,.0f} | {h:,.0f} | {o / h:.3f} |")
  return "\n".join(lines)


def plot(records: dict, unigram: dict, path: str) -> str | None:
  """Held-out ppl / unigram ppl against steps: a panel a corpus, a color a peak LR, a thin line a
  seed (solid ours, dashed HF). Returns the path, or None without matplotlib."""
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  corpora = sorted({k[0] for k in records})
  lrs = sorted({k[1] for k in records}, key=float)
  fig, axes = plt.subplots(1, len(corpora), figsize=(5.5 * len(corpora), 4.2), squeeze=False)
  for ax, corpus in zip(axes[0], corpora, strict=True):
    base = unigram[corpus]["ppl"]
    for (c, lr, _, side), r in sorted(records.items()):
      if c != corpus:
        continue
      steps = [p[0] for p in r["curve"]]
      ax.plot(steps, [p[1]["ppl"] / base for p in r["curve"]],
              "-" if side == "ours" else "--", color=f"C{lrs.index(lr)}", linewidth=0.9,
              alpha=0.8)
    for i, lr in enumerate(lrs):
      ax.plot([], [], color=f"C{i}", label=f"peak LR {lr}")
    ax.plot([], [], "k-", label="roberta_tf")
    ax.plot([], [], "k--", label="HF PyTorch")
    ax.axhline(1.0, color="gray", linestyle=":", label="unigram baseline")
    ax.axhline(ESCAPE_FRACTION, color="gray", linestyle="-.", linewidth=0.7,
               label=f"{ESCAPE_FRACTION}x unigram")
    ax.set_ylim(0.3, 2.0)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("held-out ppl / unigram ppl")
    ax.set_title(f"{corpus} (unigram ppl {base:,.0f})")
    ax.legend(fontsize=7)
  fig.suptitle("Same batches per seed: roberta_tf vs HF RobertaForMaskedLM")
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=110)
  plt.close(fig)
  return path
