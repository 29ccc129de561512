"""Embeds texts with a fine-tuned embedding model's SavedModel (`finetune --export_dir` of a
--task=embedding run): the cosine similarities of a few texts, or a file's vectors.

  python -m roberta_tf.embed --saved_model=DIR "a text" "another text" "a third"
  python -m roberta_tf.embed --saved_model=DIR --input_file=texts.txt --output_file=vectors.npy
  python -m roberta_tf.embed --saved_model=DIR --input_file=texts.txt --output_file=out.jsonl

Texts: each argument, or each line of --input_file (UTF-8; invalid bytes read as U+FFFD, and
a note says how many lines had them). The SavedModel's `embed` signature (serving/
finetuned_export.py) tokenizes each text, truncates it to the model's max_seq_len tokens
(`<s>` and `</s>` included) and returns its L2-normalized vector, so a dot product is the
cosine similarity. With texts as arguments the similarity matrix is printed, each text with its
token count (marked where it reached the model's limit: a longer text was cut there).
--output_file: `.npy` (float32 [N, H], row i = line i) or `.jsonl` ({"text", "embedding"} a
line); progress goes to stderr every few seconds. Needs only tensorflow.
"""

from __future__ import annotations

import dataclasses
import json
import sys
import time

from absl import app

from roberta_tf.common import cli, files, options
from roberta_tf.common.options import POSITIVE, option
from roberta_tf.serving import frozen_weights, saved_model_reader


@dataclasses.dataclass(frozen=True)
class EmbedSettings:
  """embed's flags."""
  saved_model: str = option(
      help="Directory written by `finetune --export_dir` for a --task=embedding model (a path "
      "or a URL).", path=True)
  input_file: str | None = option(
      None, "Embed every line of this UTF-8 file (one text a line); needs --output_file.",
      path=True)
  output_file: str | None = option(
      None, "Write the vectors here: .npy (float32 [N, H], in input order) or .jsonl "
      "({\"text\", \"embedding\"} a line).", path=True)
  batch_size: int = option(
      64, "Texts per call of the SavedModel (texts of similar length are batched together).",
      check=POSITIVE)


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(EmbedSettings, FLAGS)

OUTPUT_FORMATS = (".npy", ".jsonl")
_PROGRESS_SECONDS = 5.0
_PROBE = "a " * 20_000  # more tokens than any model reads: its num_tokens is the limit


def _load(saved_model: str):
  """The `embed` signature of an embedding SavedModel."""
  return saved_model_reader.load(saved_model, ("embed",), "the export of a --task=embedding "
                                 "model (finetune --export_dir)").signatures["embed"]


def embed_texts(signature, texts: list[str], batch_size: int, progress=None):
  """(float32 [N, H] vectors, int [N] token counts) in the order of `texts`.

  Texts are sorted by length and cut into batches of `batch_size` (the SavedModel pads a batch
  to its longest text). `progress(done, total)` is called after each batch.
  """
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
  vectors, counts = None, np.zeros(len(texts), np.int64)
  for begin in range(0, len(order), batch_size):
    rows = order[begin:begin + batch_size]
    out = signature(text=tf.constant([texts[i] for i in rows]))
    batch = out["embeddings"].numpy()
    if vectors is None:
      vectors = np.zeros((len(texts), batch.shape[1]), np.float32)
    vectors[rows] = batch
    counts[rows] = out["num_tokens"].numpy()
    if progress:
      progress(begin + len(rows), len(texts))
  return vectors, counts


