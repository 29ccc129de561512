"""long_inputs.py's report from its records: markdown tables (each figure with its
`<!-- record ... -->` marker, tests/test_doc_figures.py), issue 61's targets, and the plot.

A point's figures are the newest run that measured it (its "run"), best (min) over that run's
rounds: CPU seconds per forward / update and peak RSS. Records before the benchmark had runs
(no "run" field) are left out.
"""

from __future__ import annotations

import json

FILE = "long_inputs.jsonl"


def read(path: str) -> list[dict]:
  with open(path, encoding="utf-8") as f:
    return [json.loads(line) for line in f if line.strip()]


def points(records: list[dict]) -> dict:
  """{(kind, side, precision, length): {"run", "cpu_s", "mb", "wall_s", "load"}}."""
  newest = {}
  for r in records:
    if "run" not in r or "error" in r:
      continue
    key = (r["kind"], r["side"], r["precision"], r["length"])
    newest[key] = max(newest.get(key, ""), r["run"])
  out = {}
  for key, run in newest.items():
    mine = [r for r in records if r.get("run") == run and "error" not in r
            and (r["kind"], r["side"], r["precision"], r["length"]) == key]
    out[key] = {"run": run, "cpu_s": min(min(r["cpu_seconds"]) for r in mine),
                "wall_s": min(min(r["seconds"]) for r in mine),
                "mb": min(r["peak_rss_mb"] for r in mine),
                "load": " / ".join(r["load_average"].split()[0] for r in mine)}
  return out


def _marker(key, run, path) -> str:
  kind, side, precision, length = key
  return (f"<!-- record {FILE} run={run},kind={kind},side={side},precision={precision},"
          f"length={length} {path}|min -->")


def _cell(key, p: dict, per_token=False) -> str:
  decimals = 2 if p["cpu_s"] < 10 else 1
  figure = (f"{p['cpu_s']:.{decimals}f} s{_marker(key, p['run'], 'cpu_seconds.0')} "
            f"({p['wall_s']:.1f}), {p['mb']:,} MB{_marker(key, p['run'], 'peak_rss_mb')}")
  if per_token:
    tokens_per_s = key[3] / p["cpu_s"]
    figure += f"; {tokens_per_s:,.0f} tokens/CPU-s"
  return figure


def tables(records: list[dict], kinds=("forward", "train"), with_targets=True) -> str:
  """The table of each kind and precision (float32 first), markdown, then the targets."""
  found = points(records)
  out = []
  for kind in kinds:
    keys = sorted(k for k in found if k[0] == kind)
    for precision in sorted({k[2] for k in keys}, reverse=True):
      lengths = sorted({k[3] for k in keys if k[2] == precision})
      sides = sorted({k[1] for k in keys if k[2] == precision})
      out.append(f"\n{kind}, {precision}: CPU seconds (wall in brackets), peak RSS; "
                 f"load average (1 min) before each point in the records\n")
      out.append("| side | " + " | ".join(f"{n:,}" for n in lengths) + " |")
      out.append("|---|" + "---|" * len(lengths))
      for side in sides:
        cells = [_cell((kind, side, precision, n), found[(kind, side, precision, n)],
                       kind == "train") if (kind, side, precision, n) in found else ""
                 for n in lengths]
        out.append(f"| {side} | " + " | ".join(cells) + " |")
  return "\n".join(out + ([""] + targets(found) if with_targets else []))


def targets(found: dict) -> list[str]:
  """Issue 61's three targets at 8,192 tokens (float32 forward, ours vs hf_sdpa)."""
  def get(side, length):
    return found.get(("forward", side, "float32", length))
  ours_8k, ours_1k, hf_8k, hf_1k = (get("ours_blocked", 8192), get("ours_blocked", 1024),
                                    get("hf_sdpa", 8192), get("hf_sdpa", 1024))
  if not all((ours_8k, ours_1k, hf_8k, hf_1k)):
    return ["targets: a float32 point at 1,024 or 8,192 is missing"]
  speed = hf_8k["cpu_s"] / ours_8k["cpu_s"]
  ours, hf = ours_8k["mb"] - ours_1k["mb"], hf_8k["mb"] - hf_1k["mb"]
  per_token = (ours_8k["cpu_s"] / 8192) / (ours_1k["cpu_s"] / 1024)
  verdict = lambda ok: "holds" if ok else "DOES NOT HOLD"
  return [f"speed vs hf_sdpa at 8,192: {speed:.2f}x (target >= 1.8x): {verdict(speed >= 1.8)}",
          f"peak RSS growth 1,024 -> 8,192: ours {ours} MB, hf_sdpa {hf} MB, ratio "
          f"{ours / hf:.2f} (target <= 0.5): {verdict(ours <= 0.5 * hf)}",
          f"ours seconds per token 8,192 / 1,024: {per_token:.2f}x (target <= 2.5x): "
          f"{verdict(per_token <= 2.5)}"]


def plot(records: list[dict], path: str) -> None:
  """CPU seconds per token and peak RSS against length, one line per forward side x
  precision (log-2 length axis), as a PNG at `path`."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  found = points(records)
  fig, (per_token, memory) = plt.subplots(1, 2, figsize=(11, 4.2))
  sides = sorted({k[1] for k in found if k[0] == "forward"})
  colors = {side: f"C{i}" for i, side in enumerate(sides)}  # a colour per side, a dash per dtype
  for side, precision in sorted({(k[1], k[2]) for k in found if k[0] == "forward"}):
    keys = sorted(k for k in found if k[:3] == ("forward", side, precision))
    lengths = [k[3] for k in keys]
    style = "-" if precision == "float32" else "--"
    label = f"{side} {precision}"
    per_token.plot(lengths, [found[k]["cpu_s"] / k[3] * 1e3 for k in keys], style, marker="o",
                   color=colors[side], label=label)
    memory.plot(lengths, [found[k]["mb"] for k in keys], style, marker="o", color=colors[side],
                label=label)
  for ax, title in ((per_token, "CPU ms per token (forward, batch 1)"),
                    (memory, "peak RSS of the process (MB; float32 solid, bfloat16 dashed)")):
    ax.set_xscale("log", base=2)
    ax.set_xticks([512, 1024, 2048, 4096, 8192], ["512", "1,024", "2,048", "4,096", "8,192"])
    ax.set_xlabel("tokens")
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
  memory.legend(fontsize=8)
  fig.suptitle("ModernBERT base, random weights: ours (TF) vs transformers (torch)", fontsize=10)
  fig.tight_layout()
  fig.savefig(path, dpi=90)
  plt.close(fig)
