"""Shards → dynamically masked, statically shaped batches (the pretraining input pipeline).

Training (repeat=True) reads one global stream of sequences, the same for every number of
replicas, input pipelines and accumulation steps, and seekable by arithmetic
(training_stream.py):

    L lanes (lane l: shards l, l + L, ...) ─ per lane epoch: its shards in a stateless order,
      concatenated (read shard: parse + validate + pad to S in chunks, index records, check the
      count) ─ windows of shuffle_buffer / L sequences, each permuted by a stateless seed
      ─ step t: sequences [t*G/L, (t+1)*G/L) of every lane ─ this pipeline's part of the step
      (with P | L: its L/P lanes, the only ones it reads) ─ batch [B, S] ─ map(Masker)

`InputConfig.start` positions a fresh stream at any sequence (a multiple of L) by reading at
most one shard's record headers and one window per lane (`tf.data` skips within a shard, never
through the data before it): resuming costs the same after 10^2 or 10^9 sequences. A step of A
micro-batch rounds reads the same G = A*R*B sequences however G is split. L = 1 is the stream
before lanes: replica k of R takes batches k, k + R, ... and every pipeline reads all of it.

Evaluation (repeat=False) reads each sequence once: shards interleaved, split across input
pipelines by file (or by record), no shuffle, the last batch padded.

Every record carries (epoch, shard index, record index), so its mask is a pure function of the
seed and that position (see masking.py), independent of batching, shuffling and parallelism.
The stream is also checkpointable as a tf.data iterator (`tf.train.Checkpoint(iterator=...)`).

The stages by module: source (read one shard: shard_reader.py), shuffle and the order of the
stream (training_stream.py; `_eval_stream` for evaluation), then here batch and mask
(`_mask_batch`: masking.py's Masker on each batch, pair fields for a pair packing, document ids
for a document packing).
"""

from __future__ import annotations

import dataclasses
import functools
import sys

import tensorflow as tf

from roberta_tf.data import dataset_info, packings, shard_reader, training_stream
from roberta_tf.data.masking import Masker, MaskingConfig
from roberta_tf.data.vocab_info import VocabInfo


@dataclasses.dataclass(frozen=True)
class InputConfig:
  """How to read and batch one split.

  Attributes:
    per_replica_batch_size: sequences per batch of THIS input pipeline (the flags' --batch_size
      is global); under a tf.distribute strategy the caller passes
      `input_context.get_per_replica_batch_size(global_batch_size)`.
    max_seq_len: S, the padded length; must be >= dataset_info's max_seq_len.
    seed: the data seed: the per-epoch shard order, the shuffle and every mask derive from it.
    shuffle_buffer: sequences in the shuffle buffer; 0: no shuffling at all (evaluation): the
      shards in listed order, interleaved record by record.
    repeat: True: epochs forever, drop the last partial batch of the stream (training).
      False: one pass (epoch 0); the last partial batch is padded with empty rows (no real
      tokens, all mask_weights 0), so every batch is [B, S] and each sequence is seen once.
    cycle_length: shards read concurrently by the interleave.
    start: training only: sequences of the global stream already consumed; the stream begins
      there (the resume position; see the module docstring). A multiple of `lanes`.
    lanes: training only: L, the lanes of the stream (training_stream.py); fixed for a run
      (1: the stream before lanes).
    global_batch_size: training only: G, the sequences of one step (the flags' --batch_size);
      0: per_replica_batch_size x replicas (no accumulation). Only lanes > 1 use it.
    skip_corrupt_shards: False: a truncated/corrupt shard, an unparsable record or a record that
      breaks the format (length, ids, <s>/</s>) raises an error naming the shard once the
      reader reaches the shard's end. True: the shard's readable records before the damage
      (up to its 64-record chunk) are used, the rest is skipped, a warning
      naming the shard goes to stderr and `skipped_shards` (if given) is incremented (each
      epoch that reads the shard).
  """
  per_replica_batch_size: int
  max_seq_len: int
  seed: int = 0
  shuffle_buffer: int = 10_000
  repeat: bool = True
  cycle_length: int = 8
  start: int = 0
  skip_corrupt_shards: bool = False
  lanes: int = 1
  global_batch_size: int = 0

  def __post_init__(self):
    if self.per_replica_batch_size < 1 or self.max_seq_len < 2:
      raise ValueError(f"per_replica_batch_size={self.per_replica_batch_size} must be >= 1 and "
                       f"max_seq_len={self.max_seq_len} >= 2")
    if self.start < 0 or (self.start and not self.repeat):
      raise ValueError(f"start={self.start} must be >= 0, and 0 unless repeat")
    if self.shuffle_buffer < 0 or self.cycle_length < 1:
      raise ValueError(f"shuffle_buffer={self.shuffle_buffer} must be >= 0 and cycle_length="
                       f"{self.cycle_length} >= 1")
    if self.lanes < 1 or self.global_batch_size < 0 or self.start % self.lanes:
      raise ValueError(f"lanes={self.lanes} must be >= 1, global_batch_size="
                       f"{self.global_batch_size} >= 0 and start={self.start} a multiple of "
                       "lanes")

  def for_eval(self) -> InputConfig:
    """The same reader for evaluation: no shuffling, one pass, padded last batch."""
    return dataclasses.replace(self, shuffle_buffer=0, repeat=False, start=0)


