"""Multiple choice, extractive QA, regression and embeddings fine-tuned on a ModernBERT encoder
(issue 60 point 6): each through `finetune` (the one training step; 1 epoch of 1-2 updates on
the imported tiny HF fixture) with --export_dir, plus a bfloat16 export of each. All eight
exports are served on raw strings in one fresh process through the TF2 loader (which refuses an
op core TensorFlow lacks, as the session loaders do); QA's float32 export, the largest graph,
also through a TF1 session and saved_model_cli (RoBERTa's tests run every signature through
both); each against the fine-tuned model on the training featurization. Then back to Hugging
Face: `--to_hf` of the multiple-choice and QA models (our reader and, where installed,
transformers' AutoModelFor{MultipleChoice,QuestionAnswering} give our logits),
`--to_sentence_transformers` of the embedding model (SentenceTransformer.encode = `embed`), and
HF task folders imported as fine-tuned model dirs. HF's heads themselves are checked without
torch against transformers' logits in tests/testdata/modernbert_tiny/task_heads.npz (here and in
tests/test_models_modernbert.py)."""

import json
import os
import shutil
import time

import numpy as np
import pytest
import tensorflow as tf
from safetensors.numpy import load_file, save_file

from roberta_tf import models
from roberta_tf.finetuning import featurize, finetuned_dir, problem_data
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.squad import read as squad_read
from roberta_tf.models.modernbert import modernbert_hf_tasks
from roberta_tf.models.modernbert import modernbert_hf_weights as mb_weights
from roberta_tf.serving import finetuned_export
from tests import finetune_fixtures as fx
from tests import serving_loaders
from tests.conftest import TESTDATA
from tests.harness import call_module

HF_FIXTURE = os.path.join(TESTDATA, "modernbert_tiny")
TEXTS = ["the film was great , I think", "Zoë keeps a red kettle in the shed.", "", "an [MASK]"]
# Past the embedder's 24 tokens, and whitespace: truncation and pre-tokenization as HF's.
EMBED_TEXTS = [*TEXTS, " ".join(["word"] * 40), "  spaced\tout  \n"]
# One batch shape (--batching=max_seq_len): the train and eval steps trace once (length buckets
# retrace per shape: 14 s of CPU a run instead of 8.5 here).
COMMON = ("--epochs=1", "--batch_size=8", "--learning_rates=1e-3", "--seeds=1",
          "--batching=max_seq_len")


def _data(root):
  """{task: (train path, dev path, extra flags)}; QA is the run with --dropout=0.2 (the head's
  classifier_dropout follows it)."""
  race = [fx.write_race(str(root / f"{s}.race.jsonl"), 2 if s == "train" else 1, seed)
          for seed, s in enumerate(("train", "dev"))]
  squad = [fx.write_squad(str(root / f"{s}.squad.json"), 2 if s == "train" else 1, seed)
           for seed, s in enumerate(("train", "dev"))]
  table = [fx.write_table(str(root / f"{s}.csv"), fx.sentiment_rows(16 if s == "train" else 8,
                                                                   seed))
           for seed, s in enumerate(("train", "dev"))]
  pairs = (fx.write_table(str(root / "emb.jsonl"), fx.embedding_rows(16, 0, negatives=True)),
           fx.write_beir(str(root / "beir"), 4, 1))
  return {
      "multiple_choice": (*race, ("--max_seq_len=48",)),
      "extractive_qa": (*squad, ("--max_seq_len=48", "--max_query_len=12", "--doc_stride=16",
                                 "--max_answer_len=6", "--dropout=0.2")),
      "regression": (*table, ("--max_seq_len=32", "--text_fields=sentence",
                              "--label_field=score")),
      "embedding": (*pairs, ("--max_seq_len=24", "--text_fields=query,document,negative",
                             "--pooling=mean")),
  }


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
  """{task: (fine-tuned model dir, float32 export, bfloat16 export)} and the data paths."""
  root = tmp_path_factory.mktemp("mb_tasks")
  pretrained = str(root / "M")
  proc = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={HF_FIXTURE}",
                     f"--model_dir={pretrained}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  data, out = _data(root), {}
  for task, (train, dev, flags) in data.items():
    start = time.perf_counter(), time.process_time()
    model_dir, export = str(root / task), str(root / f"{task}_sm")
    proc = call_module("roberta_tf.finetune", f"--task={task}", f"--train_file={train}",
                       f"--eval_file={dev}", f"--init_from={pretrained}",
                       f"--model_dir={model_dir}", f"--export_dir={export}", *COMMON, *flags)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bf16 = finetuned_export.export_saved_model(model_dir, str(root / f"{task}_bf16"),
                                               precision="bfloat16")
    out[task] = (model_dir, export, bf16)
    print(f"{task}: finetune + exports {time.perf_counter() - start[0]:.1f} s wall, "
          f"{time.process_time() - start[1]:.1f} s CPU")
  return out, data


