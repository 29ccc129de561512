"""The one way a binary runs: a quiet start, and a failure as ONE line on stderr.

Every binary (roberta_tf/*.py, data_prep's) calls `cli.run` on its `main` instead of absl's
`app.run` and imports this module before anything that imports TensorFlow:

- TensorFlow's C++ start-up chatter is off: TF_CPP_MIN_LOG_LEVEL=3 unless already set (read
  when TF loads; it silences what TF logs once running, the cuInit error on machines without a
  GPU included), and the lines TF prints while it is imported, before its logging reads that
  variable (absl's "All log messages before absl::InitializeLog()", the oneDNN notice, "Could
  not find cuda drivers"), are filtered out of stderr during `import tensorflow` (any other
  line printed then is passed on). absl's Python logging shows warnings and errors (unless
  --verbosity). TF_CPP_MIN_LOG_LEVEL=0 (or 1) shows everything again.
- A flag error (an unknown flag, a missing required one, an unreadable --flagfile) and an
  `app.UsageError` are one line: `error: ...`, exit code 1.
- Any exception out of `main` is one line, `error: <error_text.one_line(e)>`, exit code 1
  (Ctrl-C: 130). The project's errors name the flag or file and what to do; the traceback is
  printed only with `--verbose` or ROBERTA_TF_VERBOSE=1.

So a test (or a script) can rely on: rc != 0 and exactly one stderr line starting `error:`, and
a binary's output is its own lines only.

`call(module, argv)` runs a binary's main in this process, as `python -m module argv...` would,
and returns (exit code, its one error line or None): the tests call binaries this way without a
new interpreter and TensorFlow import per case, and the binaries count in the coverage figure.
Binaries define their flags on absl's global FLAGS when imported and share flag names; `call`
keeps only the called binary's flags defined and parks the others.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import os
import re
import sys
import tempfile
import traceback
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# What TensorFlow 2.21 prints on stderr while it is imported, whatever TF_CPP_MIN_LOG_LEVEL says
# (its C++ logging is not initialized yet): known lines only, anything else is passed on.
_IMPORT_CHATTER = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called|oneDNN custom operations are on"
    r"|cudart_stub\.cc|Could not find cuda drivers|failed call to cuInit|Unable to register "
    r"cu(DNN|FFT|BLAS) factory|TF-TRT Warning|This TensorFlow binary is optimized to use"
    r"|To enable the following instructions|computation placer already registered")


@contextlib.contextmanager
def _import_chatter_filtered():
  """stderr (fd 2, where C++ writes) goes to a temp file; afterwards the lines that are not
  known import chatter are written to the real stderr."""
  sys.stderr.flush()
  saved = os.dup(2)
  with tempfile.TemporaryFile() as captured:
    os.dup2(captured.fileno(), 2)
    try:
      yield
    finally:
      sys.stderr.flush()
      os.dup2(saved, 2)
      os.close(saved)
      captured.seek(0)
      kept = [line for line in captured.read().decode("utf-8", "replace").splitlines()
              if line.strip() and not _IMPORT_CHATTER.search(line)]
      if kept:
        sys.stderr.write("\n".join(kept) + "\n")
        sys.stderr.flush()


class _QuietLoader(importlib.abc.Loader):
  """The real loader of `tensorflow`, executing it inside _import_chatter_filtered."""

  def __init__(self, loader):
    self._loader = loader

  def create_module(self, spec):
    return self._loader.create_module(spec)

  def exec_module(self, module):
    with _import_chatter_filtered():
      self._loader.exec_module(module)

  def __getattr__(self, name):  # resource readers etc. come from the real loader
    return getattr(self._loader, name)


class _QuietTensorFlowImport(importlib.abc.MetaPathFinder):
  """Finds `tensorflow` with the other finders and wraps its loader (first import only)."""

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


def _tf_logs_wanted() -> bool:
  try:
    level = int(os.environ.get("TF_CPP_MIN_LOG_LEVEL", "3"))
  except ValueError:
    level = 3
  return level < 2 or os.environ.get("ROBERTA_TF_VERBOSE", "").strip().lower() not in (
      "", "0", "false", "no")


if "tensorflow" not in sys.modules and not _tf_logs_wanted():
  sys.meta_path.insert(0, _QuietTensorFlowImport())

from absl import app, flags  # noqa: E402
from absl import logging as absl_logging  # noqa: E402

from roberta_tf.common import error_text  # noqa: E402

VERBOSE_ENV = "ROBERTA_TF_VERBOSE"
FLAGS = flags.FLAGS
flags.DEFINE_bool("verbose", False, "On an error, also print the full traceback (or set "
                  f"{VERBOSE_ENV}=1).")


def verbose() -> bool:
  """--verbose or ROBERTA_TF_VERBOSE=1 (the environment works before flags are parsed too)."""
  env = os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")
  return env or (FLAGS.is_parsed() and FLAGS.verbose)


_last_error: list[str] = []  # the error lines `fail` printed during a `call`


def fail(message: str, code: int = 1) -> int:
  """Prints `error: <message>` (one line) to stderr; returns the exit code for main."""
  line = f"error: {' '.join(str(message).split())}"
  _last_error.append(line)
  print(line, file=sys.stderr, flush=True)
  return code


def _parse_flags(argv: list[str]) -> list[str]:
  try:
    return FLAGS(argv)
  except flags.Error as e:
    text = str(e).replace("ERROR:: ", "")
    sys.exit(fail(f"{text} (--helpshort lists the flags)"))


def guard(main: Callable[[list[str]], int | None]) -> Callable[[list[str]], int | None]:
  """`main` with every exception turned into one `error:` line and exit code 1 (130: Ctrl-C)."""

  def guarded(argv):
    if not verbose() and not FLAGS["verbosity"].present:
      absl_logging.set_verbosity(absl_logging.WARNING)
    try:
      return main(argv)
    except SystemExit:
      raise
    except KeyboardInterrupt:
      if verbose():
        traceback.print_exc()
      return fail("interrupted (Ctrl-C)", 130)
    except app.UsageError as e:
      return fail(f"{e} (--helpshort lists the flags)")
    except Exception as e:  # pylint: disable=broad-except
      if verbose():
        traceback.print_exc()
      return fail(error_text.one_line(e))

  guarded.__name__ = getattr(main, "__name__", "main")
  guarded.__doc__ = main.__doc__
  return guarded


def run(main: Callable[[list[str]], int | None]) -> None:
  """absl's `app.run` of `main` with one-line errors (see the module docstring); no return."""
  if main.__module__ != "__main__":
    # A console script (pyproject.toml): absl's --help lists the flags of sys.argv[0] (the
    # script), so the binary's own flags are made key flags of it.
    for flag in FLAGS.get_flags_for_module(main.__module__):
      FLAGS.register_key_flag_for_module(sys.argv[0], flag)
  app.run(guard(main), flags_parser=_parse_flags)