def build_pretraining_dataset(data_dir: str, split: str, vocab: VocabInfo,
                              config: InputConfig, masking: MaskingConfig | None = None, *,
                              max_positions: int | None = None,
                              input_context: tf.distribute.InputContext | None = None,
                              skipped_shards: tf.Variable | None = None) -> tf.data.Dataset:
  """The masked-LM dataset of one split of a shard directory.

  Args:
    data_dir: directory with dataset_info.json and the TFRecord shards.
    split: "train", "validation", ... (a key of dataset_info's splits).
    vocab: the tokenizer's vocabulary facts; its size, special ids and identity (vocab_id,
      when known) must match dataset_info.json.
    config: reading and batching options.
    masking: masking options (default MaskingConfig()).
    max_positions: the model's position table size, checked against the shards' max_seq_len.
    input_context: from `strategy.distribute_datasets_from_function`. Training: each input
      pipeline yields its part of every step, A x R/P batches (training_stream.py): when P
      divides the lanes, read from its own lanes only; with one lane, its replicas' batches
      (consecutive, one per replica per round; its replicas are ids [p*R/P, (p+1)*R/P)) of
      the whole stream, which every pipeline reads. Eval: the shards are split across its
      input pipelines by file when every pipeline gets at least one, else by record
      (pipelines may then differ by a batch).
    skipped_shards: int64 scalar variable counting damaged shards (skip mode only).

  Returns:
    A dataset of dicts (see Masker.__call__): `input_ids`, `padding_mask` int32 [B, S],
    `mask_positions`, `mask_ids` int32 [B, P], `mask_weights` float32 [B, P]. Shards of a pair
    packing (packings.PAIR_PACKINGS, the NSP ablation) add `token_type_ids` int32 [B, S]
    (0 up to the first segment's `</s>`, 1 after it, 0 on padding), `next_sentence_labels`
    int32 [B] and `next_sentence_weights` float32 [B] (0 for the padded rows of an eval batch).
    Shards of a document packing (packings.DOCUMENT_PACKINGS) add `document_ids` int32 [B, S]:
    each token's document in its row (0, 1, ...; non-decreasing, padding in the last), which
    the model turns into its attention mask and rotary positions (models/modernbert/).

  Raises:
    dataset_info.DatasetInfoError: dataset_info.json is missing, disagrees with the vocabulary
      or model, or lists a missing shard.
  """
  masking = masking or MaskingConfig()
  info = dataset_info.read(data_dir)
  dataset_info.check_compatible(
      info, vocab_size=vocab.vocab_size, special_ids=vocab.special_ids,
      vocab=vocab.vocab_id, max_positions=max_positions, max_seq_len=config.max_seq_len,
      where=data_dir)
  files = dataset_info.split_files(data_dir, info, split)
  if config.repeat and config.shuffle_buffer:
    _note_corpus_order(data_dir, info)
  source = shard_reader.ShardSource.for_split(data_dir, info, split, files, vocab, config,
                                              masking, skipped_shards)
  read = functools.partial(shard_reader.read_shard, source)
  if config.repeat:
    ds = training_stream.training_stream(read, list(source.num_sequences), config,
                                         input_context)
  else:
    ds = _eval_stream(read, len(files), config, input_context)
  mask = functools.partial(_mask_batch, masker=Masker(vocab, masking, config.max_seq_len),
                           config=config, pairs=source.pairs)
  ds = ds.map(mask, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  return _with_options(ds.prefetch(tf.data.AUTOTUNE), config)


def _with_options(ds: tf.data.Dataset, config: InputConfig) -> tf.data.Dataset:
  """Deterministic order; in skip mode, the side effects kept out of the saved position."""
  options = tf.data.Options()
  options.deterministic = True
  if config.skip_corrupt_shards:
    # The warning and the counter are side effects; they are not part of the saved position.
    options.experimental_external_state_policy = (
        tf.data.experimental.ExternalStatePolicy.IGNORE)
  return ds.with_options(options)


def _eval_stream(read, num_files: int, config: InputConfig,
                 input_context: tf.distribute.InputContext | None) -> tf.data.Dataset:
  """One pass (epoch 0) over the split, unmasked batches of B (the last one partial).

  The shards are interleaved record by record; input pipeline p of P reads shards p, p + P,
  ... when every pipeline gets at least one, else every shard and keeps records p, p + P, ...
  """
  num_pipelines = input_context.num_input_pipelines if input_context else 1
  pipeline_id = input_context.input_pipeline_id if input_context else 0
  by_file = num_files >= num_pipelines
  order = tf.range(num_files, dtype=tf.int64)
  if by_file:
    order = order[pipeline_id::num_pipelines]
  records = tf.data.Dataset.from_tensor_slices(order).interleave(
      lambda i: read(i, tf.constant(0, tf.int64)), cycle_length=config.cycle_length,
      block_length=1, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
  if not by_file:
    records = records.shard(num_pipelines, pipeline_id)
  return records.batch(config.per_replica_batch_size)


def _mask_batch(batch: dict, *, masker: Masker, config: InputConfig, pairs: bool) -> dict:
  """An unmasked batch {input_ids [<=B, S], seed [<=B, 2] (pair fields)} -> the batch
  contract (see build_pretraining_dataset), every tensor of static shape [B, ...]."""
  b, s, pad_id = config.per_replica_batch_size, config.max_seq_len, masker.vocab.pad_id
  ids, seeds = batch["input_ids"], batch["seed"]
  real_rows = tf.shape(ids)[0]
  if not config.repeat:  # pad the last batch with empty rows: static [B, S] for XLA/TPU
    missing = b - real_rows
    ids = tf.pad(ids, [[0, missing], [0, 0]], constant_values=pad_id)
    seeds = tf.pad(seeds, [[0, missing], [0, 0]])
  out = masker(tf.ensure_shape(ids, [b, s]), tf.ensure_shape(seeds, [b, 2]))
  out = {k: tf.ensure_shape(v, [b, None]) for k, v in out.items()}
  if pairs:
    out.update(_pair_fields(batch["first_length"], batch["nsp_label"], out["padding_mask"],
                            real_rows, b, s))
  if "document_ids" in batch:  # eval padding rows: one empty document
    out["document_ids"] = tf.ensure_shape(
        tf.pad(batch["document_ids"], [[0, b - real_rows], [0, 0]]), [b, s])
  return out


_NOTED: set[str] = set()


def _note_corpus_order(data_dir: str, info: dict) -> None:
  """Says once per directory on stderr when its shards are not globally shuffled."""
  if dataset_info.is_globally_shuffled(info) or data_dir in _NOTED:
    return
  _NOTED.add(data_dir)
  print(f"note: the shards in {data_dir} hold their blocks in corpus order (written before "
        "the global shuffle of build_shards, or without it): a shard larger than "
        "--shuffle_buffer is read source by source, not as a mixed sample. Build them again "
        "(build_shards --overwrite) to mix the corpus.", file=sys.stderr)


def _pair_fields(first_length, label, padding_mask, real_rows, b: int, s: int) -> dict:
  """token_type_ids [B, S], next_sentence_labels [B], next_sentence_weights [B] of a batch
  whose first ``real_rows`` rows are records (the rest: eval padding)."""
  missing = b - real_rows
  first_length = tf.pad(first_length, [[0, missing]])
  types = tf.cast(tf.range(s)[None, :] >= first_length[:, None], tf.int32) * padding_mask
  return {"token_type_ids": tf.ensure_shape(types, [b, s]),
          "next_sentence_labels": tf.ensure_shape(tf.pad(label, [[0, missing]]), [b]),
          "next_sentence_weights": tf.ensure_shape(
              tf.cast(tf.range(b) < real_rows, tf.float32), [b])}


def build_dataset(data_dir: str, split: str, *, training: bool, per_replica_batch_size: int,
                  max_seq_len: int, masking: MaskingConfig | None = None,
                  model_config=None, seed: int = 0, shuffle_buffer: int = 10_000,
                  skip_corrupt_shards: bool = False, start: int = 0, input_lanes: int = 1,
                  global_batch_size: int = 0,
                  input_context: tf.distribute.InputContext | None = None,
                  vocab: VocabInfo | None = None, vocab_dir: str | None = None,
                  skipped_shards: tf.Variable | None = None) -> tf.data.Dataset:
  """`build_pretraining_dataset` for the training loop: train (repeat, shuffle) or eval.

  Args:
    training: True: shuffled, repeated forever, from sequence ``start`` of the stream; False:
      one pass, unshuffled, the last batch padded with empty rows.
    model_config: a RobertaConfig (or None); its vocab_size, pad/bos/eos ids and position table
      are checked against the shards.
    vocab / vocab_dir: the vocabulary; default `VocabInfo.for_dataset` (the vocab_dir recorded
      by data_prep, else dataset_info.json's ids, which rules out whole-word masking).
    input_lanes / global_batch_size: InputConfig's lanes and global_batch_size (training).
    Others: see InputConfig and build_pretraining_dataset.
  """
  info = dataset_info.read(data_dir)
  max_positions = None
  if model_config is not None:
    dataset_info.check_compatible(
        info, vocab_size=model_config.vocab_size,
        special_ids={"pad": model_config.pad_id, "bos": model_config.bos_id,
                     "eos": model_config.eos_id},
        where=data_dir)
    # No position table (ModernBERT: rotary): max_seq_len bounds nothing the shards must fit.
    max_positions = getattr(model_config, "max_positions", None)
    if (info.get("packing") in packings.DOCUMENT_PACKINGS
        and not getattr(model_config, "separates_documents", False)):
      raise dataset_info.DatasetInfoError(
          f"{data_dir}: {info['packing']!r} shards keep documents apart in a row, which a "
          f"{getattr(model_config, 'family', 'roberta')} model does not do; use "
          "full_sentences or doc_sentences shards")
  vocab = vocab or VocabInfo.for_dataset(data_dir, info, vocab_dir)
  config = InputConfig(per_replica_batch_size=per_replica_batch_size, max_seq_len=max_seq_len,
                       seed=seed,
                       shuffle_buffer=shuffle_buffer, repeat=True, start=start,
                       lanes=input_lanes, global_batch_size=global_batch_size,
                       skip_corrupt_shards=skip_corrupt_shards)
  if not training:
    config = config.for_eval()
  return build_pretraining_dataset(data_dir, split, vocab, config, masking,
                                   max_positions=max_positions, input_context=input_context,
                                   skipped_shards=skipped_shards)
