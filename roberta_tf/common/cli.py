"""The one way a binary runs: its own flags, a quiet start, and a failure as ONE line on stderr.

A binary (roberta_tf/*.py, data_prep's) defines its flags into a FlagValues of its own and
hands it, with its `main`, to `run` (instead of absl's `app.run`):

    FLAGS = cli.binary_flags()                           # this binary's flags, --verbose in
    flags.DEFINE_string("model_dir", None, "...", flag_values=FLAGS)
    options.define_flags(TrainConfig, FLAGS)             # or a config's fields, one flag each

    def main(argv): ... FLAGS.model_dir ...

    def console_main():
      cli.run(main, FLAGS)                               # instead of absl's app.run(main)

- `run(main, FLAGS)` in a process of its own: `quiet_tensorflow_import()`, then the binary's
  flags join absl's global FLAGS (where absl's --help, --flagfile and logging flags live; one
  binary per process, so binaries that share flag names such as --model_dir never meet there)
  as flags of the main module, so --help lists them; then absl parses the command line.
- `quiet_tensorflow_import()`: TensorFlow's C++ start-up chatter is off. TF_CPP_MIN_LOG_LEVEL=3
  unless already set (read when TF loads; it silences what TF logs once running, the cuInit
  error on machines without a GPU included), and the lines TF prints while it is imported,
  before its logging reads that variable (absl's "All log messages before
  absl::InitializeLog()", the oneDNN notice, "Could not find cuda drivers"), are filtered out
  of stderr during the first `import tensorflow` (any other line printed then is passed on).
  No environment variable does this. `run` calls it before `main`; a binary whose imports load
  TensorFlow calls it first thing, before those imports. TF_CPP_MIN_LOG_LEVEL=0 (or 1) or
  ROBERTA_TF_VERBOSE=1 shows everything again. absl's Python logging shows warnings and errors
  (unless --verbosity).
- A flag error (an unknown flag, a missing required one, an unreadable --flagfile) and an
  `app.UsageError` are one line: `error: ...`, exit code 1.
- Any exception out of `main` is one line, `error: <error_text.one_line(e)>`, exit code 1
  (Ctrl-C: 130). The project's errors name the flag or file and what to do; the traceback is
  printed only with `--verbose` or ROBERTA_TF_VERBOSE=1.

So a test (or a script) can rely on: rc != 0 and exactly one stderr line starting `error:`, and
a binary's output is its own lines only.

`call(module, argv)` runs binary `module`'s `main` in this process, as `python -m module argv...`
would, and returns (exit code, its one error line or None): the tests call binaries this way
without a new interpreter and TensorFlow import per case, and the binaries count in the coverage
figure. It parses argv into the binary's own `FLAGS` (reset to their defaults first) and never
touches absl's global FLAGS, so absl's own flags (--help, --verbosity) need a process of their
own (`run`).
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

from absl import app, flags
from absl import logging as absl_logging

from roberta_tf.common import error_text

VERBOSE_ENV = "ROBERTA_TF_VERBOSE"
# The flags every binary's FlagValues starts with (cli's own; listed under this module in
# --helpfull).
_CLI_FLAGS = ("verbose",)


def _verbose_env() -> bool:
  """ROBERTA_TF_VERBOSE is set to something other than "", 0, false or no."""
  return os.environ.get(VERBOSE_ENV, "").strip().lower() not in ("", "0", "false", "no")


# --- The quiet TensorFlow import ------------------------------------------------------------

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


def quiet_tensorflow_import() -> None:
  """Sets TF_CPP_MIN_LOG_LEVEL=3 unless set, and filters TensorFlow's import chatter from
  stderr when it is first imported (see the module docstring): an import hook on
  sys.meta_path that removes itself at that import. Does nothing more once TensorFlow is
  imported, when the hook is in place, or when TF's logs are wanted (TF_CPP_MIN_LOG_LEVEL < 2
  or ROBERTA_TF_VERBOSE=1)."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  try:
    level = int(os.environ["TF_CPP_MIN_LOG_LEVEL"])
  except ValueError:
    level = 3
  if ("tensorflow" in sys.modules or level < 2 or _verbose_env()
      or any(isinstance(f, _QuietTensorFlowImport) for f in sys.meta_path)):
    return
  sys.meta_path.insert(0, _QuietTensorFlowImport())


# --- A binary's flags and its one error line --------------------------------------------------