def _inputs(runs):
  """{task: (signature, inputs, examples)} on the dev data (and odd texts)."""
  _, data = runs
  choices = problem_data.read_choice_examples(data["multiple_choice"][1])
  squad = squad_read.read_squad(data["extractive_qa"][1])[0]
  squad += [squad_read.SquadExample("odd", "Where?", "Zoë  habite à  Paris,\n\nprès de 日本.",
                                    (), True)]
  return {
      "multiple_choice": ("choose", {"context": [e.context for e in choices],
                                     "question": [e.question for e in choices],
                                     "options": [list(e.options) for e in choices]}, choices),
      "extractive_qa": ("answer", {"question": [e.question for e in squad],
                                   "context": [e.context for e in squad]}, squad),
      "regression": ("classify", {"text_a": TEXTS}, None),
      "embedding": ("embed", {"text": EMBED_TEXTS}, None),
  }


@pytest.fixture(scope="module")
def served(runs, tmp_path_factory):
  """Every export's signature through the TF2 and TF1 loaders in one fresh process."""
  spec = _inputs(runs)
  calls = {}
  for task, (_, export, bf16) in runs[0].items():
    signature, inputs, _ = spec[task]
    calls[export] = calls[bf16] = [(task, signature, inputs)]
  session = runs[0]["extractive_qa"][1]
  return serving_loaders.loader_runs(calls, str(tmp_path_factory.mktemp("served") / "o.npz"),
                                     tf2_only=[path for path in calls if path != session],
                                     timeout=900)


def _model(model_dir):
  model, config, info = finetuned_dir.load(model_dir)
  return model, config, info, finetuned_dir.load_tokenizer(model_dir)


def _batches(model_dir, problem_cls, examples):
  """The eval batches of examples through the training featurization, and the model's outputs
  on them."""
  model, _, info, tokenizer = _model(model_dir)
  problem = problem_cls(info, tokenizer, examples, examples)
  batches = list(problem.eval_dataset(8))
  outputs = [{k: v.numpy() for k, v in model(b, training=False).items()} for b in batches]
  return problem, batches, outputs


def _single(model_dir, texts):
  """Dense [CLS] text [SEP] inputs of texts at the run's max_seq_len, and the model's outputs."""
  model, _, info, tokenizer = _model(model_dir)
  ids = featurize.build_inputs(featurize.tokenize(tokenizer, texts), None, info.max_seq_len,
                               tokenizer.template)
  dense = featurize.to_dense(ids, tokenizer.pad_id)
  return dense, {k: v.numpy() for k, v in model(dense, training=False).items()}


def test_each_task_trained_on_the_modernbert_encoder(runs):
  for task, (model_dir, _, _) in runs[0].items():
    with open(os.path.join(model_dir, "eval_results.json"), encoding="utf-8") as f:
      history = json.load(f)["runs"][0]["history"]
    assert history[-1]["step"] >= 1 and np.isfinite(history[-1]["train_loss"]), task
    model, config, info, _ = _model(model_dir)
    assert config.family == "modernbert" and info.task_type == task
    if task == "embedding":
      assert model.head is None
    else:  # HF's head: pooling (sequence tasks), dense, GELU, norm, dropout, classifier
      assert model.head.task == {"multiple_choice": "multiple_choice", "regression":
                                 "sequence_classification",
                                 "extractive_qa": "question_answering"}[task]
      assert model.head.dropout.rate == config.classifier_dropout
  assert _model(runs[0]["extractive_qa"][0])[1].classifier_dropout == 0.2  # --dropout=0.2
  assert _model(runs[0]["regression"][0])[1].classifier_dropout == 0.0  # the fixture's


