"""benchmarks/serving/long_inputs_report.py: which records a point's figures come from (the
newest run, best over its rounds), the issue's targets at 8,192 tokens, the markers, the plot."""

import importlib.util

import pytest

from benchmarks.serving import long_inputs_report


def _record(side, length, cpu, mb, run="2026-01-02", round_=0, **extra):
  return {"kind": "forward", "side": side, "precision": "float32", "length": length,
          "cpu_seconds": [cpu], "seconds": [2 * cpu], "peak_rss_mb": mb, "run": run,
          "round": round_, "load_average": "3.00 2.00 1.00", **extra}


RECORDS = [
    _record("ours_blocked", 1024, 1.0, 1900), _record("ours_blocked", 8192, 12.0, 2300),
    _record("ours_blocked", 8192, 10.0, 2250, round_=1),
    _record("hf_sdpa", 1024, 6.0, 1800), _record("hf_sdpa", 8192, 80.0, 2800),
    _record("hf_sdpa", 8192, 1.0, 9999, run="2026-01-01"),  # an older run: not used
    _record("hf_sdpa", 8192, 0.5, 1, run="2026-01-03", error=["boom"]),  # failed: not used
    {"side": "hf_sdpa", "length": 8192, "cpu_seconds": [0.1], "seconds": [0.1],
     "peak_rss_mb": 1},  # before runs were recorded: not used
]


def test_newest_run_best_round():
  found = long_inputs_report.points(RECORDS)
  assert found[("forward", "ours_blocked", "float32", 8192)]["cpu_s"] == 10.0
  assert found[("forward", "ours_blocked", "float32", 8192)]["mb"] == 2250
  assert found[("forward", "hf_sdpa", "float32", 8192)]["cpu_s"] == 80.0


def test_targets_hold_or_not():
  lines = long_inputs_report.targets(long_inputs_report.points(RECORDS))
  assert "8.00x" in lines[0] and lines[0].endswith("holds")  # 80 / 10
  assert "ours 350 MB, hf_sdpa 1000 MB" in lines[1] and lines[1].endswith("holds")
  assert "1.25x" in lines[2]  # (10 / 8192) / (1 / 1024)
  worse = RECORDS + [_record("ours_blocked", 8192, 50.0, 2600, run="2026-01-05")]
  lines = long_inputs_report.targets(long_inputs_report.points(worse))
  assert all(line.endswith("DOES NOT HOLD") for line in lines), lines


def test_table_cells_carry_their_markers():
  table = long_inputs_report.tables(RECORDS)
  assert ("10.0 s<!-- record long_inputs.jsonl run=2026-01-02,kind=forward,side=ours_blocked,"
          "precision=float32,length=8192 cpu_seconds.0|min -->") in table
  assert "2,250 MB<!-- record long_inputs.jsonl" in table


@pytest.mark.skipif(not importlib.util.find_spec("matplotlib"), reason="needs matplotlib")
def test_plot_writes_a_png(tmp_path):
  path = tmp_path / "plot.png"
  long_inputs_report.plot(RECORDS, str(path))
  assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
