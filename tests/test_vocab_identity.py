"""One vocabulary identity (tokenization/vocab_files.VocabId) in every check: a merges.txt that
differs is another vocabulary wherever a vocabulary meets shards, a model dir or another
vocabulary; an older record (vocab.json's sha256 alone) is compared by what both record, with
one warning line. The binaries' refusals (train, evaluate, fill_mask): tests/test_export.py."""

import json
import os
import shutil
import types

import pytest

from roberta_tf.data import dataset_info, vocab_info
from roberta_tf.finetuning import sweep_runner
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.serving import mlm_export
from roberta_tf.tokenization import vocab_files, vocab_growth
from roberta_tf.tokenization.vocab_files import VocabId
from tests.conftest import HF_TINY
from tests.harness import tiny_config


def reordered_merges(src_dir, dst_dir, rank: int = 10) -> str:
  """`src_dir`'s vocabulary with merges `rank` and `rank + 1` swapped in merges.txt: the same
  vocab.json (every token at its id), another tokenization of some text."""
  os.makedirs(dst_dir, exist_ok=True)
  shutil.copy(os.path.join(src_dir, "vocab.json"), dst_dir)
  with open(os.path.join(src_dir, "merges.txt"), encoding="utf-8") as f:
    lines = f.read().split("\n")
  first = 1 if lines[0].startswith("#version") else 0
  lines[first + rank], lines[first + rank + 1] = lines[first + rank + 1], lines[first + rank]
  with open(os.path.join(dst_dir, "merges.txt"), "w", encoding="utf-8") as f:
    f.write("\n".join(lines))
  return str(dst_dir)


def _shards(vocab_dir, shards_dir, old_record=False) -> tuple[str, dict]:
  """A stand-in shard directory: `vocab_dir`'s files beside a dataset_info.json recording them
  (as build_shards writes it; `old_record`: vocab.json's sha256 alone, as before merges.txt
  was recorded), one empty validation shard."""
  os.makedirs(shards_dir)
  for name in vocab_files.FILES:
    shutil.copy(os.path.join(vocab_dir, name), shards_dir)
  record = VocabId.of_dir(str(shards_dir)).record()
  if old_record:
    del record["merges_sha256"]
  open(os.path.join(shards_dir, "v.tfrecord"), "wb").close()
  info = {"format_version": 1, "vocab": record, "special_ids": {}, "max_seq_len": 64,
          "packing": "full_sentences",
          "splits": {"validation": {"shards": [{"file": "v.tfrecord"}]}}}
  with open(os.path.join(shards_dir, "dataset_info.json"), "w", encoding="utf-8") as f:
    json.dump(info, f)
  return str(shards_dir), info


def test_one_identity_from_files_and_records(tmp_path):
  """A directory's identity is the sha256 of each file that defines the tokenization, and
  dataset_info.json's record round-trips it; merges.txt alone makes another vocabulary."""
  ours = VocabId.of_dir(HF_TINY)
  record = ours.record()
  assert set(record) == {"sha256", "merges_sha256", "size"} and record["size"] == 8000
  assert record["sha256"] == vocab_files.file_sha256(os.path.join(HF_TINY, "vocab.json"))
  assert VocabId.of_record(record) == ours and ours.same(VocabId.of_record(record))
  other = VocabId.of_dir(reordered_merges(HF_TINY, tmp_path / "other"))
  assert other.sha256_of("vocab.json") == ours.sha256_of("vocab.json")
  assert not ours.same(other) and ours.digest != other.digest
  assert ours.describe() == (f"8000 tokens, vocab.json sha256 {record['sha256'][:12]}, "
                             f"merges.txt {record['merges_sha256'][:12]}")


def test_a_tokenizer_json_vocabulary_has_an_identity_too(tmp_path):
  """A directory with a Hugging Face tokenizer.json alone: its hash, its size (model vocab and
  added tokens), recorded under "files"; never the same as a vocab.json + merges.txt one."""
  doc = {"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
         "added_tokens": [{"id": 5, "content": "<mask>"}]}
  (tmp_path / "tokenizer.json").write_text(json.dumps(doc), encoding="utf-8")
  found = VocabId.of_dir(str(tmp_path))
  sha = vocab_files.file_sha256(str(tmp_path / "tokenizer.json"))
  assert found.files == (("tokenizer.json", sha),) and found.size == 6
  assert found.record() == {"files": {"tokenizer.json": sha}, "size": 6}
  assert VocabId.of_record(found.record()) == found
  assert not found.same(VocabId.of_dir(HF_TINY)) and found.unchecked(VocabId.of_dir(HF_TINY))


