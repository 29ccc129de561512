"""A `tf.io.gfile.GFile` as a Python raw binary stream: what `files.open` builds URL files on.

io's buffered and text layers go on top of it (files.py), so a URL opens as an ordinary Python
file object, text or binary, seekable for reading. Only files.py uses it: every other module
opens paths through `files.open`.
"""

from __future__ import annotations

import io


class GFileRaw(io.RawIOBase):
  """A tf.io.gfile.GFile as a raw binary stream (io's buffered and text layers go on top).

  Args:
    path: a URL (gs://, ram://, ...).
    mode: GFile's binary mode: "rb", "wb" or "ab".
  """

  def __init__(self, path: str, mode: str):
    import tensorflow as tf  # only for URLs: local work needs no TensorFlow import
    self._f = tf.io.gfile.GFile(path, mode)
    self._mode = mode

  def readable(self):
    return "r" in self._mode

  def writable(self):
    return "r" not in self._mode

  def seekable(self):
    return "r" in self._mode

  def readinto(self, b):
    data = self._f.read(len(b))
    n = len(data)
    b[:n] = data
    return n

  def write(self, b):
    self._f.write(bytes(b))
    return len(b)

  def seek(self, offset, whence=io.SEEK_SET):
    if whence == io.SEEK_END:
      offset += self._f.size()
    elif whence == io.SEEK_CUR:
      offset += self._f.tell()
    self._f.seek(offset)
    return self._f.tell()

  def tell(self):
    return self._f.tell()

  def close(self):
    if not self.closed:
      self._f.close()
    super().close()
