"""The token classifier's SavedModel (`tag` signature) and the `tag` binary: one tiny fine-tune
on synthetic NER (max_seq_len 16, doc_stride 6: most dev sentences are windowed), exported,
reloaded in a fresh process (TF2 and TF1 loaders, core ops only) and checked against the
training code's word predictions, transformers' entity grouping and eval_results.json."""

import json
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.finetuning import featurize, finetuned_dir, sweep_runner
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.finetuning.tagging import tag_features, tag_read, tag_tf, tag_write
from roberta_tf.serving import finetuned_export
from tests import finetune_fixtures as fx
from tests import serving_loaders
from tests.harness import call_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

# Whitespace other than single spaces, words the fixture vocabulary cuts at their first
# character, special-token strings, NUL.
EXTRA = ["", "   ", "Zoë\tmet  Bob\n in Paris .", "\u3000Bob\u00a0met\x1cAlice\u2003x ",
         "日本語 Élodie met Nadia", "<mask> Bob <s> met\x00 Carol"]


def _spans(text: str) -> list[tuple[int, int]]:
  """Python's str.split() words as (start, end) character offsets."""
  spans, start = [], None
  for i, c in enumerate(text + " "):
    if c.isspace() and start is not None:
      spans.append((start, i))
      start = None
    elif not c.isspace() and start is None:
      start = i
  return spans


@pytest.fixture(scope="module")
def tagger(tmp_path_factory, hf_tiny_dir):
  """(model dir, export dir, dev sentences, texts: the dev sentences' + EXTRA, short texts:
  _short_texts) after one 3-epoch fine-tune."""
  root = tmp_path_factory.mktemp("tagging_export")
  pretrained = fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained"))
  train = fx.write_conll(str(root / "train.conll"), fx.ner_sentences(96, 0))
  dev = fx.write_conll(str(root / "dev.conll"), fx.ner_sentences(64, 1))
  model_dir = str(root / "tagger")
  sweep_runner.run_sweep(FinetuneConfig.from_dict(dict(
      task="token_classification", model_dir=model_dir, train_file=train, eval_file=dev,
      init_from=pretrained, max_seq_len=16, doc_stride=6, batch_size=16, epochs=3,
      learning_rate=2e-3, seeds=1)))
  export_dir = finetuned_export.export_saved_model(model_dir, str(root / "sm"))
  sentences = tag_read.read_tagged(dev)
  return (model_dir, export_dir, sentences, [" ".join(s.words) for s in sentences] + EXTRA,
          _short_texts(sentences, finetuned_dir.load_tokenizer(model_dir), 14))


def _short_texts(sentences, tokenizer, most: int) -> list[str]:
  """The longest prefix and suffix of each sentence's words that fits in `most` pieces."""
  out = []
  for sentence in sentences:
    counts = [len(p) for p in tag_features.encode_words(tokenizer, [sentence.words])[0]]
    fits = np.cumsum(counts) <= most
    out.append(" ".join(sentence.words[:int(fits.sum())]))
    fits = np.cumsum(counts[::-1]) <= most
    out.append(" ".join(sentence.words[len(counts) - int(fits.sum()):]))
  return out


@pytest.fixture(scope="module")
def reloaded(tagger, tmp_path_factory):
  """The tag and tag_info signatures in a fresh process: {"tf2" | "tf1": outputs}."""
  _, export_dir, _, texts, short = tagger
  # tag_info (scalar strings, which loader_runs' TF1 side cannot keep) is read by the binary.
  runs = {export_dir: [("tag", "tag", {"text": texts}), ("short", "tag", {"text": short})]}
  got = serving_loaders.loader_runs(runs, str(tmp_path_factory.mktemp("reloaded") / "out.npz"))
  return {loader: got[loader][export_dir] for loader in got}


@pytest.fixture(scope="module")
def in_process(tagger):
  """The training code's view of the dev sentences: pieces, windows, each window's logits."""
  model_dir, _, sentences = tagger[:3]
  model, _, info = finetuned_dir.load(model_dir, dtype="float32")
  tokenizer = finetuned_dir.load_tokenizer(model_dir)
  pieces = tag_features.encode_words(tokenizer, [s.words for s in sentences])
  features = tag_features.featurize_sentences(
      pieces, None, max_seq_len=info.max_seq_len, doc_stride=info.doc_stride,
      template=tokenizer.template)
  dense = featurize.to_dense(tf.ragged.constant(features.input_ids), tokenizer.pad_id)
  logits = model(dense, training=False)["logits"].numpy()
  return model, tokenizer, info, pieces, features, list(logits)


