"""Fine-tuned SavedModels: each problem type's raw-string signature, reloaded in a fresh process
that imports only tensorflow, against the in-process model and Python decoding; and through the
session-based loaders TF Serving's loader stands for (saved_model_cli, TF1)."""

import os

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.finetuning import finetuned_dir, problem_data
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.squad import read as squad_read
from roberta_tf.serving import finetuned_export
from tests import finetune_fixtures as fx
from tests import serving_loaders

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

LONG = " ".join(["word"] * 200)
PAIRS = [("the film was great , I think", "a note"), ("awful", ""), ("", "x"), (LONG, LONG),
         ("Zoë's 日本語 <mask> review", "second text")]


def _model_dir(root, pretrained, info):
  """A fine-tuned model dir as the trainer writes it (weights: pretrained encoder, fresh head)."""
  path = str(root / info.task_type)
  model_config = models.read_config(pretrained)
  tf.keras.utils.set_random_seed(1)
  model = finetuned_dir.new_model(model_config, info, init_from=pretrained)
  finetuned_dir.write_config(path, model_config, info)
  finetuned_dir.save_checkpoint(path, model, 1)
  finetuned_dir.copy_tokenizer(pretrained, path)
  return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory, hf_tiny_dir):
  root = tmp_path_factory.mktemp("finetune_export")
  pretrained = fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained"))
  infos = {
      "pair": ProblemInfo("classification", 32, labels=("neg", "pos", "zero"),
                          text_fields=("a", "b")),
      "regression": ProblemInfo("regression", 40, text_fields=("a",)),
      "choice": ProblemInfo("multiple_choice", 48, num_choices=4),
      "qa": ProblemInfo("extractive_qa", 40, max_query_len=10, doc_stride=7,
                        max_answer_len=5, version_2=True, null_score_threshold=0.5),
      # SQuAD v2 with the paper's answerability classifier deciding "no answer"
      "qa_cls": ProblemInfo("extractive_qa", 40, max_query_len=10, doc_stride=7,
                            max_answer_len=5, version_2=True,
                            null_score_threshold=-0.01, answer_classifier=True),
  }
  out = {}
  for name, info in infos.items():
    model_dir = _model_dir(root / name, pretrained, info)
    out[name] = (model_dir,
                 finetuned_export.export_saved_model(model_dir, str(root / f"{name}_sm")))
  for name in ("pair", "qa"):  # --export_precision=bfloat16 of two problems
    out[f"{name}_bf16"] = (out[name][0], finetuned_export.export_saved_model(
        out[name][0], str(root / f"{name}_bf16_sm"), precision="bfloat16"))
  squad_path = fx.write_squad(str(root / "squad.json"), paragraphs=3, seed=5, version_2=True)
  race_path = fx.write_race(str(root / "race.jsonl"), passages=2, seed=2)
  return out, squad_read.read_squad(squad_path)[0], problem_data.read_choice_examples(race_path)


def _in_process_outputs(model_dir, problem_cls, examples):
  """The model's outputs on examples through the training featurization (Python side)."""
  model, _, info = finetuned_dir.load(model_dir)
  problem = problem_cls(info, finetuned_dir.load_tokenizer(model_dir), examples, examples)
  outputs = [{k: v.numpy() for k, v in model(b, training=False).items()}
             for b in problem.eval_dataset(8)]
  return problem, outputs


def _spec(exported):
  """{problem: (export dir, signature, inputs)} on PAIRS and the fixtures' examples."""
  dirs, qa_examples, choice_examples = exported
  questions = [e.question for e in qa_examples] + ["Where?", "Qui?"]
  contexts = [e.context for e in qa_examples] + ["", "Zoë  habite à  Paris,\n\nprès de 日本."]
  spec = {
      "pair": (dirs["pair"][1], "classify", {"text_a": [a for a, _ in PAIRS],
                                             "text_b": [b for _, b in PAIRS]}),
      "regression": (dirs["regression"][1], "classify", {"text_a": [a for a, _ in PAIRS]}),
      "choice": (dirs["choice"][1], "choose", {
          "context": [e.context for e in choice_examples],
          "question": [e.question for e in choice_examples],
          "options": [list(e.options) for e in choice_examples]}),
      "qa": (dirs["qa"][1], "answer", {"question": questions, "context": contexts}),
      "qa_cls": (dirs["qa_cls"][1], "answer", {"question": questions, "context": contexts}),
  }
  for name in ("pair", "qa"):
    spec[f"{name}_bf16"] = (dirs[f"{name}_bf16"][1],) + spec[name][1:]
  return spec, questions, contexts


@pytest.fixture(scope="module")
def reloaded(exported, tmp_path_factory):
  """Every problem's signature on its inputs (_spec) through the TF2 and the TF1 loader, in one
  fresh process (serving_loaders.loader_runs): {"tf2" | "tf1": {export dir: outputs}}."""
  spec, _, _ = _spec(exported)
  return serving_loaders.loader_runs(
      {path: [(signature, signature, inputs)] for path, signature, inputs in spec.values()},
      str(tmp_path_factory.mktemp("reloaded") / "out.npz"))


