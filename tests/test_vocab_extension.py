"""`data_prep.train_tokenizer --extend_from --add_tokens` (data_prep/vocab_extension.py): a
vocabulary grown on a domain corpus keeps every old id and merge rank, HF `tokenizers` gives the
same ids as ours on the grown files, words no new merge touches keep their ids, and the model
side (roberta_tf/tokenization/vocab_growth.py) reads the growth back."""

import json
import os
import shutil

import pytest
from tokenizers import models as hf_models

from data_prep import train_tokenizer, vocab_extension
from data_prep.vocab_settings import VocabSettings
from roberta_tf.common import files
from roberta_tf.tokenization import vocab_files, vocab_growth
from roberta_tf.tokenization.tokenizer import BytePairTokenizer
from tests.conftest import HF_TINY, TESTDATA
from tests.domain_text import domain_lines, write_domain_corpus
from tests.harness import call_module
from tests.test_tokenizer import corpus_lines, hf_ids, hf_tokenizer

SMALL = os.path.join(TESTDATA, "python_docs_small.jsonl.gz")
ADD = 60


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
  """(domain corpus, grown vocab dir, counters): HF_TINY's 8000-token vocabulary (an imported
  tokenizer; its <mask> is id 4) grown by up to ADD tokens on the domain corpus."""
  root = tmp_path_factory.mktemp("grown")
  corpus_path = write_domain_corpus(root / "domain.txt")
  counts = train_tokenizer.extend(VocabSettings(
      input=corpus_path, extend_from=HF_TINY, add_tokens=ADD, output_dir=str(root / "vocab"),
      progress=False))
  return corpus_path, str(root / "vocab"), counts


def _read(directory):
  with open(os.path.join(directory, "vocab.json"), encoding="utf-8") as f:
    vocab = json.load(f)
  return vocab, vocab_files.read_merges(os.path.join(directory, "merges.txt"))


def test_old_ids_and_ranks_kept_new_after(grown):
  _, vocab_dir, counts = grown
  old_vocab, old_merges = _read(HF_TINY)
  vocab, merges = _read(vocab_dir)
  assert counts["added"] == ADD and len(vocab) == 8000 + ADD == counts["vocab_size"]
  assert all(vocab[t] == i for t, i in old_vocab.items())           # every old id kept
  assert merges[:len(old_merges)] == old_merges                     # every old rank kept
  new = merges[len(old_merges):]
  assert len(new) == ADD
  # One new token per new merge, made in rank order, at ids 8000, 8001, ...
  assert [vocab[a + b] for a, b in new] == list(range(8000, 8000 + ADD))
  assert not {a + b for a, b in new} & set(old_vocab)
  assert counts["new_tokens_per_word"] < counts["old_tokens_per_word"]
  assert "Ġbegat" in vocab or "Ġbeg" in vocab  # a domain word became (part of) a token


def test_hf_agrees_and_untouched_words_keep_their_ids(grown):
  corpus_path, vocab_dir, _ = grown
  ours_old, ours = BytePairTokenizer.from_dir(HF_TINY), BytePairTokenizer.from_dir(vocab_dir)
  hf = hf_tokenizer(*vocab_files.paths(vocab_dir))
  with open(corpus_path, encoding="utf-8") as f:
    domain = [line for line in f.read().split("\n") if line]
  general = corpus_lines(SMALL)[:300]
  texts = domain[:200] + general + ["is <mask> here", "Jehoshaphat begat <mask>."]
  assert ours(texts).to_list() == hf_ids(hf, texts)
  assert ours.mask_id == 4
  # Word by word: a word whose old pieces hold no new merge's pair is encoded as before.
  _, merges = _read(vocab_dir)
  new_pairs = set(merges[-ADD:])
  words = sorted(vocab_extension.count_words(general + domain[:50]))
  before = vocab_extension.old_pieces(words, *_read(HF_TINY))
  after = vocab_extension.old_pieces(words, *_read(vocab_dir))
  untouched = [w for w in words if not set(zip(before[w], before[w][1:])) & new_pairs]
  assert len(untouched) > len(words) // 2
  assert all(after[w] == before[w] for w in untouched)
  assert any(after[w] != before[w] for w in words)
  # And in ids, through both tokenizers, on the general text (few domain words there).
  old_ids, new_ids = ours_old(general).to_list(), ours(general).to_list()
  same = sum(a == b for a, b in zip(old_ids, new_ids, strict=True))
  assert same > 0.9 * len(general)