def token_limit(signature) -> int:
  """The model's max_seq_len (special tokens included): a very long text's num_tokens."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return int(signature(text=tf.constant([_PROBE]))["num_tokens"].numpy()[0])


def _shorten(text: str, width: int = 60) -> str:
  shown = repr(text)
  return shown if len(shown) <= width else shown[:width - 4] + "...'"


def format_similarities(texts, vectors, counts, limit: int) -> str:
  """Each text numbered with its token count, then the cosine similarity matrix."""
  lines = []
  for i, (text, n) in enumerate(zip(texts, counts, strict=True)):
    cut = " (the model's limit: a longer text was cut there)" if n >= limit else ""
    lines.append(f"[{i + 1}] {_shorten(text)}  {n} tokens{cut}")
  similarity = vectors @ vectors.T
  width = max(6, len(str(len(texts))) + 2)
  lines.append("")
  lines.append("cosine similarity")
  lines.append(" " * width + "".join(f"[{j + 1}]".rjust(width + 1) for j in range(len(texts))))
  for i, row in enumerate(similarity):
    lines.append(f"[{i + 1}]".ljust(width) + "".join(f"{x:+.3f}".rjust(width + 1) for x in row))
  return "\n".join(lines)


def read_texts(path: str) -> tuple[list[str], int]:
  """(one text a line, lines with invalid UTF-8). A final newline ends the last line;
  "\\r\\n" endings read as "\\n"; other whitespace is kept (it is part of the text)."""
  raw = files.read_bytes(path).split(b"\n")
  if raw and raw[-1] == b"":
    raw.pop()
  texts, bad = [], 0
  for line in raw:
    line = line[:-1] if line.endswith(b"\r") else line
    try:
      texts.append(line.decode("utf-8"))
    except UnicodeDecodeError:
      texts.append(line.decode("utf-8", "replace"))
      bad += 1
  return texts, bad


def write_vectors(path: str, texts: list[str], vectors) -> None:
  """.npy or .jsonl (OUTPUT_FORMATS), written atomically."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from roberta_tf.common import atomic_write  # pylint: disable=import-outside-toplevel
  # A URL's temporary is a local file, uploaded whole (atomic_write).
  with atomic_write.atomic_path(path) as tmp, open(tmp, "wb") as f:  # local-only: a local temp
    if path.endswith(".npy"):
      np.save(f, np.asarray(vectors, np.float32))
    else:
      for text, vector in zip(texts, vectors, strict=True):
        row = {"text": text, "embedding": [float(x) for x in vector]}
        f.write((json.dumps(row, ensure_ascii=False) + "\n").encode("utf-8"))


class _Progress:
  """`embedded N / M texts (R texts/s)` on stderr at most every _PROGRESS_SECONDS, and at the
  end of a file that took longer than that."""

  def __init__(self):
    self.start = self.last = time.monotonic()

  def __call__(self, done: int, total: int) -> None:
    now = time.monotonic()
    if now - self.last < _PROGRESS_SECONDS and (done < total or now - self.start
                                                < _PROGRESS_SECONDS):
      return
    self.last = now
    rate = done / max(now - self.start, 1e-9)
    print(f"embedded {done:,} / {total:,} texts ({rate:,.0f} texts/s)", file=sys.stderr,
          flush=True)


def main(argv):
  frozen_weights.serve_only()  # this process only serves: oneDNN may keep packed weights
  args = argv[1:]
  s = options.from_flags(EmbedSettings, FLAGS)
  if bool(args) == bool(s.input_file):
    raise app.UsageError("give texts as arguments or --input_file (one of them)")
  if s.input_file and not s.output_file:
    raise app.UsageError("--input_file needs --output_file (.npy or .jsonl)")
  if s.output_file and not s.output_file.endswith(OUTPUT_FORMATS):
    raise app.UsageError(f"--output_file={s.output_file}: the name must end in .npy or .jsonl "
                         "(the format)")
  if s.input_file:
    if not files.isfile(s.input_file):
      raise ValueError(f"--input_file={s.input_file}: no such file")
    texts, bad = read_texts(s.input_file)
    if not texts:
      raise ValueError(f"--input_file={s.input_file} has no lines to embed")
    if bad:
      print(f"note: {bad} lines of {s.input_file} are not valid UTF-8; their bad bytes were "
            "read as U+FFFD", file=sys.stderr, flush=True)
  else:
    texts = [a.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in args]
  signature = _load(s.saved_model)
  vectors, counts = embed_texts(signature, texts, s.batch_size,
                                _Progress() if s.input_file else None)
  if s.output_file:
    write_vectors(s.output_file, texts, vectors)
    print(f"wrote {len(texts):,} vectors of {vectors.shape[1]} dimensions to "
          f"{s.output_file}", flush=True)
  if args:
    print(format_similarities(texts, vectors, counts, token_limit(signature)), flush=True)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
