"""The docs stay true and readable: docs/design.md's picture of who builds what names only what
exists in roberta_tf/ (a renamed or removed one fails here until the picture follows); README.md's
lines fit 120 characters."""

import ast
import os
import re

from tests.conftest import REPO

HEADING = 'Who builds what'


def _picture() -> str:
  with open(os.path.join(REPO, "docs", "design.md"), encoding="utf-8") as f:
    text = f.read()
  start = text.index(HEADING)
  block = re.search(r"```\n(.*?)```", text[start:], re.S)
  assert block, f"no code block after {HEADING!r} in docs/design.md"
  return block.group(1)


def _defined() -> tuple[set[str], dict[str, set[str]]]:
  """(every class, function and module name in roberta_tf/, {module name: its top names})."""
  names, modules = set(), {}
  for folder, _, files in os.walk(os.path.join(REPO, "roberta_tf")):
    for name in files:
      if not name.endswith(".py"):
        continue
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        tree = ast.parse(f.read())
      defs = {n.name for n in ast.walk(tree)
              if isinstance(n, (ast.FunctionDef, ast.ClassDef, ast.AsyncFunctionDef))}
      module = name[:-3]
      names |= defs | {module}
      modules.setdefault(module, set()).update(defs)
  return names, modules


def named_in(picture: str) -> tuple[set[str], set[tuple[str, str]]]:
  """(names the picture uses as code: CamelCase, with an underscore, or called; (module, name)
  pairs written module.name)."""
  dotted = {(m, n) for m, n in re.findall(r"\b([a-z_]+)\.([A-Za-z_]\w*)", picture) if n != "py"}
  words = set()
  for m in re.finditer(r"(?<![.\w])([A-Za-z_]\w*)(\()?", picture):
    word, called = m.group(1), m.group(2)
    if re.fullmatch(r"[A-Z][a-z]+[A-Za-z]*", word) or "_" in word or called:
      words.add(word)
  return words, dotted


def test_every_name_in_the_picture_exists():
  names, modules = _defined()
  words, dotted = named_in(_picture())
  assert len(words) > 20, words
  missing = sorted(w for w in words if w not in names)
  missing += [f"{m}.{n}" for m, n in sorted(dotted) if m in modules and n not in modules[m]]
  assert not missing, f"docs/design.md's picture names what roberta_tf/ does not have: {missing}"


def test_the_check_finds_a_stale_name():
  names, _ = _defined()
  words, _ = named_in("PretrainingTask(cfg) ──► OldTask  build_old_thing(x)")
  assert sorted(w for w in words if w not in names) == ["OldTask", "build_old_thing"]


def test_readme_lines_fit_120_characters():
  """Every README.md line is at most 120 characters (tables with long cells are lists), except
  the two fenced setup commands (A) and (B): each stays one line, to be copied whole."""
  with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
    lines = f.read().splitlines()
  setup = [i for i, line in enumerate(lines)
           if line.startswith("python3.11 -m venv .venv && ") and lines[i - 1] == "```bash"]
  assert len(setup) == 2, f"the setup commands (A) and (B) are not fenced one-liners: {setup}"
  wide = [f"README.md:{i + 1}: {len(line)} characters" for i, line in enumerate(lines)
          if len(line) > 120 and i not in setup]
  assert not wide, "README lines over 120 characters:\n" + "\n".join(wide)
