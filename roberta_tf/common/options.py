"""Options declared once: a dataclass field carries its default, its help, its choices and its
check, and the binary's absl flags are made from the fields.

    @dataclasses.dataclass
    class TrainConfig:
      model: ModelOptions = nested(ModelOptions)                 # a group: --model_dir, ...
      train_steps: int = option(1000, "Optimizer updates.", check=POSITIVE)
      masking: str = option("dynamic", "How tokens are masked.", choices=("dynamic", "static"))

    define_flags(TrainConfig, FLAGS)      # in the binary, at import: --model_dir, ...
    cfg = from_flags(TrainConfig, FLAGS)  # in main: the parsed values
    check_options(cfg)                    # in validate(): every option's choices and check

Options both binaries share (optimizer, runtime, loop cadence...) are declared once in
roberta_tf/common/option_groups.py, as frozen dataclasses that each config holds as a nested()
field (cfg.optimizer.clip_norm); an option of one binary only is a field declared in place with
`option()`. The flags stay flat (a group's options are flags under their own names), and so do
the names by which callers build and change a config: from_names(cls, {"clip_norm": 1.0, ...}),
replace_names(cfg, clip_norm=1.0) and names_of(cfg) route each name to its group.

A settings object may also hold fields that are no flags, declared with `setting()`: knobs of
the library's callers (tests, benchmarks) that define_flags and from_flags leave alone (from_flags
gives them their defaults).

An option without a default is a required flag (or, with define_flags(required=False), a flag
that defaults to None, which from_flags turns into ""). Field types (`str`, `int`, `float`,
`bool`, and `tuple[str, ...]` / `tuple[int, ...]` / `tuple[float, ...]` for comma-separated
list flags; annotation strings under `from __future__ import annotations`) pick the flag type;
`choices` makes a `str` field an enum flag; `repeated=True` makes a `tuple[str, ...]` field a
flag given once per item (`--arm=a --arm=b`); `int | None` is an integer flag whose unset value
is None (the caller's "not given"). TensorFlow-free: `--help` imports this.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from absl import flags

_DEFINE = {"str": flags.DEFINE_string, "int": flags.DEFINE_integer,
           "float": flags.DEFINE_float, "bool": flags.DEFINE_bool}
# List flags: "a,b,c" on the command line, a tuple of the item type in the config.
_LIST_ITEMS = {"tuple[str,...]": (str, "strings"), "tuple[int,...]": (int, "integers"),
               "tuple[float,...]": (float, "numbers")}


@dataclasses.dataclass(frozen=True)
class Check:
  """A field's own validation: `ok(value)` holds, else ValueError(message.format(name=the
  field's name, value=its value)), e.g. "--{name} must be > 0, got {value}"."""
  ok: Callable[[Any], bool]
  message: str


POSITIVE = Check(lambda v: v > 0, "--{name} must be > 0, got {value}")
NON_NEGATIVE = Check(lambda v: v >= 0, "--{name} must be >= 0, got {value}")
REQUIRED = Check(bool, "--{name} is required")


def at_least(bound) -> Check:
  return Check(lambda v: v >= bound, f"--{{name}} must be >= {bound}, got {{value}}")


def option(default: Any = dataclasses.MISSING, help: str = "",  # pylint: disable=redefined-builtin
           choices: tuple[str, ...] | None = None, check: Check | None = None,
           repeated: bool = False):
  """A dataclass field with its flag help (and enum choices, and its check). `repeated`: a
  `tuple[str, ...]` field's flag is given once per item instead of comma-separated."""
  return dataclasses.field(default=default, metadata={
      "help": help, "choices": choices, "check": check, "repeated": repeated})


def setting(default: Any, help: str):  # pylint: disable=redefined-builtin
  """A dataclass field that is no flag (see the module docstring): a library caller's knob."""
  return dataclasses.field(default=default, metadata={"help": help, "flag": False})


def flag_fields(cls) -> list[dataclasses.Field]:
  """The fields of dataclass `cls` that are flags (all but `setting()`s), in declaration order,
  a nested() group's offered options in its place."""
  return [f for _, f in option_fields(cls) if f.metadata.get("flag", True)]


