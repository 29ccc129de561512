"""Options declared once: every binary's flags are the fields of a dataclass (its settings
object), each declared with option(): default (none: required), help, and checks.

    @dataclasses.dataclass(frozen=True)
    class ExportSettings:
      model_dir: str = option(help="Model dir.", path=True)
      top_k: int = option(5, "Predictions per <mask>.", check=POSITIVE)
      precision: str = option("float32", "Serving precision.", choices=("float32", "bfloat16"))

    FLAGS = cli.binary_flags()
    define_flags(ExportSettings, FLAGS)              # at import: --model_dir, --top_k, ...
    def main(argv):
      settings = from_flags(ExportSettings, FLAGS)   # the parsed values, each check run

check_options (from_flags, a config's validate()) runs the checks, one message per kind, a
ValueError naming the flag (cli's one error line): required `--x is required`; choices
`--x='v': expected one of a, b`; a Range (POSITIVE, NON_NEGATIVE, FRACTION, at_least(n))
`--x must be > 0, got v`; path=True: files.check on each comma-separated part
(`--x=nope://y: ...`). None (an unset `X | None`) is not checked. What depends on several
options is the settings object's validate().

Types pick the flag: `str`, `int`, `float`, `bool`; `tuple[str|int|float, ...]` comma lists
(repeated=True: a `tuple[str, ...]` given once per item, `--arm=a --arm=b`); `X | None` an X
flag unset as None. define_flags(required=False): an option without a default is a flag
defaulting to None (from_flags: "") for a binary with a mode that does without it.

Options several settings share come in groups (common/option_groups.py): a frozen dataclass
held as a nested() field (cfg.optimizer.clip_norm) whose options stay flat flags; a
GroupedConfig is built and changed by those flat names; redeclare() changes a group's option
for one binary. A setting() field is no flag (a knob of tests and benchmarks).
TensorFlow-free: `--help` imports this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from absl import flags

from roberta_tf.common import files

_DEFINE = {"str": flags.DEFINE_string, "int": flags.DEFINE_integer,
           "float": flags.DEFINE_float, "bool": flags.DEFINE_bool}
# List flags: "a,b,c" on the command line, a tuple of the item type in the settings.
_LIST_ITEMS = {"tuple[str,...]": (str, "strings"), "tuple[int,...]": (int, "integers"),
               "tuple[float,...]": (float, "numbers")}
_DECLARED = ("help", "choices", "check", "path", "repeated")


@dataclasses.dataclass(frozen=True)
class Range:
  """A range check: `ok(value)` holds, else "--{name} must be {says}, got {value}"."""
  ok: Callable[[Any], bool]
  says: str


POSITIVE = Range(lambda v: v > 0, "> 0")
NON_NEGATIVE = Range(lambda v: v >= 0, ">= 0")
FRACTION = Range(lambda v: 0 <= v < 1, "in [0, 1)")


def at_least(bound) -> Range:
  return Range(lambda v: v >= bound, f">= {bound}")


def option(default: Any = dataclasses.MISSING, help: str = "",  # pylint: disable=redefined-builtin
           *, choices: tuple[str, ...] | None = None, check: Range | None = None,
           path: bool = False, repeated: bool = False):
  """A dataclass field that is a flag: its default (none: required), help, and checks (see the
  module docstring)."""
  return dataclasses.field(default=default, metadata={
      "help": help, "choices": choices, "check": check, "path": path, "repeated": repeated})


def setting(default: Any, help: str):  # pylint: disable=redefined-builtin
  """A dataclass field that is no flag (see the module docstring): a library caller's knob."""
  return dataclasses.field(default=default, metadata={"help": help, "flag": False})


def redeclare(group: type, name: str, **changes):
  """Option `name` of `group` as declared there but for `changes` (default=, help=, choices=,
  check=, path=; check=None drops the check): the field by which a subclass of the group says
  what differs for its binary (a redeclared field keeps the group's annotation)."""
  declared = {f.name: f for f in dataclasses.fields(group)}[name]
  unknown = sorted(set(changes) - {"default", *_DECLARED})
  if unknown:
    raise TypeError(f"redeclare({group.__name__}, {name!r}): no such attribute {unknown}")
  values = {"default": declared.default, **{k: declared.metadata[k] for k in _DECLARED}}
  return option(**{**values, **changes})


