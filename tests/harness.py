"""What many test files need: the binaries (in-process or in a fresh process), a free port, the
tiny model.

- `run_module(module, *flags)`: a binary as `python -m` from the repository root would run it,
  output captured as text; never raises on a non-zero exit (the test asserts the return code).
  A project binary (roberta_tf.*, data_prep.*) runs in this process (common/cli.py's `call`:
  no interpreter start and TensorFlow import per case, and the binary counts in coverage),
  unless the call needs a process of its own: `env=`, `text=False`, `file_size_limit=`, other
  subprocess arguments, `--help`, `--cpu_replicas` / `--strategy` (TF's devices are fixed once
  per process), `--deterministic` (process-wide), or `in_process=False`.
  ROBERTA_TF_TESTS_IN_PROCESS=0 runs every binary in a fresh process. `start_module` is always a
  `Popen`, for tests that signal or read a running binary.
- `run_script(code, *argv)` / `start_script`: the same for `python -c code` (a fresh
  interpreter that imports only what the test wants, or sets TF up before it initializes).
- `run_command(argv)` / `start_command`: any other program (`console_script("tensorboard")`,
  `mount`); the four above are these with this interpreter's `-m` / `-c`.
  Every one takes `env=` (default `module_env()`; `module_env(NAME="value")` adds to it),
  `timeout=` (run_* in a child process; seconds, default 300; an in-process call has only
  pytest's timeout), `text=False` for bytes (output, and argv items may be bytes),
  `file_size_limit=N` (RLIMIT_FSIZE in the child: a write past N bytes fails as on
  a full disk) and, for start_*, Popen's stdout / stderr.
- `free_port()`: a localhost port nothing listens on (multi-worker TF_CONFIG, TensorBoard).
- `tiny_config(**overrides)`: the `tiny` preset at the fixture vocabulary's size (8,000) and 64
  tokens, dropout 0 (so two runs of the same batches are equal): the model of most tests.

Layer tests: tests/layer_testing.py. Shared data (the fixture vocabulary, the test corpus's
shards) and the repository's paths (REPO, TESTDATA, HF_TINY): tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import socket
import subprocess
import sys

from roberta_tf import models
from tests.conftest import REPO

FIXTURE_VOCAB_SIZE = 8000  # tests/testdata/hf_roberta_tiny


def module_env(**extra: str) -> dict[str, str]:
  """The environment a binary runs in: this one, quiet TF, the repository on the path."""
  return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": REPO, **extra}


def _argv(args) -> list:
  return [a if isinstance(a, bytes) else str(a) for a in args]


def module_command(module: str, *args) -> list:
  """`python -m module args` with this interpreter."""
  return [sys.executable, "-m", module, *_argv(args)]


def script_command(code: str, *args) -> list:
  """`python -c code args` with this interpreter."""
  return [sys.executable, "-c", code, *_argv(args)]


def console_script(name: str) -> str:
  """An installed package's command (`tensorboard`, `saved_model_cli`) beside this interpreter."""
  return os.path.join(os.path.dirname(sys.executable), name)


def _child_kwargs(env, text, file_size_limit, kwargs) -> dict:
  if file_size_limit is not None:
    def limit():
      resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
    kwargs["preexec_fn"] = limit
  return {"cwd": REPO, "env": env or module_env(), "text": text, **kwargs}


def run_command(argv, *, timeout: float = 300, env: dict | None = None, text: bool = True,
                file_size_limit: int | None = None, **kwargs) -> subprocess.CompletedProcess:
  """Runs `argv` to completion from the repository root, output captured (see the docstring)."""
  return subprocess.run(_argv(argv), capture_output=True, timeout=timeout, check=False,
                        **_child_kwargs(env, text, file_size_limit, kwargs))


def start_command(argv, *, env: dict | None = None, text: bool = True,
                  file_size_limit: int | None = None, **popen_kwargs) -> subprocess.Popen:
  """Starts `argv` from the repository root (pass stdout/stderr as the test needs)."""
  return subprocess.Popen(_argv(argv), **_child_kwargs(env, text, file_size_limit, popen_kwargs))


# Flags whose effect is process-wide (TF's logical devices, op determinism, a cluster): a binary
# given one runs in a fresh process.
_PROCESS_FLAGS = ("--help", "--helpshort", "--helpfull", "--cpu_replicas", "--strategy",
                  "--deterministic")


def _in_process(module: str, args, kwargs, in_process: bool | None) -> bool:
  if in_process is not None:
    return in_process
  if os.environ.get("ROBERTA_TF_TESTS_IN_PROCESS", "1") == "0":
    return False
  return (module.startswith(("roberta_tf.", "data_prep.")) and set(kwargs) <= {"timeout"}
          and all(isinstance(a, str | int | float) and not str(a).startswith(_PROCESS_FLAGS)
                  for a in args))


def _call_in_process(module: str, args) -> subprocess.CompletedProcess:
  """cli.call from the repository root with stdout/stderr captured (as a child's would be)."""
  from roberta_tf.common import cli  # pylint: disable=import-outside-toplevel
  out, err, cwd = io.StringIO(), io.StringIO(), os.getcwd()
  try:
    os.chdir(REPO)
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
      code, _ = cli.call(module, [str(a) for a in args])
  finally:
    os.chdir(cwd)
  return subprocess.CompletedProcess(module_command(module, *args), code, out.getvalue(),
                                     err.getvalue())


def run_module(module: str, *args, in_process: bool | None = None,
               **kwargs) -> subprocess.CompletedProcess:
  """Runs `python -m module args` to completion, in this process where it can (see the module
  docstring)."""
  if _in_process(module, args, kwargs, in_process):
    return _call_in_process(module, args)
  return run_command(module_command(module, *args), **kwargs)


def start_module(module: str, *args, **kwargs) -> subprocess.Popen:
  """Starts `python -m module args` (text mode; pass stdout/stderr as the test needs)."""
  return start_command(module_command(module, *args), **kwargs)


def run_script(code: str, *args, **kwargs) -> subprocess.CompletedProcess:
  """Runs `python -c code args` to completion (as run_module)."""
  return run_command(script_command(code, *args), **kwargs)


def start_script(code: str, *args, **kwargs) -> subprocess.Popen:
  """Starts `python -c code args` (as start_module)."""
  return start_command(script_command(code, *args), **kwargs)


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