def nested(group: type, omit: tuple[str, ...] = ()):
  """A dataclass field holding an option group: `group` is a frozen dataclass whose fields are
  options (option_groups.OptimizerOptions, ...). Each of its fields is an option of the
  enclosing dataclass under its own name (flags are one flat namespace: --clip_norm, not
  --optimizer.clip_norm), but those in `omit`: the binary does not offer them, they keep the
  group's defaults and are no names of the enclosing dataclass (from_names, names_of). A
  subclass of a group that redeclares a field must keep its annotation (TypeError). The field
  defaults to group() unless one of the group's fields has no default."""
  fields = {f.name: f for f in dataclasses.fields(group)}
  unknown = sorted(set(omit) - set(fields))
  if unknown:
    raise ValueError(f"omit={unknown}: not options of {group.__name__}")
  for base in group.__mro__[1:]:
    for f in dataclasses.fields(base) if dataclasses.is_dataclass(base) else ():
      if _type(fields[f.name]) != _type(f):
        raise TypeError(f"{group.__name__}.{f.name} is annotated {_type(fields[f.name])}; "
                        f"{base.__name__} declares {_type(f)}")
  required = any(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                 for f in fields.values())
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


def names_of(config) -> dict[str, Any]:
  """{option name: value} of dataclass instance `config`, its nested() groups' offered options
  among its own fields (declaration order): the flat names of its flags."""
  return {f.name: _value(config, group, f) for group, f in option_fields(type(config))}


def _value(config, group: str | None, f: dataclasses.Field):
  """The value of option `f` (option_fields' pair with `group`) in instance `config`."""
  return getattr(getattr(config, group) if group else config, f.name)


def _arguments(cls, values: dict[str, Any], current=None) -> dict[str, Any]:
  """The keyword arguments of dataclass `cls` (or of dataclasses.replace on `current`, an
  instance) for `values` ({option name: value}): a nested() group's options become its group
  (built on `values`' or `current`'s group, else new). ValueError naming the unknown names."""
  route = {f.name: group for group, f in option_fields(cls)}
  groups = {f.name: f for f in dataclasses.fields(cls) if "nested" in f.metadata}
  unknown = sorted(set(values) - set(route) - set(groups))
  if unknown:
    raise ValueError(f"{cls.__name__} has no option {', '.join(unknown)}")
  arguments = {k: v for k, v in values.items() if route.get(k) is None}
  for name, f in groups.items():
    mine = {k: v for k, v in values.items() if route.get(k) == name}
    base = arguments.get(name, getattr(current, name, None))
    if base is not None and mine:
      arguments[name] = dataclasses.replace(base, **mine)
    elif base is None and (mine or f.default_factory is dataclasses.MISSING):
      arguments[name] = f.metadata["nested"](**mine)  # TypeError naming a missing option
  return arguments


def from_names(cls, values: dict[str, Any]):
  """An instance of dataclass `cls` from {option name: value} (names_of's): an option of a
  nested() group goes to its group (a group's own field name takes a whole group); an option
  not given keeps its default. ValueError naming the names that are no option of `cls`."""
  return cls(**_arguments(cls, values))


def replace_names(config, **values):
  """dataclasses.replace(config, ...) by option names, routed to their nested() groups as
  from_names does."""
  return dataclasses.replace(config, **_arguments(type(config), values, config))


def _type(f: dataclasses.Field) -> str:
  """The field's annotation as a string: "int", "tuple[int,...]"."""
  return f.type.__name__ if isinstance(f.type, type) else str(f.type).replace(" ", "")


def define_flags(cls, flag_values: flags.FlagValues, required: bool = True) -> None:
  """Defines one absl flag per field of dataclass `cls` but its `setting()`s (see the module
  docstring) in `flag_values`, the FlagValues of the binary that owns them (common/cli.py's
  binary_flags()).
  required=False: a field without a default is a flag defaulting to None, not a required flag
  (the config's validate() says what is missing, so that a mode like finetune's --export_only
  can do without it)."""
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


def from_flags(cls, flag_values: flags.FlagValues):
  """An instance of `cls` from the parsed flags of its fields: list flags become tuples of
  their item type (ValueError naming the flag when an item is not one), an unset flag of a
  field without a default ""; a `setting()` keeps its default."""
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
  return from_names(cls, values)


def _choice_error(f: dataclasses.Field, value) -> str | None:
  choices = f.metadata.get("choices")
  if not choices or value in choices:
    return None
  listed = ", ".join(c for c in choices if c)  # "" (an optional enum's unset) goes unsaid
  return f"--{f.name}={value!r}: expected one of {listed}"


def check_options(config) -> None:
  """Raises ValueError naming the flag for the first option, in declaration order (a nested()
  group's in its place), whose value is not one of its choices or fails its check."""
  for group, f in option_fields(type(config)):
    value, check = _value(config, group, f), f.metadata.get("check")
    error = _choice_error(f, value)
    if error:
      raise ValueError(error)
    if check is not None and not check.ok(value):
      raise ValueError(check.message.format(name=f.name, value=value))