def nested(group: type, omit: tuple[str, ...] = ()):
  """A field holding an option group (a frozen dataclass of options): each of its options is an
  option of the enclosing dataclass under its own name (flags are one flat namespace), but
  those in `omit`: the binary does not offer them, they keep the group's defaults. The field
  defaults to group() unless one of the group's options has no default."""
  fields = {f.name: f for f in dataclasses.fields(group)}
  unknown = sorted(set(omit) - set(fields))
  if unknown:
    raise ValueError(f"omit={unknown}: not options of {group.__name__}")
  for base in group.__mro__[1:]:
    for f in dataclasses.fields(base) if dataclasses.is_dataclass(base) else ():
      if _type(fields[f.name]) != _type(f):
        raise TypeError(f"{group.__name__}.{f.name} is annotated {_type(fields[f.name])}; "
                        f"{base.__name__} declares {_type(f)}")
  required = any(f.default is dataclasses.MISSING for f in fields.values())
  return dataclasses.field(metadata={"nested": group, "omit": tuple(omit)},
                           **({} if required else {"default_factory": group}))


def option_fields(cls) -> list[tuple[str | None, dataclasses.Field]]:
  """Every option of dataclass `cls` in declaration order, each nested() group's offered ones in
  its place: (the group's field name, or None for a field of cls itself; the option's field).
  ValueError when two options share a name."""
  found = []
  for f in dataclasses.fields(cls):
    group = f.metadata.get("nested")
    if group is None:
      found.append((None, f))
    else:
      found += [(f.name, g) for g in dataclasses.fields(group)
                if g.name not in f.metadata["omit"]]
  names = [f.name for _, f in found]
  repeated = sorted({n for n in names if names.count(n) > 1})
  if repeated:
    raise ValueError(f"{cls.__name__}: options {repeated} are declared twice")
  return found


def flag_fields(cls) -> list[dataclasses.Field]:
  """The options of dataclass `cls` that are flags (all but its setting()s), in order."""
  return [f for _, f in option_fields(cls) if f.metadata.get("flag", True)]


def _type(f: dataclasses.Field) -> str:
  """The field's annotation as a string: "int", "tuple[int,...]", "int|None"."""
  return f.type.__name__ if isinstance(f.type, type) else str(f.type).replace(" ", "")


def _arguments(cls, values: dict[str, Any], current=None) -> dict[str, Any]:
  """The keyword arguments of dataclass `cls` (or of dataclasses.replace on `current`, an
  instance) for `values` ({option name: value}): a nested() group's options become its group
  (built on `values`' or `current`'s group, else new). ValueError naming the unknown names."""
  route = {f.name: group for group, f in option_fields(cls)}
  groups = {f.name: f for f in dataclasses.fields(cls) if "nested" in f.metadata}
  unknown = sorted(set(values) - set(route) - set(groups))
  if unknown:
    raise ValueError(f"{cls.__name__} has no option {', '.join(unknown)}")
  # A group's field name may also be an option's (train's --optimizer in the "optimizer"
  # group): a group instance given under it is the whole group, any other value the option.
  whole = {k for k, v in values.items() if k in groups and dataclasses.is_dataclass(v)}
  arguments = {k: v for k, v in values.items() if k in whole or route.get(k) is None}
  for name, f in groups.items():
    mine = {k: v for k, v in values.items() if route.get(k) == name and k not in whole}
    base = arguments.get(name, getattr(current, name, None))
    if base is not None and mine:
      arguments[name] = dataclasses.replace(base, **mine)
    elif base is None and (mine or f.default_factory is dataclasses.MISSING):
      arguments[name] = f.metadata["nested"](**mine)  # TypeError naming a missing option
  return arguments


class GroupedConfig:
  """A settings object with nested() groups, named flat by its options' (flags') names."""

  @classmethod
  def from_dict(cls, values: dict[str, Any], *, ignore_unknown: bool = False):
    """The config of {option name: value} (a caller's, to_dict's, config.json's "training"): an
    option of a group goes to its group; one not given keeps its default. ValueError naming a
    name that is no option, unless ignore_unknown (a record may hold an option since removed)."""
    if ignore_unknown:
      known = {f.name for _, f in option_fields(cls)}
      values = {k: v for k, v in values.items() if k in known}
    return cls(**_arguments(cls, values))

  def to_dict(self) -> dict[str, Any]:
    """{option name: value} of every option offered (its flags), lists for tuples: the flat
    record config.json's "training" and sweep.json keep (from_dict reads it back)."""
    values = {f.name: _value(self, group, f) for group, f in option_fields(type(self))}
    return {k: list(v) if isinstance(v, tuple) else v for k, v in values.items()}

  def replace(self, **values):
    """A copy with the options named changed (`cfg.replace(learning_rate=1e-4, seed=1)`),
    each routed to its group; ValueError naming a name that is no option."""
    return dataclasses.replace(self, **_arguments(type(self), values, self))