def test_reloaded_signatures_match_training_featurization(exported, reloaded):
  dirs, qa_examples, choice_examples = exported
  spec, questions, contexts = _spec(exported)
  got = {f"{name}/{k.split('/', 1)[1]}": v for name, (path, _, _) in spec.items()
         for k, v in reloaded["tf2"][path].items()}

  pair_examples = [problem_data.TextExample(a, b, "neg") for a, b in PAIRS]
  _, outputs = _in_process_outputs(dirs["pair"][0], problems_lib.SequenceProblem, pair_examples)
  logits = np.concatenate([o["logits"] for o in outputs])
  np.testing.assert_allclose(got["pair/probabilities"], tf.nn.softmax(logits).numpy(), atol=1e-5)
  assert got["pair/label_id"].tolist() == logits.argmax(-1).tolist()
  assert got["pair/label"].tolist() == [[b"neg", b"pos", b"zero"][i] for i in logits.argmax(-1)]

  single = [problem_data.TextExample(a, None, 0.0) for a, _ in PAIRS]
  _, outputs = _in_process_outputs(dirs["regression"][0], problems_lib.SequenceProblem, single)
  np.testing.assert_allclose(got["regression/value"],
                             np.concatenate([o["logits"] for o in outputs]), atol=1e-5)

  _, outputs = _in_process_outputs(dirs["choice"][0], problems_lib.MultipleChoiceProblem,
                                   choice_examples)
  logits = np.concatenate([o["logits"] for o in outputs])
  np.testing.assert_allclose(got["choice/probabilities"], tf.nn.softmax(logits).numpy(),
                             atol=1e-5)
  assert got["choice/choice"].tolist() == logits.argmax(-1).tolist()

  extra = zip(questions[-2:], contexts[-2:], strict=True)
  examples = list(qa_examples) + [squad_read.SquadExample(f"extra{i}", q, c, (), True)
                                  for i, (q, c) in enumerate(extra)]
  for name in ("qa", "qa_cls"):
    problem, outputs = _in_process_outputs(dirs[name][0], problems_lib.ExtractiveQAProblem,
                                           examples)
    assert ("answerable_logits" in outputs[0]) == (name == "qa_cls")
    predictions, nbest, nulls = problem.evaluate(outputs).answers
    assert [a.decode("utf-8") for a in got[f"{name}/answer"]] == [predictions[e.id]
                                                                  for e in examples]
    for i, e in enumerate(examples):
      assert got[f"{name}/null_score"][i] == pytest.approx(nulls[e.id], abs=1e-4)
      if nbest[e.id]:
        assert got[f"{name}/score"][i] == pytest.approx(nbest[e.id][0].score, abs=1e-4)


def test_bfloat16_exports_serve_float32_outputs_close_to_float32(exported, reloaded):
  """--export_precision=bfloat16: the same outputs (names, dtypes, shapes) as the float32
  export, values to bf16's rounding; QA answers and the classifier's labels as float32's
  here (the dev-metric cost on real data: docs/serving.md)."""
  spec, _, _ = _spec(exported)
  for name in ("pair", "qa"):
    want, got = reloaded["tf2"][spec[name][0]], reloaded["tf2"][spec[f"{name}_bf16"][0]]
    assert want.keys() == got.keys()
    for key, value in want.items():
      assert (got[key].dtype, got[key].shape) == (value.dtype, value.shape), key
  pair = spec["pair"][0], spec["pair_bf16"][0]
  probs = [reloaded["tf2"][p]["classify/probabilities"] for p in pair]
  assert np.abs(probs[0] - probs[1]).max() < 0.02
  qa = [reloaded["tf2"][p] for p in (spec["qa"][0], spec["qa_bf16"][0])]
  finite = np.isfinite(qa[0]["answer/score"])
  assert (np.isfinite(qa[1]["answer/score"]) == finite).all()
  np.testing.assert_allclose(qa[1]["answer/null_score"], qa[0]["answer/null_score"], atol=0.05)
  agree = np.mean(qa[0]["answer/answer"] == qa[1]["answer/answer"])
  assert agree >= 0.8, (agree, qa[0]["answer/answer"], qa[1]["answer/answer"])


def test_session_loaders_match_tf2_loader(exported, reloaded, tmp_path):
  """Every problem's signature through the TF1 loader, the pair classifier's also through
  saved_model_cli run: tf.saved_model.load's outputs."""
  spec, _, _ = _spec(exported)
  for name, (path, signature, inputs) in spec.items():
    want = serving_loaders.outputs_of(reloaded["tf2"][path], signature)
    serving_loaders.assert_same(reloaded["tf1"][path], want, atol=1e-4, prefix=f"{signature}/")
    if name == "pair":
      got = serving_loaders.saved_model_cli_run(path, signature, inputs, str(tmp_path / name))
      serving_loaders.assert_same(got, want)


def test_export_refuses_a_pretraining_model_dir(exported, tmp_path, hf_tiny_dir):
  pretrained = fx.pretrained_model_dir(hf_tiny_dir, str(tmp_path / "pre"))
  with pytest.raises(models.ModelDirError, match="not a fine-tuned model dir"):
    finetuned_export.export_saved_model(pretrained, str(tmp_path / "sm"))
  dirs = exported[0]
  with pytest.raises(ValueError, match="exists and is not empty"):
    finetuned_export.export_saved_model(dirs["pair"][0], dirs["pair"][1])
  assert os.path.isfile(os.path.join(dirs["pair"][1], "saved_model.pb"))