def _text_outputs(out: dict, i: int, key: str = "tag") -> dict:
  """Text i's unpadded outputs (of the call `key`)."""
  out = serving_loaders.outputs_of(out, key)
  words, entities = int(out["num_words"][i]), int(out["num_entities"][i])
  pieces = int(out["num_pieces"][i])
  return {"tags": [t.decode() for t in out["word_tags"][i, :words]],
          "spans": list(zip(out["word_start"][i, :words].tolist(),
                            out["word_end"][i, :words].tolist(), strict=True)),
          "entities": [(out["entity_type"][i, e].decode(), int(out["entity_start"][i, e]),
                        int(out["entity_end"][i, e]), float(out["entity_score"][i, e]))
                       for e in range(entities)],
          "ids": out["token_ids"][i, :pieces].tolist(),
          "logits": out["token_logits"][i, :pieces]}


def test_session_loader_and_cli_match_tf2_loader(tagger, reloaded, tmp_path):
  tf2, tf1 = reloaded["tf2"], reloaded["tf1"]
  serving_loaders.assert_same(tf1, tf2, atol=1e-4)
  texts = tagger[3][:3] + ["", "Zoë met Bob"]
  got = serving_loaders.saved_model_cli_run(tagger[1], "tag", {"text": texts}, str(tmp_path))
  got = {f"tag/{k}": v for k, v in got.items()}
  for i in range(len(texts) - 2):
    cli, want = _text_outputs(got, i), _text_outputs(tf2, i)
    assert {k: cli[k] for k in ("tags", "spans", "ids")} == {
        k: want[k] for k in ("tags", "spans", "ids")}
    assert [e[:3] for e in cli["entities"]] == [e[:3] for e in want["entities"]]
  assert got["tag/num_entities"][-2] == 0 and got["tag/num_words"].tolist()[-2:] == [0, 3]


def test_word_tags_and_logits_are_the_training_codes(tagger, reloaded, in_process):
  """Every piece's logits from its max-context window, each word's tag at its first piece:
  tag_features' rules (the dev set's accuracy and F1 come from them)."""
  sentences, texts = tagger[2:4]
  _, tokenizer, info, pieces, features, logits = in_process
  tags, _ = tag_features.word_predictions(logits, features)
  width = info.max_seq_len - 2
  assert sum(len(np.concatenate(p)) > width for p in pieces) >= 20  # windows exercised
  first_window = 0
  for i, sentence in enumerate(sentences):
    got = _text_outputs(reloaded["tf2"], i)
    ids = np.concatenate(pieces[i])
    assert got["ids"] == ids.tolist()
    assert got["spans"] == _spans(texts[i])
    starts = tag_features.window_starts(len(ids), width, info.doc_stride)
    lengths = [min(width, len(ids) - s) for s in starts]
    window, position = tag_features._owner(  # pylint: disable=protected-access
        np.arange(len(ids)), starts, lengths)  # every piece's max-context window
    want = np.stack([logits[first_window + w][p] for w, p in zip(window, position, strict=True)])
    first_window += len(starts)
    np.testing.assert_allclose(got["logits"], want, atol=1e-4, err_msg=sentence.where)
    margin = np.sort(want, axis=1)
    near_tie = margin[:, -1] - margin[:, -2] < 1e-4
    counts = [len(p) for p in pieces[i]]
    first = np.cumsum(counts) - counts
    for k, (tag, want_tag) in enumerate(zip(got["tags"], tags[i], strict=True)):
      assert tag == info.labels[want_tag] or near_tie[first[k]], (sentence.where, k)
  # The edge texts: Python's split; empty and whitespace-only texts: no words, no entities.
  for i, text in enumerate(EXTRA, len(sentences)):
    got = _text_outputs(reloaded["tf2"], i)
    assert got["spans"] == _spans(text), repr(text)
    want_ids = tag_features.encode_words(tokenizer, [text.split()])[0] if text.split() else []
    assert got["ids"] == (np.concatenate(want_ids).tolist() if want_ids else []), repr(text)
  assert reloaded["tf2"]["tag/num_entities"][len(sentences):len(sentences) + 2].tolist() == [0, 0]


