"""`python -m roberta_tf.quickstart` (the README's first command) end to end, with 6 steps:
vocab -> shards -> train -> export -> fill-mask, and the closing line with the unigram baseline."""

import json
import re

import pytest

from tests.harness import call_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers


@pytest.mark.timeout(600)
def test_quickstart_runs_end_to_end_and_reports_the_unigram_baseline(tmp_path):
  work = tmp_path / "quickstart"
  result = call_module("roberta_tf.quickstart", f"--work_dir={work}", "--train_steps=6",
                       "--precision=float32")
  assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
  lines = result.stdout.strip().splitlines()
  final = re.fullmatch(r"quickstart finished in [\d.]+ min: held-out perplexity ([\d.]+) = "
                       r"([\d.]+)x the unigram baseline ([\d.]+) \(a model that ignores context\); "
                       r"the masked held-out word's median rank ([\d.]+) against the unigram "
                       r"baseline's ([\d.]+)", lines[-1])
  assert final, lines[-1]
  ppl, ratio, unigram, rank, unigram_rank = (float(x) for x in final.groups())
  assert ratio == pytest.approx(ppl / unigram, abs=0.006)
  with open(work / "quickstart_summary.json", encoding="utf-8") as f:
    summary = json.load(f)
  # The line prints one decimal: equal within half its last digit (4368.75 prints as 4368.8,
  # exactly 0.05 away, so the bound is inclusive of float rounding).
  assert summary["final_perplexity"] == pytest.approx(ppl, abs=0.05 + 1e-9)
  assert summary["unigram_perplexity"] == pytest.approx(unigram, abs=0.05 + 1e-9)
  assert summary["final_step"] == 6 and summary["precision"] == "float32"
  # Six steps from the reference init: still about ln V -- far above the unigram baseline.
  assert summary["initial_perplexity"] > unigram
  # fill-mask showed six held-out examples, each with its word's ranks, and ranked up to 400.
  assert len(re.findall(r"\n +answer '.*': rank \d+ under the model", result.stdout)) == 6
  assert (summary["median_rank"], summary["unigram_median_rank"]) == (rank, unigram_rank)
  assert 200 <= summary["ranked_examples"] <= 400  # one per sequence with a whole word mid-way
  assert (work / "saved_model" / "saved_model.pb").is_file()
