"""The `dataset_info.json` contract between data_prep (writer) and the input pipeline (reader).

It sits beside the shards and records what a reader must agree with:

```
{
  "format_version": 1,
  "vocab": {"sha256": "<of vocab.json>", "merges_sha256": "<of merges.txt>", "size": 8000},
                                      # the vocabulary's identity (vocab_files.VocabId.record:
                                      # no merges_sha256 in older shards; a tokenizer.json
                                      # vocabulary: {"files": {"tokenizer.json": ...}, "size"})
  "special_ids": {"bos": 0, "pad": 1, "eos": 2, "unk": 3, "mask": 7999},
                                      # (a tokenizer.json may have no "unk")
  "template": {"prefix": [50281], "middle": [50282], "suffix": [50282]},
                                      # the vocabulary's templates (`template_of`): written
                                      # for a tokenizer.json vocabulary only; absent (RoBERTa's
                                      # files, and every file written before it): <s> A </s>,
                                      # <s> A </s></s> B </s> from special_ids' bos / eos
  "max_seq_len": 512,                 # every record has <= max_seq_len ids, <s> first, </s> last
  "packing": "full_sentences",        # or "doc_sentences"; "segment_pair" / "sentence_pair"
                                      # records add first_segment_length, next_sentence_label;
                                      # "separate_documents" records add document_starts
                                      # (example_spec.py: where each <s> doc </s> begins)
  "compression": "none",              # or "gzip" (the TFRecord compression of every shard)
  "shuffle": {"scheme": "global_hash", "seed": 0},  # the order of records in and across shards
                                      # (data_prep/block_order.py); absent in shards written
                                      # before the global shuffle: corpus order in each shard
  "splits": {
    "train": {"num_sequences": N, "num_tokens": T, "packing_efficiency": 0.97,
              "shards": [{"file": "train-00000-of-00016.tfrecord", "num_sequences": n,
                          "num_tokens": t}, ...]},
    "validation": {...}
  },
  "source": {...}                     # free-form: inputs, seed, counters (informational)
}
```
`num_tokens` counts real ids (special tokens included, no padding); packing efficiency is
num_tokens / (num_sequences * max_seq_len).
"""

from __future__ import annotations

from typing import Any

from roberta_tf.common import atomic_write, files
from roberta_tf.tokenization import vocab_files, vocabulary
from roberta_tf.tokenization.tokenizer_json import Template
from roberta_tf.tokenization.vocab_files import VocabId

FILENAME = "dataset_info.json"
FORMAT_VERSION = 1
# "compression" values → tf.data / tf.io compression_type.
COMPRESSIONS = {"none": "", "gzip": "GZIP"}
# "shuffle.scheme" of shards in a global random order (data_prep/block_order.ORDER_GLOBAL).
GLOBAL_SHUFFLE = "global_hash"


class DatasetInfoError(ValueError):
  """dataset_info.json is missing, malformed, or disagrees with the tokenizer or model."""


def is_globally_shuffled(info: dict[str, Any]) -> bool:
  """Whether every shard is a uniform random sample of its split in random order."""
  return info.get("shuffle", {}).get("scheme") == GLOBAL_SHUFFLE


def template_record(template: Template) -> dict[str, Any]:
  """A template as dataset_info.json's "template" records it."""
  return {"prefix": list(template.prefix), "middle": None if template.middle is None
          else list(template.middle), "suffix": list(template.suffix)}


def template_of(info: dict[str, Any]) -> Template:
  """The single and pair templates the shards were built with: "template" when recorded, else
  RoBERTa's from the special ids (`<s> A </s>`, `<s> A </s></s> B </s>`)."""
  record = info.get("template")
  if record is None:
    return vocabulary.roberta_template(int(info["special_ids"]["bos"]),
                                       int(info["special_ids"]["eos"]))
  middle = record.get("middle")
  return Template(tuple(record["prefix"]), tuple(record["suffix"]),
                  None if middle is None else tuple(middle))


def write(output_dir: str, info: dict[str, Any]) -> str:
  """Writes ``info`` atomically (temp file + rename) and returns the path."""
  return atomic_write.write_json(files.join(output_dir, FILENAME), info)