def test_roberta_layout_new_ids_after_mask(tmp_path):
  """A vocabulary trained here (<mask> last, id V - 1): the new tokens come after <mask>, and
  ours and HF still agree; <mask> written in a text is still id V - 1."""
  train_tokenizer.train(VocabSettings(input=SMALL, output_dir=str(tmp_path / "old"),
                                      vocab_size=700, progress=False))
  corpus_path = write_domain_corpus(tmp_path / "domain.txt", count=200)
  counts = train_tokenizer.extend(VocabSettings(
      input=corpus_path, extend_from=str(tmp_path / "old"), add_tokens=40,
      output_dir=str(tmp_path / "new"), progress=False))
  vocab, _ = _read(tmp_path / "new")
  assert vocab["<mask>"] == 699 and counts["vocab_size"] == 740
  assert sorted(vocab.values()) == list(range(740))
  ours = BytePairTokenizer.from_dir(str(tmp_path / "new"))
  hf = hf_tokenizer(*vocab_files.paths(str(tmp_path / "new")))
  texts = domain_lines(50, seed=1) + ["Thou shalt <mask> unto Jerusalem.", "<s>begat</s>"]
  ids = ours(texts).to_list()
  assert ids == hf_ids(hf, texts)
  assert max(i for row in ids for i in row) >= 700  # new tokens used
  assert ours(["Thou shalt <mask>"]).to_list()[0][-1] == 699


def test_model_side_pieces(grown):
  """vocab_growth.plan reads the growth back: sizes, new tokens, and the old pieces of each
  (HF's old BPE of the token's bytes)."""
  _, vocab_dir, _ = grown
  plan = vocab_growth.plan(HF_TINY, vocab_dir)
  old_vocab, old_merges = _read(HF_TINY)
  hf_old = hf_models.BPE(vocab=old_vocab, merges=old_merges)
  assert (plan.old_size, plan.new_size, len(plan.tokens)) == (8000, 8000 + ADD, ADD)
  for token, pieces in zip(plan.tokens, plan.pieces, strict=True):
    assert list(pieces) == [old_vocab[t.value] for t in hf_old.tokenize(token)]
    assert len(pieces) >= 2
  assert vocab_growth.plan(HF_TINY, HF_TINY) is None


def test_model_side_refuses_a_vocabulary_that_does_not_extend(tmp_path):
  train_tokenizer.train(VocabSettings(input=SMALL, output_dir=str(tmp_path / "other"),
                                      vocab_size=700, progress=False))
  with pytest.raises(vocab_growth.VocabGrowthError, match="does not extend"):
    vocab_growth.plan(HF_TINY, str(tmp_path / "other"))
  with pytest.raises(vocab_growth.VocabGrowthError, match="has no vocab.json"):
    vocab_growth.plan(str(tmp_path), HF_TINY)


def swapped_vocabulary(src_dir, dst_dir, a: int = 300, b: int = 301) -> str:
  """`src_dir`'s vocabulary with the tokens of ids `a` and `b` swapped in vocab.json (same size,
  two ids differ; merges.txt copied): another vocabulary a size check cannot tell apart."""
  vocab, _ = _read(src_dir)
  by_id = {i: t for t, i in vocab.items()}
  vocab[by_id[a]], vocab[by_id[b]] = b, a
  os.makedirs(dst_dir, exist_ok=True)
  with open(os.path.join(dst_dir, "vocab.json"), "w", encoding="utf-8") as f:
    json.dump(vocab, f)
  shutil.copy(os.path.join(src_dir, "merges.txt"), dst_dir)
  return str(dst_dir)


