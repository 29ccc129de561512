"""A study's results as the paper shows them: a table (results.md) and a curve plot (PNG).

results.md has one row per arm: held-out MLM perplexity on the shared fixed-mask set and the
downstream dev metric, each as mean ± half the range over the seeds (the spread), plus the
tokens, batch, steps and learning rate that define the arm. The plot has held-out perplexity
against training tokens seen, one line per arm (mean over seeds at each eval).
"""

from __future__ import annotations

import collections
import statistics

from roberta_tf.common import atomic_write, files


def _mean_spread(values: list[float | None]) -> str:
  if not values or None in values:  # no downstream problem (--task_epochs=0)
    return "-"
  if len(values) == 1:
    return f"{values[0]:.3f}" if values[0] < 10 else f"{values[0]:.1f}"
  mean, spread = statistics.fmean(values), (max(values) - min(values)) / 2
  return f"{mean:.3f} ± {spread:.3f}" if mean < 10 else f"{mean:.1f} ± {spread:.1f}"


def table(study: str, results: list[dict]) -> str:
  """Markdown: the study's rows in arm order."""
  by_arm = collections.OrderedDict()
  for r in results:
    by_arm.setdefault(r["arm"], []).append(r)
  metric = results[0]["problem_metric"] if results else "metric"
  real = all("real_tokens" in r for r in results)  # results written before it lack it
  blimp = all("blimp" in r for r in results) and bool(results)
  ratios = _beside_ratios(by_arm)
  # --task_epochs=0: no downstream column.
  problem = any(r["problem_value"] is not None for r in results) or not results
  lines = [f"## Study: {study}", "",
           "| arm | held-out MLM ppl |" + (" / reference beside it |" if ratios else "")
           + (f" downstream {metric} |" if problem else "") + (" BLiMP |" if blimp else "")
           + " tokens |" + (" real tokens |" if real else "")
           + " batch | steps | peak LR | seeds |",
           "|---|---|" + ("---|" if ratios else "") + ("---|" if problem else "")
           + ("---|" if blimp else "") + "---|" + ("---|" if real else "") + "---|---|---|---|"]
  nsp = {arm: [r["nsp_accuracy"] for r in rows if "nsp_accuracy" in r]
         for arm, rows in by_arm.items()}
  for arm, rows in by_arm.items():
    r0 = rows[0]
    lines.append(
        f"| {arm} | {_mean_spread([r['perplexity'] for r in rows])} | "
        + (f"{_mean_spread(ratios.get(arm, []))} | " if ratios else "")
        + (f"{_mean_spread([r['problem_value'] for r in rows])} | " if problem else "")
        + (f"{_mean_spread([r['blimp'] for r in rows])} | " if blimp else "")
        + f"{r0['tokens']:,} | "
        + (f"{r0['real_tokens']:,} | " if real else "")
        + f"{r0['batch_size']} | {r0['train_steps']} | {r0['learning_rate']:g} | "
        f"{', '.join(str(r['seed']) for r in rows)}"
        + (f" ({len(rows)} runs)" if len(rows) > len({r['seed'] for r in rows}) else "") + " |")
  if any(nsp.values()):
    lines += ["", "NSP accuracy on each pair arm's own held-out pairs (chance 0.5): " + ", ".join(
        f"{arm} {_mean_spread(v)}" for arm, v in nsp.items() if v) + "."]
  if ratios:
    lines += ["", f"Paired (--paired): each arm trained beside a run of {next(iter(by_arm))}, "
              "the two at once; the ratio is its perplexity over that run's, mean ± half the "
              "range over seeds. The reference's row pools all its runs."]
  lines += ["", "Mean ± half the range over the seeds. Perplexity: the shared held-out split "
            "with fixed masks (lower is better). Tokens: sequence slots trained on (batch x "
            "steps x 128)" + ("; real tokens: those that are not padding." if real else ".")]
  return "\n".join(lines) + "\n"


def _beside_ratios(by_arm: dict[str, list[dict]]) -> dict[str, list[float]]:
  """{arm: [its perplexity / that of the reference run beside it, per seed]} for the arms run
  beside the first arm (--paired); {} when none was."""
  if not by_arm:
    return {}
  reference = next(iter(by_arm))
  ref = {(r["seed"], r.get("beside")): r["perplexity"] for r in by_arm[reference]}
  ratios = {}
  for arm, rows in by_arm.items():
    pairs = [r["perplexity"] / ref[(r["seed"], arm)] for r in rows
             if r.get("beside") == reference and (r["seed"], arm) in ref]
    if pairs:
      ratios[arm] = pairs
  return ratios


def plot(study: str, results: list[dict], path: str) -> str | None:
  """Held-out perplexity against tokens seen, one line per arm; None without matplotlib."""
  try:
    import matplotlib  # pylint: disable=import-outside-toplevel
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  curves = collections.OrderedDict()
  for r in results:
    for tokens, ppl in r["curve"]:
      curves.setdefault(r["arm"], collections.defaultdict(list))[tokens].append(ppl)
  fig, ax = plt.subplots(figsize=(6.4, 4.2))
  for arm, points in curves.items():
    xs = sorted(points)
    ax.plot([x / 1e6 for x in xs], [statistics.fmean(points[x]) for x in xs], marker="o",
            markersize=3, label=arm)
  real = all("real_tokens" in r for r in results)
  ax.set_xlabel(f"{'real ' if real else ''}training tokens seen (millions)")
  ax.set_ylabel("held-out MLM perplexity")
  ax.set_yscale("log")
  ax.set_title(f"RoBERTa ablation: {study}")
  ax.grid(True, alpha=0.3)
  ax.legend()
  fig.tight_layout()
  with atomic_write.atomic_path(path) as tmp:  # a local file (published to a URL after)
    fig.savefig(tmp, format="png", dpi=110)
  plt.close(fig)
  return path


def write(study: str, results: list[dict], work_dir: str) -> None:
  """results.json, results.md and <study>.png in work_dir."""
  atomic_write.write_json(files.join(work_dir, "results.json"), results)
  md = table(study, results)
  png = plot(study, results, files.join(work_dir, f"{study}.png"))
  if png:
    md += f"\n![{study}]({files.basename(png)})\n"
  atomic_write.write_text(files.join(work_dir, "results.md"), md)
  print(md, flush=True)