def read(data_dir: str) -> dict[str, Any]:
  """Reads and sanity-checks ``data_dir/dataset_info.json``."""
  path = files.join(data_dir, FILENAME)
  if files.isfile(data_dir):
    raise DatasetInfoError(f"{data_dir!r} is a file; give the shard directory that "
                           "data_prep.build_shards wrote (the one holding dataset_info.json)")
  if not files.isfile(path):
    raise DatasetInfoError(
        f"{path} not found: is {data_dir!r} a directory written by data_prep.build_shards?")
  info = files.read_json_object(path, DatasetInfoError)
  for key in ("format_version", "vocab", "special_ids", "max_seq_len", "packing", "splits"):
    if key not in info:
      raise DatasetInfoError(f"{path} lacks the field {key!r}")
  if info["format_version"] != FORMAT_VERSION:
    raise DatasetInfoError(
        f"{path} has format_version {info['format_version']}, this code reads {FORMAT_VERSION}")
  return info


def split_files(data_dir: str, info: dict[str, Any], split: str) -> list[str]:
  """The shard paths of ``split``; raises if the split is absent or a shard file is missing.

  On a URL the directory is listed once (one request, not one per shard: a split may have
  thousands); a name with a '/' (a shard in a subdirectory) is looked up on its own.
  """
  if split not in info["splits"]:
    raise DatasetInfoError(f"{data_dir}/{FILENAME} has no {split!r} split "
                           f"(it has: {', '.join(sorted(info['splits']))})")
  names = [s["file"] for s in info["splits"][split]["shards"]]
  paths = [files.join(data_dir, n) for n in names]
  if files.is_url(data_dir):
    listed = set(files.listdir(data_dir)) if files.isdir(data_dir) else set()
    missing = [p for n, p in zip(names, paths, strict=True)
               if n not in listed and ("/" not in n or not files.exists(p))]
  else:
    missing = [p for p in paths if not files.isfile(p)]
  if missing:
    raise DatasetInfoError(f"shard {missing[0]} listed in {data_dir}/{FILENAME} is missing")
  return paths


def _print(line: str) -> None:
  print(line, flush=True)


def check_compatible(info: dict[str, Any], *, vocab_size: int | None = None,
                     special_ids: dict[str, int] | None = None,
                     vocab: VocabId | None = None, vocab_side: str = "the tokenizer's",
                     max_positions: int | None = None,
                     max_seq_len: int | None = None, where: str = "", warn=_print) -> None:
  """Fails with one clear message per disagreement between the shards and tokenizer/model.

  Args:
    info: the parsed dataset_info.json.
    vocab_size / special_ids: the tokenizer's (or model config's) values.
    vocab: the tokenizer's vocabulary by content, compared with the shards' by the one rule
      (tokenization/vocab_files.VocabId.same); `vocab_side` names it in messages.
    max_positions: the model's position table size; shards need max_seq_len + 2 <= it.
    max_seq_len: the sequence length the pipeline pads to; shards need their max <= it.
    where: the data directory, for the message.
    warn: takes the one warning line when the shards' record lacks a file `vocab` has (or the
      other way round): compared by what both record (vocab_files.unchecked_warning).
  """
  problems = []
  if vocab_size is not None and info["vocab"]["size"] != vocab_size:
    problems.append(f"vocab size {info['vocab']['size']} in the shards, {vocab_size} in the "
                    "tokenizer/model")
  if vocab is not None:
    shards = VocabId.of_record(info["vocab"])
    if not shards.same(vocab):
      problems.append(f"the shards were encoded with another vocabulary ({shards.describe()}) "
                      f"than {vocab_side} ({vocab.describe()})")
    else:
      line = vocab_files.unchecked_warning(shards, f"the shards in {where or 'dataset'}",
                                           vocab, vocab_side)
      if line:
        warn(line)
  if special_ids is not None:
    for name, value in special_ids.items():
      got = info["special_ids"].get(name)
      if got is not None and got != value:
        problems.append(f"special id {name}={got} in the shards, {value} in the tokenizer/model")
  if max_positions is not None and info["max_seq_len"] + 2 > max_positions:
    problems.append(f"shards hold sequences of up to {info['max_seq_len']} tokens; the model's "
                    f"position table has {max_positions} rows (max_seq_len + 2 needed)")
  if max_seq_len is not None and info["max_seq_len"] > max_seq_len:
    problems.append(f"shards hold sequences of up to {info['max_seq_len']} tokens, longer than "
                    f"--max_seq_len={max_seq_len}")
  if problems:
    raise DatasetInfoError(f"{where or 'dataset'}/{FILENAME} does not match: "
                           + "; ".join(problems))
