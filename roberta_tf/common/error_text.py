"""One line of text for an exception: what failed, naming the file, without TF's internals.

`one_line(e)` is what `cli.run` prints after `error: `. The project's own errors (ValueError and
RuntimeError subclasses) already name the flag or file and say what to do: their first line is
kept. OS errors read `<file>: <reason>`; a full disk (or a file-size limit) says so. TensorFlow's
errors lose their op and function-node decorations; a failed data assertion (a damaged shard:
data/pipeline.py) reads as its own message. Paths of temporary files (`X.tmp-<pid>/...`,
`ckpt-N_temp/...`) are shown as the final path they were written for.

Imports no TensorFlow: TF errors are recognized by their module and `message` attribute.
"""

from __future__ import annotations

import errno
import re

# errno values meaning "the device (or this process's file-size limit) has no room".
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)
_DISK_FULL_TEXT = re.compile(r"No space left on device|File too large|Disk quota exceeded",
                             re.IGNORECASE)
# <final>.tmp-<pid>[/inside...] and <dir>/ckpt-N_temp[/inside...]: the final path is <final>.
_ATOMIC_TMP = re.compile(r"(?P<final>[^\s'\"\[\]]+?)\.tmp-\d+(?:/[^\s'\";]*)?")
_CKPT_TMP = re.compile(r"(?P<final>[^\s'\"\[\]]*?ckpt-\d+)_temp(?:/[^\s'\";]*)?")
_TF_DECORATIONS = (re.compile(r"\{\{function_node [^}]*\}\}\s*"),
                   re.compile(r"\s*\[Op:[^\]]*\]( name: ?\S*)?"),
                   re.compile(r"\s*\[\[\{\{node [^\]]*\]\]"))
_GRAPH_ERROR = "Graph execution error:"
_TF_ITERATOR_PREFIX = re.compile(r"^Error in user-defined function passed to \S+ transformation "
                                 r"with iterator: \S+: ")


def is_tf_error(e: BaseException) -> bool:
  """A tf.errors.OpError (without importing TensorFlow)."""
  return type(e).__module__.startswith("tensorflow") and hasattr(e, "message")


def is_disk_full(e: BaseException) -> bool:
  """No space left on the device, a quota, or the process's file-size limit (RLIMIT_FSIZE)."""
  if isinstance(e, OSError) and e.errno in DISK_FULL_ERRNOS:
    return True
  return bool((is_tf_error(e) or isinstance(e, OSError)) and _DISK_FULL_TEXT.search(str(e)))


def final_paths(text: str) -> str:
  """`text` with temporary paths replaced by the final path they were written for."""
  text = _ATOMIC_TMP.sub(lambda m: m.group("final"), text)
  return _CKPT_TMP.sub(lambda m: m.group("final"), text)


def _first_line(text: str) -> str:
  lines = [line.strip() for line in str(text).splitlines() if line.strip()]
  return lines[0] if lines else ""


def _assertion_text(text: str) -> str:
  """A tf.debugging.Assert message `[a] [b] [c]` → `a b c` (the pipeline's damaged-shard line)."""
  parts = re.findall(r"\[(.*?)\](?= \[|$)", text.strip())
  if not parts:
    return text
  out = parts[0]
  for part in parts[1:]:
    out += part if part[:1] in ")];,." else " " + part
  return out


def tf_message(e: BaseException) -> str:
  """A TensorFlow error's message, one line, without op/function decorations."""
  message = str(getattr(e, "message", e))
  if "assertion failed: " in message:
    return _assertion_text(_first_line(message.partition("assertion failed: ")[2]))
  lines = [line.strip() for line in message.splitlines() if line.strip()]
  if lines[:1] == [_GRAPH_ERROR]:
    # A tf.function's op failed: the op's own message is the last line, after the Python stack
    # where the op was defined (a first line alone said only "Graph execution error:").
    lines = lines[::-1]
  for line in lines:
    for pattern in _TF_DECORATIONS:
      line = pattern.sub("", line)
    line = _TF_ITERATOR_PREFIX.sub("", line).strip()
    if line:
      return line
  return ""


def path_in(text: str) -> str | None:
  """The first absolute or relative file path in `text` (after `final_paths`), if any."""
  m = re.search(r"(?:^|[\s'\"(])((?:/|\./|\.\./)[^\s'\";,)]+)", final_paths(text))
  return m.group(1) if m else None


def disk_full_text(e: BaseException, path: str | None = None) -> str:
  """`no space left on the device writing <path>` (or the file-size limit), plus what to do."""
  path = path or getattr(e, "filename", None) or path_in(str(e)) or "a file"
  limit = "File too large" in str(e) or (isinstance(e, OSError) and e.errno == errno.EFBIG)
  why = ("the file-size limit (ulimit -f) was reached; raise it" if limit
         else "no space left on the device; free space")
  return f"cannot write {final_paths(str(path))}: {why} and run the same command again"


def one_line(e: BaseException) -> str:
  """The error as one line (see the module docstring); unknown kinds say they are unexpected."""
  if is_disk_full(e):
    return disk_full_text(e)
  if is_tf_error(e):
    return final_paths(tf_message(e))
  if isinstance(e, OSError):
    if e.filename:
      where = f"{e.filename}" + (f" -> {e.filename2}" if e.filename2 else "")
      return final_paths(f"{where}: {e.strerror or e}")
    return final_paths(_first_line(str(e)) or type(e).__name__)
  if isinstance(e, MemoryError):
    return "out of memory: use a smaller --batch_size, --max_seq_len or model"
  if isinstance(e, (ValueError, RuntimeError)):
    return final_paths(_first_line(str(e)) or type(e).__name__)
  text = _first_line(str(e))
  return (f"unexpected {type(e).__name__}{': ' + text if text else ''} (rerun with --verbose "
          "for the traceback)")
