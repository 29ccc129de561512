"""benchmarks/quality/parity_report.py: runs on other held-out data never share a table row, so a
corpus whose prep changed shows as a group of its own instead of mixing into the old seeds."""

from benchmarks.quality import parity_report


def _record(arm, seed, ppl, validation, unigram):
  return {"corpus": "stdlib", "lr": "1e-3", "init": "own", "train_steps": 550,
          "warmup_steps": 60, "stop_after": 400, "arm": arm, "seed": seed,
          "unigram_ppl": unigram, "curve": [[400, {"ppl": ppl, "acc": 0.1}]],
          "batches": {"validation": validation}}


def test_other_held_out_data_is_another_group():
  old = [_record("ours", s, 700.0 + s, "aaaa", 1120.0) for s in (0, 1, 2)]
  new = [_record("ours", 0, 600.0, "bbbb", 952.0), _record("hf", 0, 500.0, "bbbb", 952.0)]
  rows = parity_report.summarize(old + new)
  by = {(r["unigram_ppl"], r["arm"]): r for r in rows}
  assert set(by) == {(1120.0, "ours"), (952.0, "ours"), (952.0, "hf")}
  assert by[(1120.0, "ours")]["ppl"] == [700.0, 701.0, 702.0]
  assert by[(952.0, "ours")]["ppl"] == [600.0] and by[(952.0, "ours")]["ratio"] == [1.2]
  assert by[(1120.0, "ours")]["ratio"] == []  # no hf run on the old data: no ratio
