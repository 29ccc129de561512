"""data_prep.train_tokenizer: RoBERTa id layout, determinism, formats, refusals, parity."""

import gzip
import importlib.util
import json
import os
import uuid

import pytest

from data_prep import corpus, train_tokenizer
from data_prep.vocab_settings import VocabSettings
from roberta_tf.common import files
from roberta_tf.tokenization import vocabulary
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from tests.conftest import TESTDATA
from tests.harness import call_module
from tests.test_tokenizer import corpus_lines, hf_ids, hf_tokenizer

SMALL = os.path.join(TESTDATA, "python_docs_small.jsonl.gz")


def _train(out, vocab_size=600, **kwargs):
  return train_tokenizer.train(VocabSettings(input=SMALL, output_dir=str(out),
                                             vocab_size=vocab_size, progress=False, **kwargs))


def test_layout_and_parity(tmp_path):
  counts = _train(tmp_path)
  assert counts["vocab_size"] == 600 and counts["num_merges"] == 600 - 4 - 256 - 1
  with open(tmp_path / "vocab.json", encoding="utf-8") as f:
    vocab = json.load(f)
  assert sorted(vocab.values()) == list(range(600))
  assert [vocab[t] for t in ("<s>", "<pad>", "</s>", "<unk>", "<mask>")] == [0, 1, 2, 3, 599]
  merges = (tmp_path / "merges.txt").read_text(encoding="utf-8").split("\n")
  assert merges[0] == "#version: 0.2" and merges[-1] == "" and len(merges) == 2 + 339
  assert sorted(os.listdir(tmp_path)) == ["merges.txt", "vocab.json"]  # no temp files left
  tok = BytePairTokenizer.from_dir(str(tmp_path))
  assert (tok.vocab_size, tok.mask_id, tok.all_occurrences) == (600, 599, True)
  lines = corpus_lines(SMALL)[:500] + ["is <mask> here", "<s>x</s>"]
  hf = hf_tokenizer(str(tmp_path / "vocab.json"), str(tmp_path / "merges.txt"))
  assert tok(lines).to_list() == hf_ids(hf, lines)


def test_deterministic(tmp_path):
  _train(tmp_path / "a", min_frequency=3)
  _train(tmp_path / "b", min_frequency=3)
  for name in ("vocab.json", "merges.txt"):
    assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_min_frequency_limits_vocab(tmp_path):
  counts = _train(tmp_path, vocab_size=50265, min_frequency=50)
  assert counts["vocab_size"] < 50265  # the corpus cannot supply more frequent pairs
  with open(tmp_path / "vocab.json", encoding="utf-8") as f:
    vocab = json.load(f)
  assert vocab["<mask>"] == len(vocab) - 1


def test_txt_and_jsonl_inputs(tmp_path):
  data = tmp_path / "data"
  data.mkdir()
  (data / "a.txt").write_text("hello world\nhello there\n\nsecond doc here\n", encoding="utf-8")
  with gzip.open(data / "b.jsonl.gz", "wt", encoding="utf-8") as f:
    f.write(json.dumps({"text": "hello again\nworld peace"}) + "\n")
  spec = f"{data}/*.txt,{data / 'b.jsonl.gz'}"
  counts = train_tokenizer.train(VocabSettings(input=spec, output_dir=str(tmp_path / "out"),
                                               vocab_size=300, min_frequency=1, progress=False))
  assert counts["documents"] == 3 and counts["sentences"] == 5
  tok = BytePairTokenizer.from_dir(str(tmp_path / "out"))
  assert tok.id_to_token(tok("hello").numpy()[0]) == "hello"  # a frequent word is one token


def test_refusals(tmp_path):
  _train(tmp_path)
  before = (tmp_path / "vocab.json").read_bytes()
  with pytest.raises(train_tokenizer.TrainTokenizerError, match="not empty"):
    _train(tmp_path, vocab_size=700)
  assert (tmp_path / "vocab.json").read_bytes() == before
  _train(tmp_path, vocab_size=700, overwrite=True)
  assert BytePairTokenizer.from_dir(str(tmp_path)).vocab_size == 700
  with pytest.raises(ValueError, match=r"^--vocab_size must be >= 261, got 100$"):
    _train(tmp_path / "new", vocab_size=100)
  with pytest.raises(corpus.CorpusError, match="nothing"):
    train_tokenizer.train(VocabSettings(input=str(tmp_path / "nothing*.txt"),
                                        output_dir=str(tmp_path / "new"), vocab_size=600,
                                        progress=False))


