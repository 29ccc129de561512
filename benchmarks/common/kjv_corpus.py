"""The King James Bible as a `.txt` corpus: English narrative prose from a Debian package.

    apt-get install bible-kjv          # the `bible` program + bible-kjv-text (public domain)
    python -m benchmarks.common.kjv_corpus --output=/tmp/kjv.txt

Why this text: the benchmarks need a second corpus that differs in kind from the embedded
`stdlib` documentation (technical, code-heavy) and that any machine can install by package
name: ~4.2 MB of running English prose (31,102 verses in 1,189 chapters).

Layout (data_prep's `.txt` contract): a line is one verse (its reference dropped), a blank line
ends a document, and a document is one chapter.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

from absl import app, flags

# `bible -f` prints one verse a line as "<Book><chapter>:<verse> <text>" (e.g. "Ge1:1 In the
# beginning..."; book names may start with a digit, "1Co13:4").
_VERSE = re.compile(r"^(\d?[A-Za-z]+)(\d+):(\d+) (.*)$")
WHOLE_BIBLE = "Ge1:1-Re22:21"


def chapters(bible_output: str) -> list[list[str]]:
  """`bible -f` output -> chapters, each a list of verse texts (references dropped).

  Raises:
    ValueError: a non-empty line that is not a verse (names the line).
  """
  docs, key = [], None
  for line in bible_output.splitlines():
    if not line.strip():
      continue
    match = _VERSE.match(line)
    if not match:
      raise ValueError(f"bible output line is not a verse: {line[:80]!r}")
    book, chapter, _, text = match.groups()
    if (book, chapter) != key:
      docs.append([])
      key = (book, chapter)
    docs[-1].append(text.strip())
  return docs


def write_kjv(output: str) -> int:
  """Writes the corpus to `output` (atomically); returns its size in bytes.

  Raises:
    RuntimeError: the `bible` program is missing (says which package provides it).
  """
  program = shutil.which("bible")
  if program is None:
    raise RuntimeError("the `bible` program is not installed: apt-get install bible-kjv")
  # -l: a line width large enough that no verse wraps.
  text = subprocess.run([program, "-f", "-l100000", WHOLE_BIBLE], check=True,
                        capture_output=True, text=True).stdout
  docs = chapters(text)
  os.makedirs(os.path.dirname(os.path.abspath(output)), exist_ok=True)
  tmp = output + ".tmp"
  with open(tmp, "w", encoding="utf-8") as f:
    f.write("\n\n".join("\n".join(doc) for doc in docs) + "\n")
  os.replace(tmp, output)
  return os.path.getsize(output)


FLAGS = flags.FLAGS
flags.DEFINE_string("output", None, "The .txt file to write.")


def main(argv):
  del argv
  if not FLAGS.output:
    sys.exit("--output is required")
  try:
    size = write_kjv(FLAGS.output)
  except RuntimeError as e:
    sys.exit(str(e))
  print(f"{FLAGS.output}: {size:,} bytes")


if __name__ == "__main__":
  app.run(main)