def test_exports_serve_the_fine_tuned_models_in_float32_and_bfloat16(runs, served):
  spec = _inputs(runs)
  dirs = runs[0]
  loaders = {task: ("tf2", "tf1") if task == "extractive_qa" else ("tf2",) for task in dirs}
  got = {task: {loader: serving_loaders.outputs_of(served[loader][dirs[task][1]], task)
                for loader in loaders[task]} for task in dirs}
  low = {task: serving_loaders.outputs_of(served["tf2"][dirs[task][2]], task) for task in dirs}
  want = {}
  _, _, outputs = _batches(dirs["multiple_choice"][0], problems_lib.MultipleChoiceProblem,
                           spec["multiple_choice"][2])
  logits = np.concatenate([o["logits"] for o in outputs])
  want["multiple_choice"] = {"probabilities": tf.nn.softmax(logits).numpy()}
  assert logits.shape == (len(spec["multiple_choice"][2]), 4)
  _, regression = _single(dirs["regression"][0], TEXTS)
  want["regression"] = {"value": regression["logits"]}
  _, embedded = _single(dirs["embedding"][0], EMBED_TEXTS)
  want["embedding"] = {"embeddings": embedded["embeddings"]}
  for task, values in want.items():
    for loader in loaders[task]:
      for name, value in values.items():
        np.testing.assert_allclose(got[task][loader][name], value, atol=1e-5, rtol=0,
                                   err_msg=f"{task} {loader}")
    for name, value in values.items():
      bf16 = low[task][name]
      assert bf16.dtype == np.float32 and not np.array_equal(bf16, value), task
      np.testing.assert_allclose(bf16, value, atol=0.05, rtol=0.02, err_msg=f"{task} bf16")
  assert got["multiple_choice"]["tf2"]["choice"].tolist() == logits.argmax(-1).tolist()
  # QA: the answers the Python decoding gives on the model's outputs, in both loaders.
  examples = spec["extractive_qa"][2]
  problem, _, outputs = _batches(dirs["extractive_qa"][0], problems_lib.ExtractiveQAProblem,
                                 examples)
  predictions, nbest, nulls = problem.evaluate(outputs).answers
  for loader in ("tf2", "tf1"):
    served_qa = got["extractive_qa"][loader]
    assert [a.decode() for a in served_qa["answer"]] == [predictions[e.id] for e in examples]
    for i, e in enumerate(examples):
      assert served_qa["null_score"][i] == pytest.approx(nulls[e.id], abs=1e-4)
      if nbest[e.id]:
        assert served_qa["score"][i] == pytest.approx(nbest[e.id][0].score, abs=1e-4)
  bf16, served_qa = low["extractive_qa"], got["extractive_qa"]["tf2"]
  assert {k: (v.dtype, v.shape) for k, v in bf16.items()} == {
      k: (v.dtype, v.shape) for k, v in served_qa.items()}
  np.testing.assert_allclose(bf16["null_score"], served_qa["null_score"], atol=0.1)


def test_saved_model_cli_answers_as_the_tf2_loader(runs, served, tmp_path):
  signature, inputs, _ = _inputs(runs)["extractive_qa"]
  export = runs[0]["extractive_qa"][1]
  got = serving_loaders.saved_model_cli_run(export, signature, inputs, str(tmp_path / "cli"))
  serving_loaders.assert_same(got, serving_loaders.outputs_of(served["tf2"][export],
                                                              "extractive_qa"), atol=1e-4)


