"""The paper's protocol statistics (roberta_tf/finetuning/sweep.py): medians and spreads per
configuration, the configuration chosen by its median, the kept run its median seed."""

import pytest

from roberta_tf.finetuning import sweep


def _runs(values):
  """{(batch, lr): [metric per seed]} -> (key, metrics) in plan order."""
  keys = sweep.plan(sorted({b for b, _ in values}), sorted({lr for _, lr in values}), [0, 1, 2])
  return [(k, {"accuracy": values[k.config][k.seed], "f1": 0.5}) for k in keys]


def test_plan_and_names():
  keys = sweep.plan([16, 32], [1e-5, 2e-5], [0, 1])
  assert [k.name for k in keys[:3]] == ["bs16_lr1e-05_seed0", "bs16_lr1e-05_seed1",
                                        "bs16_lr2e-05_seed0"]
  assert keys[0].label(keys) == "lr 1e-05 bs 16 seed 0"
  assert keys[0].label(sweep.plan([16], [1e-5, 2e-5], [0])) == "lr 1e-05"


def test_the_best_median_wins_not_the_best_run():
  values = {(16, 1e-5): [0.70, 0.71, 0.95],   # one lucky seed: best run, median 0.71
            (16, 2e-5): [0.80, 0.79, 0.81],   # the best median
            (32, 1e-5): [0.60, 0.61, 0.62], (32, 2e-5): [0.10, 0.90, 0.20]}
  summary = sweep.summarize(_runs(values), "accuracy")
  best = summary["configs"][summary["best_config"]]
  assert (best["batch_size"], best["learning_rate"]) == (16, 2e-5)
  assert best["metrics"]["accuracy"]["median"] == pytest.approx(0.80)
  assert best["metrics"]["accuracy"]["min"] == 0.79 and best["metrics"]["accuracy"]["max"] == 0.81
  assert best["metrics"]["accuracy"]["q1"] == pytest.approx(0.795)
  assert best["metrics"]["accuracy"]["values"] == [0.80, 0.79, 0.81]
  assert best["metrics"]["f1"]["median"] == 0.5
  assert summary["kept"] == sweep.RunKey(16, 2e-5, 0)  # the seed at the median
  assert summary["overall"]["accuracy"]["max"] == 0.95
  assert len(summary["overall"]["accuracy"]["values"]) == 12


def test_kept_run_with_an_even_number_of_seeds_and_a_lower_is_better_metric():
  key = lambda s: sweep.RunKey(16, 1e-5, s)
  runs = [(key(s), {"mse": v}) for s, v in enumerate([0.4, 0.1, 0.3, 0.2])]
  summary = sweep.summarize(runs, "mse", lower_is_better=True)
  assert summary["configs"][0]["metrics"]["mse"]["median"] == pytest.approx(0.25)
  assert summary["kept"] == key(3)  # ranked best first: 0.1, 0.2 (kept), 0.3, 0.4
  other = [(sweep.RunKey(32, 1e-5, s), {"mse": v}) for s, v in enumerate([0.2, 0.2, 0.2, 0.2])]
  assert sweep.summarize(runs + other, "mse", lower_is_better=True)["best_config"] == 1


def test_markdown_table():
  values = {(16, 1e-5): [0.70, 0.71, 0.95], (16, 2e-5): [0.80, 0.79, 0.81]}
  summary = sweep.summarize(_runs(values), "accuracy")
  text = sweep.markdown(summary, "accuracy", "rte", kept_epoch=3)
  assert "| 16 | 2e-05 | 0.8000 | 0.7900 | 0.8100 | 0.7950-0.8050 | 0: 0.8000, 1: 0.7900, " \
         "2: 0.8100 | f1 0.5000 |" in text
  assert "Best configuration (by median): batch 16, LR 2e-05: median 0.8000" in text
  assert "seed 0, the median run of the best configuration, epoch 3" in text