def test_shards_of_other_merges_meet_no_model_dir_tokenizer_or_export(tmp_path):
  """The same vocab.json with another merges.txt is refused in one line naming both sides by
  each check that used to compare vocab.json alone or sizes: the input pipeline's (a
  --vocab_dir), the files found beside shards, export --vocab_dir, finetune --vocab_dir."""
  other = reordered_merges(HF_TINY, tmp_path / "other")
  shards, info = _shards(HF_TINY, tmp_path / "shards")
  with pytest.raises(dataset_info.DatasetInfoError) as error:
    dataset_info.check_compatible(info, vocab=VocabId.of_dir(other),
                                  vocab_side=f"--vocab_dir={other!r}", where=shards)
  message = str(error.value)
  assert "\n" not in message and shards in message and f"--vocab_dir={other!r}" in message
  # Files beside the shards whose merges.txt is not the recorded one are not their vocabulary.
  shutil.copy(os.path.join(other, "merges.txt"), shards)
  assert vocab_info.find_vocab_dir(shards, info) is None
  model_dir = str(tmp_path / "model")
  os.makedirs(model_dir)
  tiny_config().save(os.path.join(model_dir, "config.json"))
  for name in vocab_files.FILES:
    shutil.copy(os.path.join(HF_TINY, name), model_dir)
  with pytest.raises(vocab_growth.VocabGrowthError,
                     match=f"--vocab_dir='{other}' is of another vocabulary .* than "
                     f"--model_dir='{model_dir}' .*merges.txt differs from rank 10"):
    mlm_export.export_saved_model(model_dir, str(tmp_path / "export"), vocab_dir=other)
  assert not os.path.exists(tmp_path / "export")
  cfg = types.SimpleNamespace(vocab_dir=other, model=types.SimpleNamespace(init_from=model_dir))
  with pytest.raises(vocab_growth.VocabGrowthError,
                     match=f"--vocab_dir='{other}' .* than --init_from='{model_dir}'"):
    sweep_runner.check_vocab_dir(cfg)
  sweep_runner.check_vocab_dir(types.SimpleNamespace(
      vocab_dir=HF_TINY, model=types.SimpleNamespace(init_from=model_dir)))


def test_an_older_record_is_compared_by_what_both_record_with_one_warning(tmp_path):
  """Shards (or a model dir's config.json) recording vocab.json's sha256 alone still load: the
  vocab.json is compared, and one warning line says merges.txt was not; another vocab.json is
  still refused."""
  shards, info = _shards(HF_TINY, tmp_path / "old", old_record=True)
  said = []
  dataset_info.check_compatible(info, vocab=VocabId.of_dir(HF_TINY), vocab_side="--vocab_dir",
                                where=shards, warn=said.append)
  assert len(said) == 1 and said[0].startswith("warning: ") and "\n" not in said[0]
  assert f"no merges.txt is recorded for the shards in {shards}" in said[0], said[0]
  assert vocab_info.find_vocab_dir(shards, info) == shards
  # A model dir whose config.json records the old shards' vocabulary (no vocab files there).
  model_dir = str(tmp_path / "model")
  ModelDir(model_dir).write({"model": tiny_config().to_dict(), "data": {"vocab": info["vocab"]}})
  assert ModelDir(model_dir).vocabulary().files == (("vocab.json", info["vocab"]["sha256"]),)
  said.clear()
  ModelDir(model_dir).check_vocabulary(VocabId.of_dir(HF_TINY), ("--eval_data", HF_TINY),
                                       HF_TINY, hint="", warn=said.append)
  assert len(said) == 1 and f"no merges.txt is recorded for --model_dir='{model_dir}'" in said[0]
  swapped = vocab_files.VocabId.of({"vocab.json": "0" * 64}, 8000)
  with pytest.raises(vocab_growth.VocabGrowthError, match="is of another vocabulary"):
    ModelDir(model_dir).check_vocabulary(swapped, ("--eval_data", "x"), None, hint="")
  said.clear()  # both complete: nothing to say
  dataset_info.check_compatible(_shards(HF_TINY, tmp_path / "new")[1], warn=said.append,
                                vocab=VocabId.of_dir(HF_TINY))
  assert said == []
