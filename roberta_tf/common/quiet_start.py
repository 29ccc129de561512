"""A quiet TensorFlow start for a binary's process: TF's C++ start-up lines kept off stderr.

`install()` is called by common/cli.py's `run` (a binary's own process), before the binary's
`main` can import TensorFlow; never on import of any package module (importing roberta_tf or
data_prep changes neither os.environ nor a file descriptor). It imports nothing heavy itself.
It does two things:
- TF_CPP_MIN_LOG_LEVEL=3 unless set: read when TensorFlow loads, it silences what TF logs once
  running (the cuInit error on machines without a GPU included).
- The lines TF prints while it is imported, before its logging reads that variable (absl's
  "All log messages before absl::InitializeLog()", the oneDNN notice, "Could not find cuda
  drivers", the CPU-feature notice), are filtered out of stderr during the first `import
  tensorflow`: an import hook on sys.meta_path wraps TF's loader, points fd 2 (where C++
  writes) at a temporary file while TF executes, then writes back every line that is not one
  of IMPORT_CHATTER's. No environment variable silences those lines.
ROBERTA_TF_VERBOSE=1 (checked first: then nothing is set or installed) or TF_CPP_MIN_LOG_LEVEL=0
(or 1) leaves everything as TensorFlow prints it.

IMPORT_CHATTER holds the lines of TensorFlow TF_VERSION; tests/test_cli_call.py imports the
installed TF in a process of its own and fails when a line it prints is not recognized, or when
TF is not that version (read its start-up lines again, then update both here).
"""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import re
import sys
import tempfile

VERBOSE_ENV = "ROBERTA_TF_VERBOSE"
TF_VERSION = "2.21"
# What TensorFlow TF_VERSION prints on stderr while it is imported, whatever
# TF_CPP_MIN_LOG_LEVEL says (its C++ logging is not initialized yet): known lines only.
IMPORT_CHATTER = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called|oneDNN custom operations are on"
    r"|cudart_stub\.cc|Could not find cuda drivers|failed call to cuInit|Unable to register "
    r"cu(DNN|FFT|BLAS) factory|TF-TRT Warning|This TensorFlow binary is optimized to use"
    r"|To enable the following instructions|computation placer already registered")


def verbose_env() -> bool:
  """ROBERTA_TF_VERBOSE is set to something other than "", 0, false or no."""
  return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


@contextlib.contextmanager
def captured_stderr(lines: list[str]):
  """fd 2 (where C++ writes) and sys.stderr go to a temporary file for the block; its
  non-blank lines are appended to `lines` afterwards."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield lines
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      lines.extend(line for line in captured.read().decode("utf-8", "replace").splitlines()
                   if line.strip())


@contextlib.contextmanager
def _chatter_filtered():
  """The block's stderr less IMPORT_CHATTER's lines (any other line is passed on)."""
  lines: list[str] = []
  try:
    with captured_stderr(lines):
      yield
  finally:
    kept = [line for line in lines if not IMPORT_CHATTER.search(line)]
    if kept:
      sys.stderr.write("\n".join(kept) + "\n")
      sys.stderr.flush()


class _QuietLoader(importlib.abc.Loader):
  """The real loader of `tensorflow`, executing it inside _chatter_filtered."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    with _chatter_filtered():
      self._loader.exec_module(module)

  def __getattr__(self, name):  # resource readers etc. come from the real loader
    return getattr(self._loader, name)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` with the other finders and wraps its loader (first import only: it
  takes itself off sys.meta_path when asked for tensorflow)."""

  def find_spec(self, fullname, path, target=None):
    if fullname != "tensorflow":
      return None
    sys.meta_path.remove(self)
    for finder in sys.meta_path:
      spec = getattr(finder, "find_spec", lambda *a: None)(fullname, path, target)
      if spec is not None:
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
          spec.loader = _QuietLoader(spec.loader)
        return spec
    return None


def install() -> None:
  """See the module docstring; for a binary's own process only (common/cli.py's `run`).

  Changes nothing when TF's logs are wanted (ROBERTA_TF_VERBOSE=1, read before anything is
  set), once TensorFlow is imported, or when the hook is in place; installs no hook when
  TF_CPP_MIN_LOG_LEVEL < 2."""
  if ("tensorflow" in sys.modules or verbose_env()
      or any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path)):
    return
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  try:
    level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
  except ValueError:
    level = 3
  if level >= 2:
    sys.meta_path.insert(0, _QuietTensorFlowImport())