def _hf_groups(tags: list[str], scores: list[float], spans: list[tuple[int, int]]) -> list:
  """transformers 5.23's TokenClassificationPipeline.group_entities (with get_tag and
  group_sub_entities) over words, and postprocess's default ignore_labels ["O"], re-written
  here: [(entity_group, start, end, score)]."""
  def get_tag(name):
    if name.startswith("B-"):
      return "B", name[2:]
    if name.startswith("I-"):
      return "I", name[2:]
    return "I", name

  groups, current = [], []
  for k, tag in enumerate(tags):
    if current:
      bi, kind = get_tag(tag)
      if not (kind == get_tag(tags[current[-1]])[1] and bi != "B"):
        groups.append(current)
        current = []
    current.append(k)
  groups += [current] if current else []
  out = [(tags[g[0]].split("-", 1)[-1], spans[g[0]][0], spans[g[-1]][1],
          float(np.nanmean([scores[k] for k in g]))) for g in groups]
  return [e for e in out if e[0] != "O"]


def _word_scores(got: dict, first: np.ndarray) -> list[float]:
  return tf.reduce_max(tf.nn.softmax(got["logits"][first].astype(np.float64)), -1).numpy()


def test_entities_are_grouped_as_hf_groups_words(tagger, reloaded, in_process):
  sentences, texts = tagger[2:4]
  pieces = in_process[3]
  grouped = 0
  for i, text in enumerate(texts):
    got = _text_outputs(reloaded["tf2"], i)
    counts = ([len(p) for p in pieces[i]] if i < len(sentences) else
              [len(p) for p in tag_features.encode_words(in_process[1], [text.split()])[0]])
    first = np.cumsum(counts, dtype=np.int64) - np.asarray(counts, np.int64)
    want = _hf_groups(got["tags"], _word_scores(got, first), got["spans"])
    assert [e[:3] for e in got["entities"]] == [e[:3] for e in want], repr(text)
    np.testing.assert_allclose([e[3] for e in got["entities"]], [e[3] for e in want],
                               atol=1e-5, err_msg=repr(text))
    grouped += sum(e[2] - e[1] > len(text[e[1]:e[2]].split()[0]) for e in want)
  assert grouped >= 10  # multi-word entities were grouped (ORG, two-word LOC)


def test_grouping_rules_on_chosen_tags():
  """Label sets the NER model never predicts: plain tags, IOBES, B- after I-, an "O"-typed tag."""
  labels = ["O", "B-PER", "I-PER", "NN", "S-LOC", "E-LOC", "B-O"]
  tables = tag_tf.LabelTables(labels)
  cases = [[1, 2, 2, 1, 0, 2, 1], [3, 3, 0, 3], [4, 5, 5, 6, 0], [2, 2, 1, 0, 0]]
  tag = tf.constant([t for case in cases for t in case], tf.int64)
  score = np.linspace(0.3, 0.9, len(tag)).astype(np.float32)
  score[-4] = np.nan  # an I-PER word of the last case: its entity's score is the other word's
  spans = [(3 * k, 3 * k + 2) for case in cases for k in range(len(case))]
  splits = np.cumsum([0] + [len(c) for c in cases])
  starts, ends = (tf.constant(list(x), tf.int64) for x in zip(*spans, strict=True))
  kind, start, end, mean = tag_tf.group_entities(tables, tag, tf.constant(score),
                                                 tf.constant(splits, tf.int64), starts, ends)
  for row, case in enumerate(cases):
    rows = slice(splits[row], splits[row + 1])
    want = _hf_groups([labels[t] for t in case], score[rows].tolist(), spans[rows])
    got = list(zip([k.decode() for k in kind[row].numpy()], start[row].numpy().tolist(),
                   end[row].numpy().tolist(), strict=True))
    assert got == [e[:3] for e in want], case
    np.testing.assert_allclose(mean[row].numpy(), [e[3] for e in want], atol=1e-6)


@pytest.fixture(scope="module")
def hf_pipe(tagger, tmp_path_factory):
  """transformers' token-classification pipeline (aggregation_strategy="first") on the tagger's
  `convert_checkpoint --to_hf` folder."""
  transformers = pytest.importorskip("transformers")
  pytest.importorskip("torch")
  hf_dir = str(tmp_path_factory.mktemp("hf") / "tagger")
  proc = call_module("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={tagger[0]}",
                     f"--hf_dir={hf_dir}")
  assert proc.returncode == 0, proc.stderr
  return transformers.pipeline("token-classification", model=hf_dir, device="cpu",
                               aggregation_strategy="first")


