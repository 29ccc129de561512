"""What many test files need: the binaries in a fresh process, a free port, the tiny model.

- `run_module(module, *flags)`: `python -m` a binary from the repository root, TensorFlow's
  start-up logs off, output captured as text; never raises on a non-zero exit (the test
  asserts the return code). `start_module` is the same as a `Popen`, for tests
  that signal or read a running binary.
- `free_port()`: a localhost port nothing listens on (multi-worker TF_CONFIG, TensorBoard).
- `tiny_config(**overrides)`: the `tiny` preset at the fixture vocabulary's size (8,000) and 64
  tokens, dropout 0 (so two runs of the same batches are equal): the model of most tests.

Layer tests: tests/layer_testing.py. Shared data (the fixture vocabulary, the test corpus's
shards): tests/conftest.py's fixtures.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from roberta_tf import models
from tests.conftest import REPO

FIXTURE_VOCAB_SIZE = 8000  # tests/testdata/hf_roberta_tiny


def module_env(**extra: str) -> dict[str, str]:
  """The environment a binary runs in: this one, quiet TF, the repository on the path."""
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO, **extra}


def module_command(module: str, *args: str) -> list[str]:
  return [sys.executable, "-m", module, *map(str, args)]


def run_module(module: str, *args, timeout: float = 300, env: dict | None = None,
               **kwargs) -> subprocess.CompletedProcess:
  """Runs `python -m module args` to completion (see the module docstring)."""
  return subprocess.run(module_command(module, *args), cwd=REPO, env=env or module_env(),
                        capture_output=True, text=True, timeout=timeout, check=False, **kwargs)


def start_module(module: str, *args, env: dict | None = None, **popen_kwargs) -> subprocess.Popen:
  """Starts `python -m module args` (text mode; pass stdout/stderr as the test needs)."""
  return subprocess.Popen(module_command(module, *args), cwd=REPO, env=env or module_env(),
                          text=True, **popen_kwargs)


def free_port() -> int:
  with socket.socket() as s:
    s.bind(("localhost", 0))
    return s.getsockname()[1]


def tiny_config(**overrides) -> models.RobertaConfig:
  """The tests' model (see the module docstring); `overrides` as for `models.preset`."""
  values = {"vocab_size": FIXTURE_VOCAB_SIZE, "max_seq_len": 64, "dropout": 0.0,
            "attention_dropout": 0.0}
  if "max_positions" in overrides:
    values.pop("max_seq_len")
  return models.preset("tiny", **{**values, **overrides})
