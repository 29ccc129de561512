"""The table and figure of benchmarks/quality/domain_adaptation.py's records (one record per
arm)."""

from __future__ import annotations

import os

from benchmarks.quality import parity_report

ARMS = ("general", "continued", "grown", "grown_normal")


def table(records: list[dict]) -> str:
  by_arm = {r["arm"]: r for r in records}
  lines = ["| arm | vocabulary | tokens / word (held out) | masked-LM loss / byte (nats) | "
           "PLL / byte (nats) | loss / masked token | bytes / masked token | word order acc | "
           "genre acc |",
           "|---|---|---|---|---|---|---|---|---|"]
  for arm in ARMS:
    r = by_arm.get(arm)
    if r is None:
      continue
    pll = f"{r['pll_per_byte']:.4f}" if "pll_per_byte" in r else "-"
    lines.append(
        f"| {arm} | {r['vocab_size']:,} | {r['tokens_per_word']:.3f} | "
        f"{r['loss_per_byte']:.4f} | {pll} | {r['loss_per_token']:.3f} | "
        f"{r['bytes_per_masked_token']:.2f} | "
        f"{parity_report.spread(r['word_order_accuracy'], 3)} | "
        f"{parity_report.spread(r.get('genre_accuracy') or [], 3)} |")
  r = records[0]
  return "\n".join(lines) + (
      f"\n\nGeneral model: {r['general_steps']} steps on `{r['general']}`; each continued arm "
      f"{r['domain_steps']} steps on `{r['domain']}` (training chapters); grown vocabulary: "
      f"+{r['add_tokens']} tokens; the tasks' dev accuracy: median (min-max) over seeds "
      f"{', '.join(str(s) for s in r['seeds'])} (chance: word order 0.5, genre 1/6).\n")


def plot(records: list[dict], path: str) -> None:
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  rows = [r for arm in ARMS for r in records if r["arm"] == arm]
  names = [r["arm"] for r in rows]
  fig, axes = plt.subplots(1, 4, figsize=(15, 3.6))
  panels = (("tokens per word (held out)", [r["tokens_per_word"] for r in rows], None, None),
            ("loss per byte (nats): masked-LM | PLL", [r["loss_per_byte"] for r in rows],
             [r.get("pll_per_byte") for r in rows], None),
            ("word order: dev accuracy", None, [r["word_order_accuracy"] for r in rows], 0.5),
            ("genre: dev accuracy", None, [r.get("genre_accuracy") or [] for r in rows], 1 / 6))
  colors = ["#888888", "#4477aa", "#228833", "#ccbb44"][:len(rows)]
  for ax, (title, values, spreads, chance) in zip(axes, panels, strict=True):
    if values is not None and spreads is not None:  # two bars per arm
      ax.bar([i - 0.2 for i in range(len(values))], values, width=0.4, color=colors)
      pll = [v or 0 for v in spreads]
      ax.bar([i + 0.2 for i in range(len(pll))], pll, width=0.4, color=colors, alpha=0.5,
             hatch="//")
      ax.set_ylim(0, max(values + pll) * 1.1)
    elif spreads is not None:
      for i, accs in enumerate(spreads):
        if accs:
          ax.scatter([i] * len(accs), accs, color=colors[i], zorder=3)
          ax.hlines(sorted(accs)[len(accs) // 2], i - 0.3, i + 0.3, color=colors[i])
      ax.axhline(chance, color="black", lw=0.8, ls=":")
    else:
      ax.bar(range(len(values)), values, color=colors)
      low = min(values)
      ax.set_ylim(low * 0.9 if title.startswith("masked") else 0, max(values) * 1.05)
    ax.set_xticks(range(len(names)), names, rotation=20)
    ax.set_title(title, fontsize=10)
  fig.tight_layout()
  os.makedirs(os.path.dirname(path), exist_ok=True)
  fig.savefig(path, dpi=110)


