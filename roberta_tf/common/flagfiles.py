"""The absl flagfiles (`roberta_tf/flags/<name>.flags`), where an installed package has them.

They are package data, so `pip install .` ships them; the repository's `flags/` holds a symlink
to each, so `--flagfile=flags/<name>.flags` works from the repository root as documented. From
an installed package: `--flagfile=$(python -m roberta_tf.common.flagfiles small)`.
"""

from __future__ import annotations

import importlib.resources
import sys

SUFFIX = ".flags"


def names() -> list[str]:
  """The flagfiles shipped, without the suffix (tiny, small, ..., quickstart)."""
  folder = importlib.resources.files("roberta_tf") / "flags"
  return sorted(p.name[: -len(SUFFIX)] for p in folder.iterdir() if p.name.endswith(SUFFIX))


def path(name: str) -> str:
  """The path of flagfile `name` ("small" or "small.flags").

  Raises:
    FileNotFoundError: naming the flagfiles there are.
  """
  name = name.removesuffix(SUFFIX)
  found = importlib.resources.files("roberta_tf") / "flags" / f"{name}{SUFFIX}"
  if not found.is_file():
    raise FileNotFoundError(f"no flagfile {name!r}; the package ships {', '.join(names())}")
  return str(found)


if __name__ == "__main__":
  try:
    print(path(sys.argv[1]) if len(sys.argv) == 2 else "\n".join(names()))
  except FileNotFoundError as e:
    sys.exit(f"error: {e}")
