"""What many test files need: the binaries (in this process or in a fresh one), a free port, the
tiny model.

- `call_module(module, *flags)`: a project binary (roberta_tf.*, data_prep.*) called in THIS
  process (common/cli.py's `call`: no interpreter start and TensorFlow import per case, and the
  binary counts in coverage), from the repository root as `python -m` would run it, its output
  captured as text; never raises on a non-zero exit (the test asserts the return code). What
  needs a process of its own is refused with a ValueError or TypeError naming `run_module`:
  `--help*`, `--cpu_replicas` / `--strategy` (TF's devices are fixed once per process),
  `--deterministic` (process-wide), `--verbosity` (absl's global flags), an argument that is
  not text (bytes), and any keyword (`env=`, `text=`, `file_size_limit=`, `timeout=`: an
  in-process call has no timeout of its own, pytest's per-test one is its limit).
  ROBERTA_TF_TESTS_IN_PROCESS=0 makes it run the same command in a fresh process instead.
- `run_module(module, *flags)`: `python -m module flags` in a fresh process, to completion;
  `start_module` starts one (a `Popen`, for tests that signal or read a running binary).
- `run_script(code, *argv)` / `start_script`: the same for `python -c code` (a fresh
  interpreter that imports only what the test wants, or sets TF up before it initializes).
- `run_command(argv)` / `start_command`: any other program (`console_script("tensorboard")`,
  `mount`); the process ones above are these with this interpreter's `-m` / `-c`.
  Every one takes `env=` (default `module_env()`; `module_env(NAME="value")` adds to it),
  `timeout=` (run_*; seconds, default 300; None: none), `text=False` for bytes (output, and
  argv items may be bytes), `file_size_limit=N` (RLIMIT_FSIZE in the child: a write past N
  bytes fails as on a full disk) and, for start_*, Popen's stdout / stderr.
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
import shutil
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


def run_module(module: str, *args, **kwargs) -> subprocess.CompletedProcess:
  """Runs `python -m module args` in a fresh process to completion (run_command's keywords)."""
  if "in_process" in kwargs:
    raise TypeError("run_module always starts a process; call_module runs a binary in this one")
  return run_command(module_command(module, *args), **kwargs)


# Flags whose effect is process-wide (TF's logical devices, op determinism, absl's global
# flags and --help): a binary given one needs a process of its own (run_module).
PROCESS_FLAGS = ("--help", "--cpu_replicas", "--strategy", "--deterministic", "--verbosity")


def _refuse_in_process(module: str, args, kwargs) -> None:
  """Raises TypeError / ValueError, naming run_module, for what call_module cannot do."""
  if kwargs:
    raise TypeError(f"call_module({module!r}) runs in this process: {', '.join(kwargs)}= "
                    "need a process of its own, run_module")
  if not module.startswith(("roberta_tf.", "data_prep.")):
    raise ValueError(f"call_module({module!r}): not a project binary; use run_module")
  for a in args:
    if not isinstance(a, str | int | float):
      raise ValueError(f"call_module({module!r}): argument {a!r} is not text; a process of "
                       "its own takes bytes: run_module(..., text=False)")
    if str(a).startswith(PROCESS_FLAGS):
      raise ValueError(f"call_module({module!r}): {a} is process-wide; it needs a process of "
                       "its own: run_module")


def call_module(module: str, *args, **kwargs) -> subprocess.CompletedProcess:
  """Runs binary `module` with command-line arguments `args` in this process, as `python -m
  module args` from the repository root would (see the module docstring); the result as a
  child's, stdout and stderr captured as text."""
  _refuse_in_process(module, args, kwargs)
  if os.environ.get("ROBERTA_TF_TESTS_IN_PROCESS", "1") == "0":
    return run_module(module, *args, timeout=None)
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


def start_module(module: str, *args, **kwargs) -> subprocess.Popen:
  """Starts `python -m module args` (text mode; pass stdout/stderr as the test needs)."""
  return start_command(module_command(module, *args), **kwargs)


def run_script(code: str, *args, **kwargs) -> subprocess.CompletedProcess:
  """Runs `python -c code args` in a fresh process to completion (as run_module)."""
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


def crashed_copy(model_dir: str, copy_dir: str, step: int) -> None:
  """`copy_dir` as `model_dir` would be had its run crashed right after checkpoint `step`:
  that checkpoint, its config.json and vocabulary, and a `checkpoint` file naming it."""
  os.makedirs(copy_dir)
  for name in os.listdir(model_dir):
    if name.startswith(f"ckpt-{step}.") or name in ("config.json", "vocab.json", "merges.txt"):
      shutil.copy(os.path.join(model_dir, name), copy_dir)
  with open(os.path.join(copy_dir, "checkpoint"), "w", encoding="utf-8") as f:
    f.write(f'model_checkpoint_path: "ckpt-{step}"\n')