def binary_flags() -> flags.FlagValues:
  """A new FlagValues for one binary's flags, holding cli's --verbose; the binary defines its
  own flags into it (flag_values=) and passes it to `run`, and `call` parses it."""
  flag_values = flags.FlagValues()
  flags.DEFINE_bool("verbose", False, "On an error, also print the full traceback (or set "
                    f"{VERBOSE_ENV}=1).", flag_values=flag_values, module_name=__name__)
  return flag_values


def verbose(flag_values: flags.FlagValues) -> bool:
  """--verbose or ROBERTA_TF_VERBOSE=1 (the environment works before flags are parsed too)."""
  return _verbose_env() or (flag_values.is_parsed() and flag_values.verbose)


_last_error: list[str] = []  # the error lines `fail` printed during a `call`


def fail(message: str, code: int = 1) -> int:
  """Prints `error: <message>` (one line) to stderr; returns the exit code for main."""
  line = f"error: {' '.join(str(message).split())}"
  _last_error.append(line)
  print(line, file=sys.stderr, flush=True)
  return code


def _parse(flag_values: flags.FlagValues, argv: list[str]) -> list[str]:
  """flag_values(argv), a flag error being one `error:` line and exit code 1."""
  try:
    return flag_values(argv)
  except flags.Error as e:
    text = str(e).replace("ERROR:: ", "")
    sys.exit(fail(f"{text} (--helpshort lists the flags)"))


def _guard(main: Callable[[list[str]], int | None],
           flag_values: flags.FlagValues) -> Callable[[list[str]], int | None]:
  """`main` with every exception turned into one `error:` line and exit code 1 (130: Ctrl-C)."""

  def guarded(argv):
    if not verbose(flag_values) and not flags.FLAGS["verbosity"].present:
      absl_logging.set_verbosity(absl_logging.WARNING)
    try:
      return main(argv)
    except SystemExit:
      raise
    except KeyboardInterrupt:
      if verbose(flag_values):
        traceback.print_exc()
      return fail("interrupted (Ctrl-C)", 130)
    except app.UsageError as e:
      return fail(f"{e} (--helpshort lists the flags)")
    except Exception as e:  # pylint: disable=broad-except
      if verbose(flag_values):
        traceback.print_exc()
      return fail(error_text.one_line(e))

  guarded.__name__ = getattr(main, "__name__", "main")
  guarded.__doc__ = main.__doc__
  return guarded


# --- Running a binary: in a process of its own, or called in this one -------------------------


def run(main: Callable[[list[str]], int | None], flag_values: flags.FlagValues) -> None:
  """The binary's process: absl's `app.run` of `main` with its flags `flag_values` and
  one-line errors (see the module docstring); no return."""
  quiet_tensorflow_import()
  # absl's --help lists the main module's flags (sys.argv[0]: `python -m`'s file or a console
  # script's); cli's own are listed under this module, as where they are defined.
  global_flags = flags.FLAGS
  global_flags.append_flag_values(flag_values)
  for name in flag_values:
    flag = flag_values[name]
    if name == flag.name:  # not a short name
      global_flags.register_flag_by_module(
          __name__ if name in _CLI_FLAGS else sys.argv[0], flag)

  def parse(argv):  # the Flag objects are shared: the binary's FLAGS read the parsed values
    remaining = _parse(global_flags, argv)
    flag_values.mark_as_parsed()
    return remaining

  app.run(_guard(main, flag_values), flags_parser=parse)


def call(module: str, argv: list[str]) -> tuple[int, str | None]:
  """Runs binary `module`'s `main` in this process with command-line arguments `argv` (as
  `python -m module *argv`, with the same one-line errors); returns (exit code, the last
  `error:` line it printed, or None). The module's `FLAGS` (from `binary_flags`) start from
  their defaults on every call; absl's global FLAGS are not used."""
  binary = importlib.import_module(module)
  flag_values = binary.FLAGS
  flag_values.unparse_flags()
  _last_error.clear()
  try:
    code = _guard(binary.main, flag_values)(_parse(flag_values, [module, *argv]))
  except SystemExit as e:
    code = e.code
    if isinstance(code, str):  # sys.exit("message"): Python prints it and exits 1
      print(code, file=sys.stderr, flush=True)
      _last_error.append(code)
      code = 1
  code = 0 if code is None else int(code)
  return code, (_last_error[-1] if _last_error and code else None)