def _hf_view(pipe, text: str, logits: np.ndarray):
  """(HF's word count: its guess from offsets, its entities) of postprocess on `logits` [P, K]
  of the text's pieces (the specials' rows are zeros: the pipeline skips them)."""
  # pylint: disable=import-outside-toplevel
  import torch
  from transformers.pipelines.token_classification import AggregationStrategy
  enc = pipe.tokenizer(text, return_tensors="pt", return_offsets_mapping=True,
                       return_special_tokens_mask=True)
  full = np.zeros([1, enc["input_ids"].shape[1], logits.shape[1]], np.float32)
  full[0, 1:-1] = logits
  outputs = {"logits": torch.from_numpy(full), "input_ids": enc["input_ids"], "sentence": text,
             "special_tokens_mask": enc["special_tokens_mask"], "is_last": True,
             "offset_mapping": enc["offset_mapping"]}
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "Tokenizer does not support real words": RoBERTa's BPE
    pre = pipe.gather_pre_entities(text, enc["input_ids"][0], full[0], enc["offset_mapping"][0],
                                   enc["special_tokens_mask"][0].numpy(),
                                   AggregationStrategy.FIRST)
    entities = pipe.postprocess([outputs], aggregation_strategy=AggregationStrategy.FIRST)
  return enc["input_ids"][0, 1:-1].tolist(), 1 + sum(not p["is_subword"] for p in pre[1:]), [
      (e["entity_group"], e["start"], e["end"], float(e["score"])) for e in entities]


def _assert_same_entities(got: list, want: list, text: str) -> None:
  assert [e[:3] for e in got] == [e[:3] for e in want], text
  np.testing.assert_allclose([e[3] for e in got], [e[3] for e in want], atol=1e-4, err_msg=text)


def test_entities_equal_hf_postprocessing_of_our_logits(tagger, reloaded, hf_pipe):
  """The pipeline's own word guess, aggregate_words "first" and group_entities on the
  signature's token_logits of every dev text (windowed ones included): the same entities
  wherever its guess finds our words (>= 50 texts); where it does not, a word's first
  character is cut into several pieces (tag_tf's documented difference) and HF finds more
  words."""
  sentences, texts = tagger[2], tagger[3]
  same = 0
  for i, text in enumerate(texts[:len(sentences)]):
    got = _text_outputs(reloaded["tf2"], i)
    ids, hf_words, entities = _hf_view(hf_pipe, text, got["logits"])
    assert ids == got["ids"], text
    if hf_words != len(got["spans"]):
      assert hf_words > len(got["spans"]), text
      continue
    same += 1
    _assert_same_entities(got["entities"], entities, text)
  assert same >= 50


def test_entities_equal_hf_pipeline_end_to_end(tagger, reloaded, hf_pipe):
  """The real pipeline (our model converted to RobertaForTokenClassification) on texts that fit
  its one window: the same entities, scores within 1e-4."""
  short = tagger[4]
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    results = hf_pipe(short)
  same = 0
  for i, (text, result) in enumerate(zip(short, results, strict=True)):
    got = _text_outputs(reloaded["tf2"], i, "short")
    _, hf_words, _ = _hf_view(hf_pipe, text, got["logits"])
    if hf_words != len(got["spans"]):
      continue
    same += 1
    want = [(e["entity_group"], e["start"], e["end"], float(e["score"])) for e in result]
    _assert_same_entities(got["entities"], want, text)
  assert same >= 50


