"""Shared pytest fixtures: paths to the copied reference data, quiet TF logs."""

import json
import os
import resource
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# The runs' measured matmul peaks (training/precision_probe.py) go to a cache of the tests' own:
# measured beside a loaded suite, they would understate the machine's peak in the user's cache.
os.environ.setdefault("ROBERTA_TF_CACHE_DIR", os.path.join(
    tempfile.gettempdir(), f"roberta_tf_tests_cache_{os.getuid()}"))
# The test processes train as well as serve: oneDNN must not keep packed weights, which the
# serving binaries' `main` (called in-process here: common/cli.py's `call`) would otherwise
# switch on for the whole process (serving/frozen_weights.py's serve_only; no library function
# sets it). The fresh-process serving tests set it to 1 themselves; train and finetune refuse
# to start under it (tests/test_frozen_weights.py).
os.environ.setdefault("TF_ONEDNN_ASSUME_FROZEN_WEIGHTS", "0")

import pytest  # noqa: E402

from tests import ram_filesystem  # noqa: E402

# ram:// stands for gs:// in the tests, its in-memory quirks corrected (tests/ram_filesystem.py).
ram_filesystem.install()

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The checked-out workspace itself, through this file's real path. The same as REPO outside
# Bazel; under it, REPO is the runfiles tree (declared inputs only), and the tests that read
# files in place (every BUILD file, pyproject.toml, the requirements) use this.
SOURCE_TREE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
TESTDATA = os.path.join(REPO, "tests", "testdata")
HF_TINY = os.path.join(TESTDATA, "hf_roberta_tiny")


@pytest.fixture(scope="session")
def hf_tiny_dir():
  """The Hugging Face tiny RoBERTa fixture (vocab.json, merges.txt, checkpoint, expected.npz)."""
  return HF_TINY


@pytest.fixture(scope="session")
def train_shards(tmp_path_factory):
  """Pretraining shards of the test corpus, encoded with the project's tokenizer.

  max_seq_len 64, ONE train shard (443 sequences) and one validation shard (22). One train
  file matters: with fewer files than input pipelines the pipeline splits by record, so 2
  workers x B/2 read exactly the sequences 1 worker x B reads (the multi-worker parity test).
  Built by the binary in a subprocess (its absl flags stay out of this process).
  """
  import subprocess  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  out = str(tmp_path_factory.mktemp("train_shards"))
  subprocess.run([sys.executable, "-m", "data_prep.build_shards",
                  f"--input={os.path.join(TESTDATA, 'python_docs_small.jsonl.gz')}",
                  f"--vocab_dir={HF_TINY}", f"--output_dir={out}", "--max_seq_len=64",
                  "--num_shards=1", "--validation_fraction=0.1", "--overwrite", "--noprogress"],
                 cwd=REPO, check=True, capture_output=True)
  return out


# Test files run longest first, by the seconds recorded in tests/durations.json, so that no
# xdist worker starts a long file last while the other sits idle (the order of tests inside a
# file is kept; a file not recorded yet runs first). The suite records them itself:
#   python -m pytest -q -n 2 --dist loadfile tests --store-durations
# writes each file's wall and CPU seconds (its tests' setup, call and teardown, module fixtures
# and the binaries they start in processes included; a run of some files updates theirs only)
# and prints the costliest files.
DURATIONS = os.path.join(REPO, "tests", "durations.json")


def pytest_addoption(parser):
  parser.addoption("--store-durations", action="store_true",
                   help=f"write each test file's wall and CPU seconds to {DURATIONS}")


def pytest_configure(config):
  # pytest-xdist's --dist loadfile otherwise hands out files by their number of tests, most
  # first, which put the one-test quickstart and docs_sections files last, with one worker
  # running them alone (docs/testing.md). Off, xdist keeps the collection order that
  # pytest_collection_modifyitems sets (the same as passing --no-loadscope-reorder).
  if hasattr(config.option, "loadscopereorder"):
    config.option.loadscopereorder = False


