"""Every relative link in README.md and docs/*.md points at a file that exists and, with a
`#anchor`, at a heading of that file (GitHub's anchor rule: lower case, punctuation dropped,
spaces to hyphens); links inside code (blocks or `spans`) are not links."""

import glob
import os
import re

from tests.conftest import REPO

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def anchor(heading: str) -> str:
  """GitHub's anchor of a heading's text."""
  return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
  text = re.sub(r"```.*?```", "", text, flags=re.S)
  return {anchor(h) for h in re.findall(r"^#{1,6} (.*)$", text, flags=re.M)}


def broken_links(page: str, text: str, read) -> list[str]:
  """`page: target (why)` per broken relative link; `read(path)` gives a file's text or None."""
  broken = []
  prose = re.sub(r"`[^`\n]*`", "", re.sub(r"```.*?```", "", text, flags=re.S))
  for target in LINK.findall(prose):
    if re.match(r"[a-z]+:", target):
      continue  # https:, mailto:
    path, _, fragment = target.partition("#")
    resolved = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    body = read(resolved)
    if body is None:
      broken.append(f"{page}: {target} (no such file)")
    elif fragment and resolved.endswith(".md") and fragment not in anchors(body):
      broken.append(f"{page}: {target} (no such heading in {resolved})")
  return broken


def _read(relative: str):
  path = os.path.join(REPO, relative)
  if os.path.isdir(path):
    return ""
  if not os.path.isfile(path):
    return None
  with open(path, encoding="utf-8", errors="replace") as f:
    return f.read()


def test_every_relative_link_resolves():
  pages = ["README.md"] + sorted(os.path.relpath(p, REPO)
                                 for p in glob.glob(os.path.join(REPO, "docs", "*.md")))
  broken, count = [], 0
  for page in pages:
    text = _read(page)
    count += len(LINK.findall(text))
    broken += broken_links(page, text, _read)
  assert count > 50, count
  assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_check_finds_a_missing_file_and_heading():
  files = {"docs/a.md": "# A\n\n## The recipe, and where it lives\n", "README.md": ""}
  page = ("[ok](docs/a.md#the-recipe-and-where-it-lives) [gone](docs/b.md) "
          "[stale](docs/a.md#old-heading) [web](https://x.org/y#z) `f[0](x)`\n"
          "```\n[code](no.md)\n```")
  assert broken_links("README.md", page, files.get) == [
      "README.md: docs/b.md (no such file)",
      "README.md: docs/a.md#old-heading (no such heading in docs/a.md)"]
  assert anchor("Against the reference: HF PyTorch's train step") == (
      "against-the-reference-hf-pytorchs-train-step")
