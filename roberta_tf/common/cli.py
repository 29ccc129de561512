"""The one way a binary runs: a quiet start, and a failure as ONE line on stderr.

Every binary (roberta_tf/*.py, data_prep's) calls `cli.run` on its `main` instead of absl's
`app.run` and imports this module before anything that imports TensorFlow:

- TensorFlow's C++ start-up chatter is off (TF_CPP_MIN_LOG_LEVEL=2 unless already set: it is
  read when TF loads) and absl's Python logging shows warnings and errors (unless --verbosity).
- A flag error (an unknown flag, a missing required one, an unreadable --flagfile) and an
  `app.UsageError` are one line: `error: ...`, exit code 1.
- Any exception out of `main` is one line, `error: <error_text.one_line(e)>`, exit code 1
  (Ctrl-C: 130). The project's errors name the flag or file and what to do; the traceback is
  printed only with `--verbose` or ROBERTA_TF_VERBOSE=1.

So a test (or a script) can rely on: rc != 0 and exactly one stderr line starting `error:` (TF
may still print its unsuppressible `cuInit`/absl-init lines on machines without a GPU).
"""

from __future__ import annotations

import os
import sys
import traceback
from collections.abc import Callable

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

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


def fail(message: str, code: int = 1) -> int:
  """Prints `error: <message>` (one line) to stderr; returns the exit code for main."""
  print(f"error: {' '.join(str(message).split())}", file=sys.stderr, flush=True)
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
