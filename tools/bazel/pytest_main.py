"""Runs one pytest file as a Bazel py_test: `pytest_main.py path/to/test_x.py [pytest args]`.

Bazel's test sandbox makes the runfiles tree read-only and shares /tmp between tests, so
pytest's cache is off and its temporary directories go under the test's own TEST_TMPDIR.
"""

import os
import sys

import pytest

if __name__ == "__main__":
  tmp = os.environ.get("TEST_TMPDIR")
  extra = ["-p", "no:cacheprovider"]
  if tmp:
    extra.append(f"--basetemp={os.path.join(tmp, 'pytest')}")
  sys.exit(pytest.main(["-q", *extra, *sys.argv[1:]]))
