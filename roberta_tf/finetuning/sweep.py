"""The paper's fine-tuning protocol over a grid, and its statistics.

RoBERTa's GLUE dev results (Liu et al. 2019, Sec. 5.1 and Appendix C) sweep batch size
{16, 32} x learning rate {1e-5, 2e-5, 3e-5}, keep each run's best epoch on dev, and report
the MEDIAN over five random initializations. Here every (batch size, learning rate) is a
configuration, run once per seed; each run's value is its best epoch's dev metric. Per
configuration and over all runs we report the median and the spread (min, max, the quartiles
q1/q3 -- numpy's linear interpolation -- and the values per seed) of every dev metric. The
best configuration is the one with the best MEDIAN of the selection metric (the first in sweep
order on a tie).

The kept model -- the model dir's checkpoint, its eval_results.json top-level metrics and the
GLUE test predictions -- is the best configuration's MEDIAN seed: its runs ranked best first,
the one at position (n - 1) // 2 (with an odd number of seeds exactly the median run; with an
even number the better of the two middle ones). Not the best seed: the test predictions and
the kept model then stand for the reported median, not for the luckiest initialization.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

KEPT_SEED = "median"  # how the kept run is chosen among the best configuration's seeds


@dataclasses.dataclass(frozen=True)
class RunKey:
  """One run of the grid."""
  batch_size: int
  learning_rate: float
  seed: int

  @property
  def name(self) -> str:
    """Its directory under model_dir/runs/."""
    return f"bs{self.batch_size}_lr{self.learning_rate:g}_seed{self.seed}"

  @property
  def config(self) -> tuple[int, float]:
    return self.batch_size, self.learning_rate

  def label(self, keys: Sequence[RunKey]) -> str:
    """"lr 2e-05", plus the batch size and seed when the grid varies them (log lines)."""
    parts = [f"lr {self.learning_rate:g}"]
    if len({k.batch_size for k in keys}) > 1:
      parts.append(f"bs {self.batch_size}")
    if len({k.seed for k in keys}) > 1:
      parts.append(f"seed {self.seed}")
    return " ".join(parts)


def plan(batch_sizes: Sequence[int], learning_rates: Sequence[float],
         seeds: Sequence[int]) -> list[RunKey]:
  """The runs in the order they are trained: configuration by configuration, seeds inside."""
  return [RunKey(b, lr, s) for b in batch_sizes for lr in learning_rates for s in seeds]


def spread(values: Sequence[float]) -> dict:
  """{"median", "min", "max", "q1", "q3", "values"} of one metric's values (n >= 1)."""
  array = np.asarray(values, np.float64)
  q1, median, q3 = np.percentile(array, [25, 50, 75])
  return {"median": float(median), "min": float(array.min()), "max": float(array.max()),
          "q1": float(q1), "q3": float(q3), "values": [float(v) for v in values]}


def _stats(metric_dicts: Sequence[dict]) -> dict:
  """Every numeric metric the runs share -> its spread."""
  names = [k for k in metric_dicts[0] if all(isinstance(m.get(k), (int, float))
                                             for m in metric_dicts)]
  return {k: spread([m[k] for m in metric_dicts]) for k in names}


def summarize(runs: Sequence[tuple[RunKey, dict]], metric: str,
              lower_is_better: bool = False) -> dict:
  """Statistics of a finished grid (see the module docstring).

  Args:
    runs: (key, the run's best-epoch dev metrics), in plan order.
    metric: the selection metric.
  Returns:
    {"configs": [{"batch_size", "learning_rate", "seeds", "metrics": {name: spread}}],
     "overall": {name: spread} over all runs, "best_config": index into configs,
     "kept": the kept run's RunKey}.
  """
  sign = -1.0 if lower_is_better else 1.0
  groups: dict[tuple[int, float], list[tuple[RunKey, dict]]] = {}
  for key, metrics in runs:
    groups.setdefault(key.config, []).append((key, metrics))
  configs = [{"batch_size": b, "learning_rate": lr, "seeds": [k.seed for k, _ in members],
              "metrics": _stats([m for _, m in members])}
             for (b, lr), members in groups.items()]
  best = max(range(len(configs)),
             key=lambda i: (sign * configs[i]["metrics"][metric]["median"], -i))
  members = list(groups.values())[best]
  ranked = sorted(members, key=lambda km: -sign * km[1][metric])  # best first; stable
  return {"configs": configs, "overall": _stats([m for _, m in runs]), "best_config": best,
          "kept": ranked[(len(ranked) - 1) // 2][0]}


def _fmt(value: float) -> str:
  return f"{value:.4f}"


def markdown(summary: dict, metric: str, title: str, kept_epoch: int) -> str:
  """results.md: one row per configuration, then the best one, the kept run and all runs."""
  lines = [f"# {title}", "",
           f"Dev `{metric}`: each run's best epoch; median and spread over the seeds of each "
           "configuration (q1-q3: interquartile range).", "",
           "| batch | LR | median | min | max | q1-q3 | per seed | other metrics (median) |",
           "|---:|---:|---:|---:|---:|---|---|---|"]
  for config in summary["configs"]:
    s = config["metrics"][metric]
    others = ", ".join(f"{k} {_fmt(v['median'])}" for k, v in config["metrics"].items()
                       if k != metric and not k.endswith(("total", "thresh")))
    per_seed = ", ".join(f"{seed}: {_fmt(v)}" for seed, v in
                         zip(config["seeds"], s["values"], strict=True))
    lines.append(f"| {config['batch_size']} | {config['learning_rate']:g} | {_fmt(s['median'])} "
                 f"| {_fmt(s['min'])} | {_fmt(s['max'])} | {_fmt(s['q1'])}-{_fmt(s['q3'])} "
                 f"| {per_seed} | {others} |")
  best = summary["configs"][summary["best_config"]]
  s, kept, overall = best["metrics"][metric], summary["kept"], summary["overall"][metric]
  lines += ["",
            f"Best configuration (by median): batch {best['batch_size']}, LR "
            f"{best['learning_rate']:g}: median {_fmt(s['median'])} (min {_fmt(s['min'])}, max "
            f"{_fmt(s['max'])}, q1-q3 {_fmt(s['q1'])}-{_fmt(s['q3'])}, {len(s['values'])} seeds).",
            f"Kept model (checkpoint, test predictions): seed {kept.seed}, the median run of the "
            f"best configuration, epoch {kept_epoch}.",
            f"All {len(overall['values'])} runs: median {_fmt(overall['median'])}, min "
            f"{_fmt(overall['min'])}, max {_fmt(overall['max'])}.", ""]
  return "\n".join(lines)
