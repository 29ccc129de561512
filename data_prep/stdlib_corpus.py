"""The embedded ``stdlib`` corpus: the running Python's documentation as documents of texts.

One document per standard-library module (its module, class and function docstrings, in
``ast.walk`` order) and one per pydoc topic. Test suites, IDLE, tkinter demos and site-packages
are left out. Nothing is imported except pydoc's topic table, so the corpus is deterministic for
one Python build and needs no download.

A docstring becomes texts (``docstring_texts``) so that words stay whole:
- blocks are split at blank lines;
- prose, the lines that start at the docstring's left margin (after ``inspect.cleandoc``), is
  re-joined: the lines of one wrapped paragraph make one text, joined with a single space (runs
  of spaces inside prose become one space too: "end.  Next" -> "end. Next"). A bullet line
  ("- ", "* ", "+ ", "• ") starts a new text, and lines indented by the bullet's width go on
  with it;
- code and layout stay lines: an indented line (code blocks, definition lists, tables), a line
  without a letter or digit (reST underlines, table borders), and a doctest (a line starting
  with ``>>>`` and the rest of its block: prompts, continuations and expected output) are each
  one text, with their indentation.

Texts are packed one after another without a separator (data_prep/packing.py, FULL-SENTENCES),
and each is encoded on its own without a leading space token (data_prep/sentence_encoders.py),
so every text after a document's first that does not already start with whitespace starts with
one space: "... files." + " Returns ..." reads " Returns", the same token as mid-paragraph, and
no two words are glued across texts ("must be" + "sequential" would be "must besequential").
"""

from __future__ import annotations

import ast
import inspect
import os
import re
import sysconfig

_SKIP_DIRS = frozenset({"test", "tests", "idlelib", "site-packages", "dist-packages", "lib2to3",
                        "turtledemo", "__pycache__", "ensurepip"})
_BULLET = re.compile(r"[-*+•] ")
_DOCTEST = re.compile(r"\s*>>>")


def _indent(line: str) -> int:
  return len(line) - len(line.lstrip(" \t"))


def _block_texts(lines: list[str]) -> list[str]:
  """One blank-line-free block's texts (see the module docstring)."""
  texts: list[str] = []
  prose: list[str] = []  # the open prose text's lines, stripped
  go_on = None           # the indent a line needs to join the open prose text
  for i, line in enumerate(lines):
    if _DOCTEST.match(line):  # a doctest runs to the block's end: every line stays a line
      texts.extend(_close(prose))
      texts.extend(rest.rstrip() for rest in lines[i:])
      return texts
    indent, words = _indent(line), line.split()
    bullet = indent == 0 and bool(_BULLET.match(line))
    if prose and indent == go_on and not bullet and any(c.isalnum() for c in line):
      prose.extend(words)
      continue
    texts.extend(_close(prose))
    if indent == 0 and any(c.isalnum() for c in line):
      prose, go_on = words, len(words[0]) + 1 if bullet else 0
    else:
      texts.append(line.rstrip())
  texts.extend(_close(prose))
  return texts


def _close(prose: list[str]) -> list[str]:
  """The open prose text (as a one-item list, or none) and empties it."""
  text = " ".join(prose)
  prose.clear()
  return [text] if text else []


def docstring_texts(docstring: str) -> list[str]:
  """A docstring's texts: wrapped prose paragraphs joined, code and layout kept as lines.

  ``docstring`` is taken as ``inspect.cleandoc`` leaves it (what ``ast.get_docstring(node,
  clean=True)`` returns): the first line and the prose at column 0. No text is empty; the
  first never starts with a space (the leading space between texts is `document_texts`').
  """
  texts: list[str] = []
  block: list[str] = []
  for line in docstring.expandtabs(8).split("\n") + [""]:
    if line.strip():
      block.append(line)
    elif block:
      texts.extend(_block_texts(block))
      block = []
  return texts


def document_texts(docstrings: list[str]) -> list[str]:
  """One document's texts from its docstrings, each text after the first starting with
  whitespace (one space added where it has none), so none glues to the one before it."""
  texts = [t for d in docstrings for t in docstring_texts(d)]
  return [t if i == 0 or t[0].isspace() else " " + t for i, t in enumerate(texts)]


def _module_docstrings(path: str) -> list[str]:
  try:
    with open(path, "rb") as f:  # local-only: this Python's stdlib
      tree = ast.parse(f.read())
  except (SyntaxError, ValueError, OSError):
    return []
  nodes = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
  return [d for node in ast.walk(tree) if isinstance(node, nodes)
          for d in [ast.get_docstring(node, clean=True)] if d]


def stdlib_documents() -> list[list[str]]:
  """The running Python's documentation as documents of texts (deterministic for one Python
  build): one per standard-library module, then one per pydoc topic (sorted by key)."""
  root = sysconfig.get_paths()["stdlib"]
  docs = []
  for dirpath, dirnames, filenames in os.walk(root):  # local-only: this Python's stdlib
    dirnames[:] = sorted(d for d in dirnames
                         if d not in _SKIP_DIRS and not d.startswith(("config-", "test")))
    for name in sorted(filenames):
      if name.endswith(".py") and not name.startswith("test_"):
        doc = document_texts(_module_docstrings(os.path.join(dirpath, name)))
        if doc:
          docs.append(doc)
  try:
    from pydoc_data.topics import topics  # pylint: disable=import-outside-toplevel
  except ImportError:
    topics = {}
  for key in sorted(topics):
    doc = document_texts([inspect.cleandoc(topics[key])])
    if doc:
      docs.append(doc)
  return docs