def _value(config, group: str | None, f: dataclasses.Field):
  """The value of option `f` (option_fields' pair with `group`) in instance `config`."""
  return getattr(getattr(config, group) if group else config, f.name)


def define_flags(cls, flag_values: flags.FlagValues, required: bool = True) -> None:
  """Defines one absl flag per option of dataclass `cls` (but its setting()s) in `flag_values`,
  the binary's FlagValues (common/cli.py's binary_flags()). required=False: an option without a
  default is a flag defaulting to None, not a required flag."""
  required_names = []
  for f in flag_fields(cls):
    help_text, choices = f.metadata.get("help"), f.metadata.get("choices")
    if not help_text:
      raise ValueError(f"{cls.__name__}.{f.name} has no help text: declare it with option()")
    default = None if f.default is dataclasses.MISSING else f.default
    if f.default is dataclasses.MISSING and required:
      required_names.append(f.name)
    kwargs = dict(flag_values=flag_values)
    if choices:
      flags.DEFINE_enum(f.name, default, list(choices), help_text, **kwargs)
    elif f.metadata.get("repeated"):
      if _type(f) != "tuple[str,...]":
        raise TypeError(f"{cls.__name__}.{f.name}: a repeated flag is a tuple[str, ...]")
      flags.DEFINE_multi_string(f.name, list(default), help_text, **kwargs)
    elif _type(f) in _LIST_ITEMS:
      # Items as they are typed on the command line ("0", not 0): --help shows them so.
      flags.DEFINE_list(f.name, None if default is None else [str(v) for v in default],
                        help_text, **kwargs)
    else:
      _DEFINE[_type(f).removesuffix("|None")](f.name, default, help_text, **kwargs)
  flags.mark_flags_as_required(required_names, flag_values=flag_values)


def from_flags(cls, flag_values: flags.FlagValues, required: bool = True):
  """An instance of `cls` from the parsed flags of its options, checked (check_options with
  `required`): list flags become tuples of their item type (ValueError naming the flag when an
  item is not one), an unset flag of an option without a default ""; a setting() keeps its
  default."""
  values = {}
  for f in flag_fields(cls):
    value = flag_values[f.name].value
    if value is None and f.default is dataclasses.MISSING:
      value = ""
    elif f.metadata.get("repeated"):
      value = tuple(value)
    elif _type(f) in _LIST_ITEMS and value is not None:
      item, kind = _LIST_ITEMS[_type(f)]
      try:
        value = tuple(item(v) for v in value)
      except ValueError as e:
        raise ValueError(f"--{f.name}={','.join(value)}: not a list of {kind}") from e
    values[f.name] = value
  config = cls(**_arguments(cls, values))
  check_options(config, required)
  return config


def check_options(config, required: bool = True) -> None:
  """Raises ValueError naming the flag for the first option, in declaration order (a nested()
  group's in its place), that fails one of its checks (the module docstring's kinds and
  messages). required=False: an option without a default may be unset ("", ()): it is then
  not checked (the caller says what its mode needs)."""
  for group, f in option_fields(type(config)):
    value, name, meta = _value(config, group, f), f.name, f.metadata
    if f.default is dataclasses.MISSING and value in ("", ()):
      if required:
        raise ValueError(f"--{name} is required")
      continue
    if value is None:
      continue
    choices, check = meta.get("choices"), meta.get("check")
    if choices and value not in choices:  # "" (an optional enum's unset) goes unsaid
      raise ValueError(f"--{name}={value!r}: expected one of "
                       f"{', '.join(c for c in choices if c)}")
    if check is not None and not check.ok(value):
      raise ValueError(f"--{name} must be {check.says}, got {value}")
    for part in value.split(",") if meta.get("path") else ():
      if part.strip():
        files.check(part.strip(), f"--{name}")