def test_vocabularies_meet_by_content(grown, tmp_path):
  """vocab_growth.check: the same content passes (other bytes too); another vocabulary of the
  same size, or a grown one where the model may not grow, is refused in one line naming both
  sides; a grown one where it may grow gives the plan."""
  _, vocab_dir, _ = grown
  model = vocab_files.VocabId.of_dir(HF_TINY)
  assert model.size == 8000 and model.same(vocab_files.VocabId.of_dir(HF_TINY))
  vocab, _ = _read(HF_TINY)
  os.makedirs(tmp_path / "reindented")
  (tmp_path / "reindented" / "vocab.json").write_text(json.dumps(vocab, indent=1))
  shutil.copy(os.path.join(HF_TINY, "merges.txt"), tmp_path / "reindented")
  swapped = swapped_vocabulary(HF_TINY, tmp_path / "swapped")

  def check(other_dir, grow):
    return vocab_growth.check(
        model, vocab_files.VocabId.of_dir(str(other_dir)), model_side=("--init_from", HF_TINY),
        other_side=("--train_data", str(other_dir)), model_dir=HF_TINY,
        other_dir=str(other_dir), grow=grow, hint="HINT")
  assert check(tmp_path / "reindented", grow=False) is None
  assert check(vocab_dir, grow=True).new_size == 8000 + ADD
  for other_dir, grow, detail in (
      (swapped, True, "does not extend"), (swapped, False, "2 of the 8000 ids"),
      (vocab_dir, False, f"--train_data's extends it with {ADD} tokens")):
    with pytest.raises(vocab_growth.VocabGrowthError) as error:
      check(other_dir, grow)
    message = str(error.value)
    assert "\n" not in message and detail in message, message
    assert f"--train_data={str(other_dir)!r}" in message and f"--init_from={HF_TINY!r}" in message
  # The model's vocabulary unknown (a dir without vocab files): nothing to compare.
  assert vocab_growth.check(None, model, model_side=("--init_from", "m"), other_side=(
      "--train_data", "s"), model_dir=None, other_dir=None, grow=False, hint="") is None


def test_an_extension_that_adds_nothing_says_so():
  counts = {"added": 0, "old_vocab_size": 8000, "vocab_size": 8000, "num_merges": 7745,
            "documents": 3, "sentences": 40, "invalid_utf8": 0}
  line = vocab_extension.report(counts, "old", "new", 20, 2)
  assert line.startswith("warning: --add_tokens=20 added nothing") and "\n" not in line
  assert "--extend_from=old" in line and "same 8000 tokens" in line
  counts.update(added=2, vocab_size=8002, old_tokens_per_word=2.0, new_tokens_per_word=1.5)
  assert vocab_extension.report(counts, "old", "new", 20, 2).startswith(
      "wrote new/vocab.json (8002 tokens: 8000 of old with their ids, 2 new at ids 8000..8001)")


def test_binary_and_refusals(tmp_path):
  corpus_path = write_domain_corpus(tmp_path / "domain.txt", count=100)
  out = call_module("data_prep.train_tokenizer", f"--extend_from={HF_TINY}", "--add_tokens=10",
                    f"--input={corpus_path}", f"--output_dir={tmp_path / 'v'}", "--noprogress")
  assert out.returncode == 0, out.stderr
  assert "8010 tokens: 8000 of" in out.stderr and "new at ids 8000..8009" in out.stderr
  for args, message in (
      (["--add_tokens=10"], "--add_tokens needs --extend_from"),
      ([f"--extend_from={HF_TINY}", "--add_tokens=10", "--vocab_size=9000"],
       "--vocab_size does not apply"),
      ([f"--extend_from={HF_TINY}", "--add_tokens=0"],
       "--add_tokens must be >= 1 with --extend_from, got 0"),
      ([f"--extend_from={tmp_path / 'nowhere'}", "--add_tokens=5"], "vocab.json not found"),
      ([f"--extend_from={tmp_path / 'v'}", "--add_tokens=5", "--overwrite"],
       "is --extend_from")):
    output_dir = tmp_path / "v" if "is --extend_from" in message else tmp_path / "w"
    out = call_module("data_prep.train_tokenizer", f"--input={corpus_path}",
                      f"--output_dir={output_dir}", "--noprogress", *args)
    assert out.returncode == 1 and message in out.stderr, (args, out.stderr)


def test_on_ram_urls(tmp_path):
  """Old vocabulary, corpus and output on ram://: the same files as on local disk."""
  corpus_path = write_domain_corpus(tmp_path / "domain.txt", count=100)
  root = "ram://vocab_extension_test"
  for name in vocab_files.FILES:
    files.copy(os.path.join(HF_TINY, name), f"{root}/old/{name}")
  files.copy(corpus_path, f"{root}/domain.txt")
  train_tokenizer.extend(VocabSettings(input=f"{root}/domain.txt", extend_from=f"{root}/old",
                                       add_tokens=12, output_dir=f"{root}/new", progress=False))
  train_tokenizer.extend(VocabSettings(input=corpus_path, extend_from=HF_TINY, add_tokens=12,
                                       output_dir=str(tmp_path / "new"), progress=False))
  for name in vocab_files.FILES:
    assert files.read_bytes(f"{root}/new/{name}") == (tmp_path / "new" / name).read_bytes()
  assert not os.path.exists("ram:")
