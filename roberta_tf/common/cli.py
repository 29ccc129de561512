"""The one way a binary runs: its own flags, a quiet start, and a failure as ONE line on stderr.

A binary (roberta_tf/*.py, data_prep's) defines its flags into a FlagValues of its own and
hands it, with its `main`, to `run` (instead of absl's `app.run`):

    FLAGS = cli.binary_flags()                           # this binary's flags, --verbose in
    options.define_flags(TrainConfig, FLAGS)             # a settings object's options, a flag each

    def main(argv): cfg = options.from_flags(TrainConfig, FLAGS) ...

    def console_main():
      cli.run(main, FLAGS)                               # instead of absl's app.run(main)

- `run(main, FLAGS)` in a process of its own: the binary's flags join absl's global FLAGS
  (where absl's --help, --flagfile and logging flags live; one binary per process, so binaries
  that share flag names such as --model_dir never meet there) as flags of the main module, so
  --help lists them; then absl parses the command line. TensorFlow's start-up chatter is
  turned off first (common/quiet_start.py's `install`, unless ROBERTA_TF_VERBOSE=1): `run` is
  the binary's process, so this is its decision, never a side effect of importing a module.
  It works because a binary's module imports no TensorFlow (its `main` does;
  tests/test_import_side_effects.py checks every binary). absl's Python logging shows warnings
  and errors (unless --verbosity).
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
own (`run`). Nor does it quiet TensorFlow: the calling process is not the binary's.
"""

from __future__ import annotations

import importlib
import sys
import traceback
from collections.abc import Callable

from absl import app, flags
from absl import logging as absl_logging

from roberta_tf.common import error_text, quiet_start

# The flags every binary's FlagValues starts with (cli's own; listed under this module in
# --helpfull).
_CLI_FLAGS = ("verbose",)


# --- A binary's flags and its one error line --------------------------------------------------


def binary_flags() -> flags.FlagValues:
  """A new FlagValues for one binary's flags, holding cli's --verbose; the binary defines its
  own flags into it (flag_values=) and passes it to `run`, and `call` parses it."""
  flag_values = flags.FlagValues()
  flags.DEFINE_bool("verbose", False, "On an error, also print the full traceback (or set "
                    f"{quiet_start.VERBOSE_ENV}=1).", flag_values=flag_values, module_name=__name__)
  return flag_values


def verbose(flag_values: flags.FlagValues) -> bool:
  """--verbose or ROBERTA_TF_VERBOSE=1 (the environment works before flags are parsed too)."""
  return quiet_start.verbose_env() or (flag_values.is_parsed() and flag_values.verbose)


def _say(message: str) -> str:
  """Prints `error: <message>` (one line) to stderr; returns that line."""
  line = f"error: {' '.join(str(message).split())}"
  print(line, file=sys.stderr, flush=True)
  return line


def _flag_error(e: flags.Error) -> str:
  return f"{str(e).replace('ERROR:: ', '')} (--helpshort lists the flags)"


def _outcome(main: Callable[[list[str]], int | None], flag_values: flags.FlagValues,
             argv: list[str]) -> tuple[int, str | None]:
  """Runs `main(argv)`: (its exit code, None), or for an exception (1, its one-line message;
  130 for Ctrl-C), the traceback printed first with --verbose. SystemExit passes through."""
  if not verbose(flag_values) and not flags.FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.WARNING)
  try:
    code = main(argv)
    return (0 if code is None else int(code)), None
  except SystemExit:
    raise
  except KeyboardInterrupt:
    if verbose(flag_values):
      traceback.print_exc()
    return 130, "interrupted (Ctrl-C)"
  except app.UsageError as e:
    return 1, f"{e} (--helpshort lists the flags)"
  except Exception as e:  # pylint: disable=broad-except
    if verbose(flag_values):
      traceback.print_exc()
    return 1, error_text.one_line(e)


# --- Running a binary: in a process of its own, or called in this one -------------------------


def run(main: Callable[[list[str]], int | None], flag_values: flags.FlagValues) -> None:
  """The binary's process: absl's `app.run` of `main` with its flags `flag_values` and
  one-line errors (see the module docstring); no return."""
  quiet_start.install()  # before anything can import TensorFlow: this process is the binary's
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
    try:
      remaining = global_flags(argv)
    except flags.Error as e:
      _say(_flag_error(e))
      sys.exit(1)
    flag_values.mark_as_parsed()
    return remaining

  def guarded(argv):
    code, message = _outcome(main, flag_values, argv)
    if message:
      _say(message)
    return code

  guarded.__name__ = getattr(main, "__name__", "main")
  guarded.__doc__ = main.__doc__
  app.run(guarded, flags_parser=parse)


def call(module: str, argv: list[str]) -> tuple[int, str | None]:
  """Runs binary `module`'s `main` in this process with command-line arguments `argv` (as
  `python -m module *argv`, with the same one-line errors); returns (exit code, the `error:`
  line it printed, or None). The module's `FLAGS` (from `binary_flags`) start from their
  defaults on every call; absl's global FLAGS are not used."""
  binary = importlib.import_module(module)
  flag_values = binary.FLAGS
  flag_values.unparse_flags()
  try:
    code, message = _outcome(binary.main, flag_values, flag_values([module, *argv]))
  except flags.Error as e:
    code, message = 1, _flag_error(e)
  except SystemExit as e:
    code, message = e.code, None
    if isinstance(code, str):  # sys.exit("message"): Python prints it and exits 1
      code, message = 1, code
  code = 0 if code is None else int(code)
  if message is None or not code:
    return code, None
  return code, _say(message)