def test_hostile_input_is_bounded(in_process):
  """Invalid UTF-8 and NUL (tagged as the repaired text); texts past max_chars or max_pieces:
  a prefix of their words, `truncated` set (tag_tf's bounds, made small); zero texts."""
  model, tokenizer, info = in_process[:3]
  raw = [b"\xff\x00Bob met\xc3", b"Alice met Bob " * 4, b"Bob " + b"x" * 60, b"a\xe2\x80\xa8" * 3]
  out = tag_tf.tag(model, tokenizer, tag_tf.LabelTables(info.labels), tf.constant(raw),
                   max_seq_len=info.max_seq_len, doc_stride=info.doc_stride, max_chars=30,
                       max_pieces=8)
  out = {k: v.numpy() for k, v in out.items()}
  for i, data in enumerate(raw):
    text = data.decode("utf-8", "replace")
    words = [w for w, (_, end) in zip(text.split(), _spans(text), strict=True) if end <= 30]
    counts = [len(p) for p in tag_features.encode_words(tokenizer, [words])[0]]
    kept = int(np.sum(np.cumsum(counts) <= 8))
    n = int(out["num_words"][i])
    assert n == kept, repr(text)
    assert list(zip(out["word_start"][i, :n], out["word_end"][i, :n])) == _spans(text)[:n]
    assert out["truncated"][i] == (kept < len(text.split())), repr(text)
  assert out["truncated"][1] and out["truncated"][2] and not out["truncated"][3]
  empty = tag_tf.tag(model, tokenizer, tag_tf.LabelTables(info.labels),
                     tf.constant([], tf.string), max_seq_len=16, doc_stride=6)
  assert empty["entity_type"].shape == (0, 1) and empty["token_logits"].shape == (0, 1, 6)
  assert sorted(tag_tf.WHITESPACE) == [c for c in range(0x110000) if chr(c).isspace()]


def test_tag_binary(tagger, reloaded, tmp_path):
  model_dir, export_dir, sentences, texts = tagger[:4]
  proc = call_module("roberta_tf.tag", f"--saved_model={export_dir}", texts[0], "")
  assert proc.returncode == 0, proc.stderr
  first = _text_outputs(reloaded["tf2"], 0)["entities"]
  for kind, start, end, score in first:
    assert f"  {kind} {start}:{end} {texts[0][start:end]!r} {score:.3f}" in proc.stdout
  assert proc.stdout.rstrip("\n").endswith("\n\n  (no entities)")

  lines = tmp_path / "texts.txt"
  chosen = [i for i, text in enumerate(texts)
            if i < 5 or i >= len(sentences) + 2 and "\n" not in text]
  lines.write_bytes("\r\n".join(texts[i] for i in chosen).encode("utf-8") + b"\r\n")
  out = tmp_path / "entities.jsonl"
  proc = call_module("roberta_tf.tag", f"--saved_model={export_dir}", f"--input_file={lines}",
                     f"--output_file={out}", "--batch_size=3")
  assert proc.returncode == 0, proc.stderr
  rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
  assert [r["text"] for r in rows] == [texts[i] for i in chosen]
  for row, i in zip(rows, chosen, strict=True):
    got = [(e["entity_group"], e["start"], e["end"], e["score"]) for e in row["entities"]]
    _assert_same_entities(got, _text_outputs(reloaded["tf2"], i)["entities"], row["text"])
    assert all(e["word"] == row["text"][e["start"]:e["end"]] for e in row["entities"])

  predictions = tmp_path / "predictions.conll"
  dev = os.path.join(os.path.dirname(model_dir), "dev.conll")
  proc = call_module("roberta_tf.tag", f"--saved_model={export_dir}", f"--eval_file={dev}",
                     f"--output_file={predictions}")
  assert proc.returncode == 0, proc.stderr
  metrics = json.loads(proc.stdout)
  with open(os.path.join(model_dir, "eval_results.json"), encoding="utf-8") as f:
    results = json.load(f)
  assert metrics["f1"] == pytest.approx(results["f1"], abs=1e-9)
  assert metrics["strict_f1"] == pytest.approx(results["strict_f1"], abs=1e-9)
  gold, predicted = tag_write.read_predictions(str(predictions))
  assert gold == [list(s.tags) for s in sentences]
  assert predicted == [_text_outputs(reloaded["tf2"], i)["tags"] for i in range(len(sentences))]


def test_tag_binary_refuses_bad_input(tagger, tmp_path):
  export_dir = tagger[1]
  other = tmp_path / "other_sm"
  module = tf.Module()
  module.f = tf.function(lambda x: {"y": x}, input_signature=[tf.TensorSpec([None], tf.string)])
  tf.saved_model.save(module, str(other), signatures={"classify": module.f})
  for args, message in [
      ([f"--saved_model={other}", "text"], "no tag signature"),
      ([f"--saved_model={tmp_path / 'missing'}", "text"], "not found"),
      ([f"--saved_model={export_dir}", f"--eval_file={tmp_path / 'none.conll'}"],
       "no such file"),
      ([f"--saved_model={export_dir}", "text", f"--input_file={tmp_path / 'x.txt'}"],
       "one of them")]:
    proc = call_module("roberta_tf.tag", *args)
    assert proc.returncode == 1, args
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], proc.stderr