def test_binary(tmp_path):
  out = tmp_path / "vocab"
  cmd = ["data_prep.train_tokenizer", f"--input={SMALL}", "--vocab_size=400",
         f"--output_dir={out}"]
  result = call_module(*cmd)
  assert result.returncode == 0, result.stderr[-2000:]
  assert "400 tokens, <mask>=399" in result.stderr and "MB/s" in result.stderr
  result = call_module(*cmd)
  assert result.returncode != 0 and "not empty" in result.stderr


def test_binary_on_urls(tmp_path):
  """--input=ram://corpus/*.jsonl and --output_dir=ram://vocab, in process: the local files."""
  ram = f"ram://{uuid.uuid4().hex}"
  with gzip.open(SMALL, "rt", encoding="utf-8") as f:
    lines = [line for line in f if line.strip()]
  files.makedirs(f"{ram}/corpus")
  (tmp_path / "corpus").mkdir()
  for i in range(2):
    for root in (f"{ram}/corpus", str(tmp_path / "corpus")):
      with files.open(files.join(root, f"part{i}.jsonl"), "w") as f:
        f.writelines(lines[i::2])
  train_tokenizer.train(VocabSettings(input=f"{tmp_path}/corpus/*.jsonl",
                                      output_dir=str(tmp_path / "local"), vocab_size=400,
                                      progress=False))
  result = call_module("data_prep.train_tokenizer", f"--input={ram}/corpus/*.jsonl",
                       "--vocab_size=400", f"--output_dir={ram}/vocab", "--noprogress")
  assert result.returncode == 0, result.stderr[-2000:]
  assert f"wrote {ram}/vocab/vocab.json (400 tokens" in result.stderr
  assert sorted(files.listdir(f"{ram}/vocab")) == ["merges.txt", "vocab.json"]
  for name in ("vocab.json", "merges.txt"):
    assert files.read_bytes(f"{ram}/vocab/{name}") == (tmp_path / "local" / name).read_bytes()
  result = call_module("data_prep.train_tokenizer", f"--input={ram}/corpus/*.jsonl",
                       "--output_dir=nofs://v")
  assert result.returncode == 1 and "--output_dir=nofs://v: no file system" in result.stderr
  assert not os.path.exists("ram:")


def test_tokenizer_json_format(tmp_path):
  """--format=tokenizer_json: ModernBERT's pipeline, which HF, transformers (where installed)
  and our PipelineTokenizer read alike; --extend_from refuses it."""
  tokenizers = pytest.importorskip("tokenizers")
  counts = _train(tmp_path, vocab_size=400, format="tokenizer_json")
  assert counts["vocab_size"] == 400 and counts["num_merges"] == 400 - 256 - 28
  assert sorted(os.listdir(tmp_path)) == [
      "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]
  v = vocabulary.Vocabulary.of_dir(str(tmp_path))
  assert v.special_ids == {"bos": 396, "pad": 398, "eos": 397, "unk": 395, "mask": 399}
  assert v.template.pair([5], [6]) == [396, 5, 397, 6, 397]
  tok = PipelineTokenizer.from_dir(str(tmp_path))
  hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
  lines = corpus_lines(SMALL)[:500] + ["is  [MASK] here", "Cafe\u0301   x"]
  assert tok(lines).to_list() == [e.ids for e in hf.encode_batch(lines, add_special_tokens=False)]
  assert tok.token_to_id("  ") == 395 - 1
  if importlib.util.find_spec("transformers"):
    import transformers  # pylint: disable=import-outside-toplevel
    auto = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    assert auto(lines[:50], lines[50:100])["input_ids"] == tok.apply_template(
        tok(lines[:50]), tok(lines[50:100])).to_list()
  result = call_module("data_prep.train_tokenizer", f"--input={SMALL}", "--extend_from=x",
                       "--add_tokens=3", f"--output_dir={tmp_path / 'g'}",
                       "--format=tokenizer_json")
  assert result.returncode != 0 and "--format=tokenizer_json" in result.stderr
