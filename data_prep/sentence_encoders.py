"""Encoding sentences to token ids in parallel, for shard building.

An *encoder* is a callable ``list[str] -> (values, row_splits)``: the ids of every sentence
concatenated (``values``, int32 [N]) and the offsets where each sentence starts (``row_splits``,
int64 [B + 1], ``row_splits[0] == 0``), i.e. a ragged [B, None] batch as numpy. No special tokens
are added around a sentence; special-token strings written in the text (``<mask>``, ``</s>``...)
become their ids, as RoBERTa's tokenizer does.

Two encoders give the same ids for the same vocabulary:
- ``TfEncoder``: the project's TF-native tokenizer
  (``roberta_tf.tokenization.tokenizer.BytePairTokenizer``), the default, so shards are encoded
  by the same code that serves the model.
- ``HfEncoder``: Hugging Face ``tokenizers`` set up like ``RobertaTokenizerFast`` (byte-level
  pre-tokenizer without a prefix space, BPE, the special tokens added, ``<mask>`` absorbing the
  space before it). It is the benchmark's peer and a cross-check.

Each sentence is encoded on its own, as fairseq encodes each line of RoBERTa's corpus: a sentence
never starts with a space token, whatever precedes it in the document.

``encode_batches`` runs an encoder over a stream of batches with a few worker threads. Both
encoders release the GIL while they work (TF graph ops run in C++; ``tokenizers``' batch encode
runs in Rust), so while workers encode, the main thread reads the corpus and packs/writes the
previous batches: both cores are busy without a process pool (the benchmark reports how busy).

``--vocab_dir`` may be a URL: ``load_vocab`` reads the two files once (through
roberta_tf.common.files) and keeps their bytes, which are what is hashed, copied beside the
shards and shipped to Beam workers; the encoders load from a local scratch copy of those bytes
(``local_vocab_dir``), so nothing but the launcher reads ``--vocab_dir``.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import dataclasses
import hashlib
import itertools
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from roberta_tf.common import error_text
from roberta_tf.common import files as files_lib
from roberta_tf.data import vocab_info
from roberta_tf.tokenization import vocab_files, vocabulary
from roberta_tf.tokenization.tokenizer_json import Template
from roberta_tf.tokenization.vocab_files import MERGES_FILE, SPECIAL_TOKENS, VOCAB_FILE

Encoded = tuple[np.ndarray, np.ndarray]  # (values int32 [N], row_splits int64 [B + 1])
Encoder = Callable[[list[str]], Encoded]


# The vocabulary directory is missing a file or holds a malformed one; the message names the file.
VocabError = vocab_files.VocabFileError


@dataclasses.dataclass(frozen=True)
class Vocab:
  """What shard building needs to know about a vocabulary directory (and its files' bytes).

  Attributes:
    vocab_dir: the folder (--vocab_dir), either kind (tokenization/vocabulary.py).
    kind: vocabulary.BPE_FILES (vocab.json + merges.txt) or vocabulary.TOKENIZER_JSON.
    size: ids (max id + 1).
    special_ids: {"bos", "pad", "eos", "unk", "mask"} -> id ("unk" may be absent from a
      tokenizer.json); bos / eos open and close every block.
    template: the vocabulary's single and pair templates (tokenizer_json.Template).
    data: {file name: bytes} of the files that define the ids, as read (and hashed), in the
      kind's order: vocab.json, merges.txt; or tokenizer.json.
    role_files: {file name: bytes} of an HF folder's files that name its special tokens
      (special_tokens_map.json, tokenizer_config.json): copied beside the shards, not hashed.
  """
  vocab_dir: str
  kind: str
  size: int
  special_ids: dict[str, int]
  template: Template
  data: dict[str, bytes] = dataclasses.field(default_factory=dict, repr=False)
  role_files: dict[str, bytes] = dataclasses.field(default_factory=dict, repr=False)

  @property
  def vocab_path(self) -> str:
    """The first defining file (vocab.json, or tokenizer.json)."""
    return files_lib.join(self.vocab_dir, next(iter(self.data)))

  @property
  def vocab_id(self) -> vocab_files.VocabId:
    """The vocabulary's identity (what dataset_info.json records and every reader checks)."""
    return vocab_files.VocabId.of({n: hashlib.sha256(b).hexdigest() for n, b in self.data.items()},
                                  self.size)

  def file_bytes(self) -> dict[str, bytes]:
    """{file name: bytes}: the files as read (the defining ones hashed), role files last."""
    return {**self.data, **self.role_files}


def _read_bytes(path: str) -> bytes:
  try:
    return files_lib.read_bytes(path)
  except Exception as e:
    if not (isinstance(e, OSError) or error_text.is_tf_error(e)):
      raise
    raise VocabError(f"cannot read {path!r}: {error_text.one_line(e)}") from e


def load_vocab(vocab_dir: str) -> Vocab:
  """Checks ``vocab_dir`` (a local path or URL) holds a vocabulary, a GPT-2/RoBERTa vocab.json +
  merges.txt or an HF tokenizer.json (an HF model folder included), and reads it; raises
  VocabError (files.UnknownSchemeError for an unknown URL scheme)."""
  files_lib.check(vocab_dir, "--vocab_dir")
  if not files_lib.isdir(vocab_dir):
    raise VocabError(f"--vocab_dir {vocab_dir!r} is not a directory")
  if vocab_files.present(vocab_dir) == list(vocab_files.FILES):
    kind, names = vocabulary.BPE_FILES, vocab_files.FILES
  elif files_lib.isfile(files_lib.join(vocab_dir, vocabulary.TOKENIZER_JSON)):
    kind, names = vocabulary.TOKENIZER_JSON, (vocabulary.TOKENIZER_JSON,)
  else:
    missing = [n for n in vocab_files.FILES if n not in vocab_files.present(vocab_dir)]
    raise VocabError(f"vocab dir {vocab_dir!r} has no {' or '.join(missing)} (expected "
                     f"{VOCAB_FILE} and {MERGES_FILE}, as written by data_prep's BPE trainer, "
                     "or an HF tokenizer.json)")
  # The role files of an HF folder (tokenizer_config.json, ...) name its specials: read too.
  extra = [n for n in vocabulary.ROLE_FILES if kind == vocabulary.TOKENIZER_JSON
           and files_lib.isfile(files_lib.join(vocab_dir, n))]
  data = {n: _read_bytes(files_lib.join(vocab_dir, n)) for n in names}
  roles = {n: _read_bytes(files_lib.join(vocab_dir, n)) for n in extra}
  with _scratch(vocab_dir, {**data, **roles}) as local:
    if kind == vocabulary.BPE_FILES:  # the dense ids and specials the pipeline needs
      info = vocab_info.VocabInfo.from_vocab_json(os.path.join(local, VOCAB_FILE))
      size, special_ids = info.vocab_size, info.special_ids
      template = vocabulary.roberta_template(special_ids["bos"], special_ids["eos"])
    else:
      found = vocabulary.Vocabulary.of_dir(local)
      size, special_ids, template = found.size, found.special_ids, found.template
  return Vocab(vocab_dir=vocab_dir, kind=kind, size=size, special_ids=special_ids,
               template=template, data=data, role_files=roles)


@contextlib.contextmanager
def _scratch(vocab_dir: str, data: dict[str, bytes]) -> Iterator[str]:
  """A local scratch directory holding `data`'s files; a VocabError raised inside names
  `vocab_dir`, not the scratch directory."""
  with tempfile.TemporaryDirectory(prefix="roberta_tf-vocab-") as tmp:  # local-only: scratch
    for name, content in data.items():
      with open(os.path.join(tmp, name), "wb") as f:  # local-only: the scratch copy
        f.write(content)
    try:
      yield tmp
    except VocabError as e:
      raise VocabError(str(e).replace(tmp, files_lib.normalize(vocab_dir))) from e


def local_vocab_dir(vocab: Vocab):
  """A local scratch directory holding ``vocab``'s files (the bytes ``load_vocab`` read), for
  libraries that load from files (a context manager); removed afterwards. A VocabError raised
  inside names ``vocab.vocab_dir``, not the scratch directory."""
  return _scratch(vocab.vocab_dir, vocab.file_bytes())


class HfEncoder:
  """Hugging Face ``tokenizers`` byte-level BPE, configured like ``RobertaTokenizerFast``
  (a tokenizer.json vocabulary: that file, as HF loads it)."""

  def __init__(self, vocab: Vocab):
    import tokenizers  # pylint: disable=import-outside-toplevel
    from tokenizers import models, pre_tokenizers  # pylint: disable=import-outside-toplevel
    if vocab.kind == vocabulary.TOKENIZER_JSON:
      try:
        self._tok = tokenizers.Tokenizer.from_str(
            vocab.data[vocabulary.TOKENIZER_JSON].decode("utf-8"))
      except Exception as e:  # tokenizers raises plain Exception on a malformed file
        raise VocabError(f"{vocab.vocab_dir}: tokenizers cannot load tokenizer.json: {e}") from e
      return
    try:
      with local_vocab_dir(vocab) as local:
        tok = tokenizers.Tokenizer(models.BPE.from_file(os.path.join(local, VOCAB_FILE),
                                                        os.path.join(local, MERGES_FILE)))
    except Exception as e:  # tokenizers raises plain Exception on a malformed file
      raise VocabError(f"{vocab.vocab_dir}: tokenizers cannot load {VOCAB_FILE}/{MERGES_FILE}: "
                       f"{e}") from e
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    # As in roberta-base: special-token strings in the text map to their ids, and <mask> takes
    # the space before it ("is <mask>." -> "Ġis", "<mask>", ".").
    tok.add_special_tokens([tokenizers.AddedToken(t, lstrip=(name == "mask"))
                            for name, t in SPECIAL_TOKENS.items()])
    self._tok = tok

  def __call__(self, sentences: list[str]) -> Encoded:
    ids = [e.ids for e in self._tok.encode_batch_fast(sentences, add_special_tokens=False)]
    row_splits = np.zeros(len(ids) + 1, np.int64)
    np.cumsum([len(x) for x in ids], out=row_splits[1:])
    values = np.fromiter(itertools.chain.from_iterable(ids), np.int32, int(row_splits[-1]))
    return values, row_splits


class TfEncoder:
  """The project's TF-native tokenizer (``roberta_tf.tokenization.tokenizer.BytePairTokenizer``,
  or ``pipeline_tokenizer.PipelineTokenizer`` for a tokenizer.json)."""

  def __init__(self, vocab: Vocab):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from roberta_tf.tokenization import (  # pylint: disable=import-outside-toplevel
        pipeline_tokenizer,
    )
    self._tf = tf
    with local_vocab_dir(vocab) as local:  # read whole: the scratch copy may go
      self._tok = pipeline_tokenizer.load_tokenizer(local)  # raises VocabError
    # Trace the tokenizer's graph now (seconds, once), not inside the first batch. Its
    # `tokenize` is a tf.function over tf.string [None]: one graph for every batch size, whose
    # ops run in C++ without the GIL.
    self(["warm up"])

  def __call__(self, sentences: list[str]) -> Encoded:
    ragged = self._tok.tokenize(self._tf.constant(sentences, self._tf.string))
    return (ragged.flat_values.numpy().astype(np.int32, copy=False),
            ragged.row_splits.numpy().astype(np.int64, copy=False))


ENCODERS = {"tf": TfEncoder, "hf": HfEncoder}


def make_encoder(kind: str, vocab: Vocab) -> Encoder:
  """``kind``: ``tf`` (the project's tokenizer) or ``hf`` (Hugging Face ``tokenizers``)."""
  if kind not in ENCODERS:
    raise ValueError(f"unknown encoder {kind!r}; expected one of {sorted(ENCODERS)}")
  return ENCODERS[kind](vocab)


def from_lists(fn: Callable[[list[str]], list[list[int]]]) -> Encoder:
  """Adapts a ``list[str] -> list[list[int]]`` callable to the encoder interface."""
  def encode(sentences: list[str]) -> Encoded:
    ids = fn(sentences)
    row_splits = np.zeros(len(ids) + 1, np.int64)
    np.cumsum([len(x) for x in ids], out=row_splits[1:])
    values = np.fromiter(itertools.chain.from_iterable(ids), np.int32, int(row_splits[-1]))
    return values, row_splits
  return encode


@dataclasses.dataclass
class Batch:
  """Sentences to encode together, and which document each belongs to.

  ``segments`` is a list of ``(key, num_sentences, ends_document)``: consecutive runs of the
  batch's sentences from one document, ``key`` being the caller's label of that document (the
  split it goes to). A document spans several batches when it is long.
  """
  sentences: list[str]
  segments: list[tuple[Any, int, bool]]


def batch_documents(documents: Iterable[tuple[Any, list[str]]], max_sentences: int = 4096,
                    max_bytes: int = 1 << 20) -> Iterator[Batch]:
  """Groups ``(key, sentences)`` documents into batches of about ``max_sentences`` sentences.

  A batch also closes once it holds ``max_bytes`` characters, so that one huge line does not
  make a huge batch (memory stays bounded by the batch size times the workers in flight).
  """
  sentences: list[str] = []
  segments: list[tuple[Any, int, bool]] = []
  size = 0
  for key, doc in documents:
    start = len(sentences)
    for s in doc:
      sentences.append(s)
      size += len(s)
      if len(sentences) >= max_sentences or size >= max_bytes:
        segments.append((key, len(sentences) - start, False))
        yield Batch(sentences, segments)
        sentences, segments, size, start = [], [], 0, 0
    segments.append((key, len(sentences) - start, True))
  if sentences or segments:
    yield Batch(sentences, segments)


def encode_batches(batches: Iterable[Batch], encoder: Encoder, num_workers: int | None = None
                   ) -> Iterator[tuple[Batch, np.ndarray, np.ndarray]]:
  """Yields ``(batch, values, row_splits)`` in input order, encoding on worker threads.

  At most ``2 * num_workers`` batches are in flight, so memory does not grow with the corpus.
  """
  num_workers = num_workers or os.cpu_count() or 1
  pending: collections.deque = collections.deque()
  with concurrent.futures.ThreadPoolExecutor(num_workers, "encode") as pool:
    try:
      for batch in batches:
        pending.append((batch, pool.submit(encoder, batch.sentences)))
        while len(pending) > 2 * num_workers or (pending and pending[0][1].done()):
          batch_done, future = pending.popleft()
          yield (batch_done, *future.result())
      while pending:
        batch_done, future = pending.popleft()
        yield (batch_done, *future.result())
    finally:
      for _, future in pending:
        future.cancel()