# The flags each binary defines ({module: {name: Flag}}: those absl attributes to the module,
# which options.define_flags does too), and the binary whose flags are defined now: `call`
# parks the others' (absl has one global FlagValues, and binaries share flag names such as
# --model_dir). Flags of library modules (cli's --verbose, absl's own) stay defined.
_BINARY_FLAGS: dict[str, dict] = {}
_active: list[str] = []


def _activate(module: str) -> None:
  """Makes `module`'s flags the defined ones (importing it on first use)."""
  if _active == [module]:
    return
  for name, defined in FLAGS.flags_by_module_dict().items():  # binaries imported, never called
    if (name not in _BINARY_FLAGS and name.startswith(("roberta_tf.", "data_prep."))
        and hasattr(sys.modules.get(name), "main")):
      _BINARY_FLAGS[name] = {f.name: f for f in defined}
  for name in [n for parked in _BINARY_FLAGS.values() for n in parked]:
    if name in FLAGS:
      delattr(FLAGS, name)
  if module not in _BINARY_FLAGS:
    imported = importlib.import_module(module)
    if not FLAGS.flags_by_module_dict().get(module) and hasattr(imported, "define_flags"):
      imported.define_flags()  # a binary that is a library too defines its flags on demand
    _BINARY_FLAGS[module] = {f.name: f for f in FLAGS.flags_by_module_dict().get(module, [])}
  for name, flag in _BINARY_FLAGS[module].items():
    if name not in FLAGS:
      FLAGS[name] = flag
  _active[:] = [module]


def call(module: str, argv: list[str]) -> tuple[int, str | None]:
  """Runs binary `module`'s `main` in this process with command-line arguments `argv` (as
  `python -m module *argv`, with the same one-line errors); returns (exit code, the last
  `error:` line it printed, or None). Flags start from their defaults on every call."""
  _activate(module)
  main = sys.modules[module].main
  FLAGS.unparse_flags()
  _last_error.clear()
  try:
    code = guard(main)(_parse_flags([module, *argv]))
  except SystemExit as e:
    code = e.code
    if isinstance(code, str):  # sys.exit("message"): Python prints it and exits 1
      print(code, file=sys.stderr, flush=True)
      _last_error.append(code)
      code = 1
  code = 0 if code is None else int(code)
  return code, (_last_error[-1] if _last_error and code else None)