def pytest_collection_finish(session):
  """Grappler (TF's graph optimizer) off in the test processes, unless
  ROBERTA_TF_TEST_GRAPPLER=1. Each tf.function's first call runs it; on the tiny models of the
  in-process tests it costs more than it saves (docs/testing.md), and it changes no result
  beyond float rounding (fusions).
  The binaries the tests start as processes (quickstart, multi-worker, resume, faults) run
  with it on, as users do. Set after collection, before any test runs, and only where a
  collected module imported TensorFlow (a run of TF-free tests does not import it)."""
  del session
  if os.environ.get("ROBERTA_TF_TEST_GRAPPLER") == "1" or "tensorflow" not in sys.modules:
    return
  sys.modules["tensorflow"].config.optimizer.set_experimental_options(
      {"disable_meta_optimizer": True})


def _file_of(nodeid: str) -> str:
  return os.path.splitext(os.path.basename(nodeid.split("::")[0]))[0]


def recorded_seconds() -> dict[str, float]:
  """{test file name: wall seconds} from tests/durations.json ({} when absent)."""
  try:
    with open(DURATIONS, encoding="utf-8") as f:
      return {name: float(v["wall_s"]) for name, v in json.load(f)["files"].items()}
  except FileNotFoundError:
    return {}


def pytest_collection_modifyitems(items):
  seconds = recorded_seconds()
  items.sort(key=lambda item: -seconds.get(_file_of(item.nodeid), float("inf")))  # stable


def _cpu_seconds() -> float:
  own, children = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                   resource.RUSAGE_CHILDREN))
  return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _cpu_timed_phase():
  """A hook wrapper for a test's phase (setup, call, teardown) that adds its CPU seconds to the
  item's user_properties, which the phase's report carries (to xdist's controller too)."""
  @pytest.hookimpl(wrapper=True)
  def phase(item):
    start = _cpu_seconds()
    try:
      return (yield)
    finally:
      item.user_properties.append(("cpu_s", _cpu_seconds() - start))
  return phase


pytest_runtest_setup = _cpu_timed_phase()
pytest_runtest_call = _cpu_timed_phase()
pytest_runtest_teardown = _cpu_timed_phase()


# {test file name: {"wall_s", "cpu_s", "tests"}}, from the reports this process sees: under
# xdist the controller sees every worker's.
_RECORDED: dict[str, dict] = {}


def pytest_runtest_logreport(report):
  entry = _RECORDED.setdefault(_file_of(report.nodeid), {"wall_s": 0.0, "cpu_s": 0.0, "tests": 0})
  entry["wall_s"] += report.duration
  if report.when == "teardown":
    entry["cpu_s"] += sum(v for k, v in report.user_properties if k == "cpu_s")
    entry["tests"] += 1


def pytest_sessionfinish(session):
  config = session.config
  if not config.getoption("--store-durations") or hasattr(config, "workerinput"):
    return  # an xdist worker: its reports reach the controller, which writes
  recorded = _RECORDED
  if not recorded:
    return
  try:  # the files this run did not run keep their record
    with open(DURATIONS, encoding="utf-8") as f:
      merged = json.load(f)["files"]
  except FileNotFoundError:
    merged = {}
  merged.update({k: {m: round(x, 1) if isinstance(x, float) else x for m, x in v.items()}
                 for k, v in recorded.items()})
  ordered = dict(sorted(merged.items(), key=lambda kv: -kv[1]["wall_s"]))
  total_cpu = sum(v["cpu_s"] for v in ordered.values())
  with open(DURATIONS, "w", encoding="utf-8") as f:
    json.dump({"about": "seconds per test file, written by pytest --store-durations "
                        "(tests/conftest.py); the suite runs the longest files first",
               "cpu_s_total": round(total_cpu, 1), "files": ordered}, f, indent=1)
    f.write("\n")
  top = sorted(ordered.items(), key=lambda kv: -kv[1]["cpu_s"])[:20]
  session.config.get_terminal_writer().line(
      f"\n{DURATIONS}: {len(ordered)} files, {total_cpu / 60:.1f} CPU-min; costliest: "
      + ", ".join(f"{k} {v['cpu_s']:.0f}s" for k, v in top))