def _to_hf(model_dir, hf_dir):
  proc = call_module("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={model_dir}",
                     f"--hf_dir={hf_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  with open(os.path.join(hf_dir, "config.json"), encoding="utf-8") as f:
    return json.load(f)


def _torch_inputs(torch, batch):
  return {"input_ids": torch.tensor(batch["input_ids"].numpy()).long(),
          "attention_mask": torch.tensor(batch["padding_mask"].numpy()).long()}


def test_to_hf_multiple_choice_and_question_answering(runs, tmp_path):
  spec, dirs = _inputs(runs), runs[0]
  hf = {task: str(tmp_path / task) for task in ("multiple_choice", "extractive_qa")}
  configs = {task: _to_hf(dirs[task][0], path) for task, path in hf.items()}
  assert configs["multiple_choice"]["architectures"] == ["ModernBertForMultipleChoice"]
  assert configs["extractive_qa"]["architectures"] == ["ModernBertForQuestionAnswering"]
  assert configs["extractive_qa"]["classifier_dropout"] == 0.2  # finetune's --dropout
  assert configs["multiple_choice"]["classifier_dropout"] == 0.0
  _, choice_batches, choice_ours = _batches(
      dirs["multiple_choice"][0], problems_lib.MultipleChoiceProblem, spec["multiple_choice"][2])
  _, qa_batches, qa_ours = _batches(dirs["extractive_qa"][0], problems_lib.ExtractiveQAProblem,
                                    spec["extractive_qa"][2])
  # Our reader of HF folders (what CI without torch checks) ...
  chooser, _ = modernbert_hf_tasks.load_hf_task(hf["multiple_choice"])
  reader, _ = modernbert_hf_tasks.load_hf_task(hf["extractive_qa"])
  for batch, ours in zip(choice_batches, choice_ours, strict=True):
    np.testing.assert_allclose(chooser(batch)["logits"].numpy(), ours["logits"], atol=1e-5)
  for batch, ours in zip(qa_batches, qa_ours, strict=True):
    real = batch["padding_mask"].numpy().astype(bool)
    back = reader(batch)
    for side in ("start", "end"):
      np.testing.assert_allclose(back[f"{side}_logits"].numpy()[real],
                                 ours[f"{side}_logits"][real], atol=1e-5)
  # ... and transformers, where installed.
  torch = pytest.importorskip("torch")
  transformers = pytest.importorskip("transformers")
  hf_choice = transformers.AutoModelForMultipleChoice.from_pretrained(hf["multiple_choice"])
  hf_qa = transformers.AutoModelForQuestionAnswering.from_pretrained(hf["extractive_qa"])
  assert type(hf_choice).__name__ == "ModernBertForMultipleChoice"
  assert type(hf_qa).__name__ == "ModernBertForQuestionAnswering"
  errors = []
  with torch.no_grad():
    for batch, ours in zip(choice_batches, choice_ours, strict=True):
      theirs = hf_choice.eval()(**_torch_inputs(torch, batch)).logits.numpy()
      errors.append(np.abs(theirs - ours["logits"]).max())
    for batch, ours in zip(qa_batches, qa_ours, strict=True):
      real = batch["padding_mask"].numpy().astype(bool)
      theirs = hf_qa.eval()(**_torch_inputs(torch, batch))
      for side in ("start", "end"):
        errors.append(np.abs(getattr(theirs, f"{side}_logits").numpy()[real]
                             - ours[f"{side}_logits"][real]).max())
  print(f"transformers vs ours, MC and QA logits max |diff|: {max(errors):.3g}")
  assert max(errors) < 1e-4


def test_to_sentence_transformers_of_a_modernbert_embedder(runs, served, tmp_path):
  model_dir, export, _ = runs[0]["embedding"]
  st_dir = str(tmp_path / "st")
  proc = call_module("roberta_tf.convert_checkpoint", f"--to_sentence_transformers={st_dir}",
                     f"--model_dir={model_dir}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  with open(os.path.join(st_dir, "config.json"), encoding="utf-8") as f:
    assert json.load(f)["architectures"] == ["ModernBertModel"]
  assert os.path.isfile(os.path.join(st_dir, "tokenizer.json"))
  model, config, _, _ = _model(model_dir)
  tensors = load_file(os.path.join(st_dir, "model.safetensors"))
  entries = mb_weights.encoder_weight_map(model.encoder, config.num_layers, prefix="")
  assert sorted(tensors) == sorted(key for key, _, _ in entries)
  for key, variable, transpose in entries:
    value = variable.numpy()
    np.testing.assert_array_equal(tensors[key], value.T if transpose else value, err_msg=key)
  st = pytest.importorskip("sentence_transformers")
  pytest.importorskip("torch")
  want = serving_loaders.outputs_of(served["tf2"][export], "embedding")["embeddings"]
  got = st.SentenceTransformer(st_dir, device="cpu").encode(EMBED_TEXTS)
  print(f"sentence-transformers vs embed max |diff|: {np.abs(got - want).max():.3g}")
  np.testing.assert_allclose(got, want, atol=1e-4, rtol=0)


def _hf_task_folder(path, architecture, kind, labels):
  """An HF ModernBertFor<task> folder: the fixture's encoder and task_heads.npz's `kind` head
  (make_model_fixture.py; transformers' logits of it are in the same file)."""
  heads = np.load(os.path.join(HF_FIXTURE, "task_heads.npz"))
  tensors = {k: v for k, v in load_file(os.path.join(HF_FIXTURE, "model.safetensors")).items()
             if k.startswith("model.")}
  tensors.update({k.split("/", 1)[1]: heads[k] for k in heads if k.startswith(kind + "/")})
  with open(os.path.join(HF_FIXTURE, "config.json"), encoding="utf-8") as f:
    hf = json.load(f)
  hf.update(architectures=[architecture], id2label=dict(enumerate(labels)),
            label2id={name: i for i, name in enumerate(labels)})
  os.makedirs(path)
  save_file(tensors, os.path.join(path, "model.safetensors"), metadata={"format": "pt"})
  with open(os.path.join(path, "config.json"), "w", encoding="utf-8") as f:
    json.dump(hf, f)
  for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
    shutil.copy(os.path.join(HF_FIXTURE, name), path)
  return str(path)


def test_hf_task_folders_import_as_fine_tuned_model_dirs(tmp_path):
  """convert_checkpoint --hf_dir of each ModernBertFor<task> folder writes a fine-tuned model
  dir whose model gives transformers' logits (task_heads.npz, the fixture's pooling: mean)."""
  heads = np.load(os.path.join(HF_FIXTURE, "task_heads.npz"))
  batch = np.load(os.path.join(HF_FIXTURE, "expected.npz"))
  inputs = {"input_ids": batch["batch_input_ids"], "padding_mask": batch["batch_attention_mask"]}
  real = inputs["padding_mask"].astype(bool)
  cases = {  # architecture: (heads' kind, labels, our task type)
      "ModernBertForSequenceClassification": ("seq", ["neg", "neutral", "pos"], "classification"),
      "ModernBertForTokenClassification": ("token", ["O", "B-PER", "I-PER"],
                                           "token_classification"),
      "ModernBertForMultipleChoice": ("choice", ["LABEL_0"], "multiple_choice"),
      "ModernBertForQuestionAnswering": ("qa", ["LABEL_0", "LABEL_1"], "extractive_qa"),
  }
  errors = {}
  for architecture, (kind, labels, task) in cases.items():
    folder = _hf_task_folder(tmp_path / kind, architecture, kind, labels)
    proc = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={folder}",
                       f"--model_dir={tmp_path / (kind + '_dir')}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    model, config, info = finetuned_dir.load(str(tmp_path / (kind + "_dir")))
    assert config.family == "modernbert" and info.task_type == task
    if task in ("classification", "token_classification"):
      assert list(info.labels) == labels
    if kind == "seq":
      errors[kind] = np.abs(model(inputs)["logits"].numpy() - heads["seq_logits_mean"]).max()
    elif kind == "token":
      errors[kind] = np.abs(model(inputs)["logits"].numpy()[real] - heads["token_logits"]).max()
    elif kind == "choice":
      grouped = {k: v[None] for k, v in inputs.items()}
      errors[kind] = np.abs(model(grouped)["logits"].numpy()
                            - heads["choice_logits_mean"]).max()
    else:
      out = model(inputs)
      errors[kind] = max(np.abs(out[f"{s}_logits"].numpy()[real] - heads[f"qa_{s}_logits"]).max()
                         for s in ("start", "end"))
  print("imported HF task folders vs transformers, max |diff|:", errors)
  assert max(errors.values()) < 1e-4


def test_squad_v2_answer_classifier_on_modernbert_and_its_to_hf_refusal(tmp_path):
  """SQuAD v2's answerability classifier (ours: HF has none) sits beside HF's QA head; --to_hf
  of such a model is refused in one line, nothing written."""
  pretrained = str(tmp_path / "M")
  proc = call_module("roberta_tf.convert_checkpoint", f"--hf_dir={HF_FIXTURE}",
                     f"--model_dir={pretrained}")
  assert proc.returncode == 0, proc.stderr[-2000:]
  config = models.read_config(pretrained)
  info = ProblemInfo("extractive_qa", 32, version_2=True, answer_classifier=True)
  model = finetuned_dir.new_model(config, info, init_from=pretrained)
  batch = np.load(os.path.join(HF_FIXTURE, "expected.npz"))
  out = model({"input_ids": batch["batch_input_ids"],
               "padding_mask": batch["batch_attention_mask"]})
  assert model.head.task == "question_answering" and out["answerable_logits"].shape == (3,)
  pads = ~batch["batch_attention_mask"].astype(bool)
  assert (out["start_logits"].numpy()[pads] < -1e8).all()  # no span starts at a pad
  model_dir = str(tmp_path / "qa2")
  finetuned_dir.write_config(model_dir, config, info)
  finetuned_dir.save_checkpoint(model_dir, model, 1)
  proc = call_module("roberta_tf.convert_checkpoint", "--to_hf", f"--model_dir={model_dir}",
                     f"--hf_dir={tmp_path / 'hf'}")
  lines = proc.stderr.strip().splitlines()
  assert proc.returncode == 1 and len(lines) == 1, proc.stderr
  assert "answerability classifier" in lines[0] and not (tmp_path / "hf").exists()
