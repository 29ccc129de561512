"""Options declared once: a dataclass field carries its default, its help and its choices, and
the binary's absl flags are made from the fields.

    @dataclasses.dataclass
    class TrainConfig:
      model_dir: str = option(help="Where checkpoints go.")             # required flag
      learning_rate: float = option(6e-4, "Peak learning rate.")
      precision: str = option("float32", "Compute precision.", choices=("float32", ...))

    define_flags(TrainConfig)            # in the binary, at import: --model_dir, --learning_rate...
    cfg = from_flags(TrainConfig)        # in main: the parsed values

A field without a default is a required flag. Field types (`str`, `int`, `float`, `bool`, as
annotation strings under `from __future__ import annotations`) pick the flag type; `choices`
makes a `str` field an enum flag.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from absl import flags

_DEFINE = {"str": flags.DEFINE_string, "int": flags.DEFINE_integer,
           "float": flags.DEFINE_float, "bool": flags.DEFINE_bool}


def option(default: Any = dataclasses.MISSING, help: str = "",  # pylint: disable=redefined-builtin
           choices: tuple[str, ...] | None = None):
  """A dataclass field with its flag help (and enum choices)."""
  return dataclasses.field(default=default, metadata={"help": help, "choices": choices})


def define_flags(cls, flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines one absl flag per field of dataclass `cls` (see the module docstring), as flags
  of the calling module (so the binary's --help lists them)."""
  caller = sys._getframe(1).f_globals["__name__"]  # pylint: disable=protected-access
  module_name = sys.argv[0] if caller == "__main__" else caller  # absl's name for __main__
  required = []
  for f in dataclasses.fields(cls):
    help_text, choices = f.metadata.get("help"), f.metadata.get("choices")
    if not help_text:
      raise ValueError(f"{cls.__name__}.{f.name} has no help text: declare it with option()")
    default = None if f.default is dataclasses.MISSING else f.default
    if f.default is dataclasses.MISSING:
      required.append(f.name)
    if choices:
      flags.DEFINE_enum(f.name, default, list(choices), help_text, flag_values=flag_values,
                        module_name=module_name)
    else:
      _DEFINE[str(f.type)](f.name, default, help_text, flag_values=flag_values,
                           module_name=module_name)
  flags.mark_flags_as_required(required, flag_values=flag_values)


def from_flags(cls, flag_values: flags.FlagValues = flags.FLAGS):
  """An instance of `cls` from the parsed flags of its fields."""
  return cls(**{f.name: flag_values[f.name].value for f in dataclasses.fields(cls)})


def check_choices(config) -> None:
  """Raises ValueError naming the flag when a field with choices holds another value (a config
  built in code, not from flags)."""
  for f in dataclasses.fields(config):
    choices, value = f.metadata.get("choices"), getattr(config, f.name)
    if choices and value not in choices:
      raise ValueError(f"--{f.name}={value!r}: expected one of {', '.join(choices)}")
