"""Real text: which section of the Python docs a paragraph comes from (5 classes, 60 training
paragraphs a class, tests/testdata/docs_sections). A tiny model pretrained for ~1 minute with
the project's pipeline (data_prep.build_shards + roberta_tf.train, on the docs slice without the
dev paragraphs) is fine-tuned, and so is the same model from random init, on the same budget.

What holds at this scale, and is asserted: with a short fine-tuning budget (2 epochs) the
pretrained model is clearly ahead -- its <s> vectors differ between inputs from the start, while
a random-init model's are all alike and it still predicts one class. Given the paper's full
budget (10 epochs, LR sweep) the two end up close at this pretraining scale; the benchmark
`benchmarks/finetune_docs_sections.py` runs that longer comparison and prints both figures.
"""

import json
import os

import pytest

from roberta_tf.finetuning import docs_sections, sweep_runner
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from tests.conftest import TESTDATA
from tests.harness import call_module

pytestmark = pytest.mark.slow  # see pyproject.toml's markers

TASK = os.path.join(TESTDATA, "docs_sections")
# L2 H64 A2 F256, 8000-id vocab, max_seq_len 64: escapes the MLM unigram plateau in ~500 steps.
MODEL = {"vocab_size": 8000, "hidden_size": 64, "num_layers": 2, "num_heads": 2,
         "intermediate_size": 256, "max_positions": 66}


def _run(argv):
  proc = call_module(*argv)
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


@pytest.fixture(scope="module")
def pretrained(tmp_path_factory, hf_tiny_dir):
  """Pretrains the tiny model on the docs slice + the training paragraphs (never the dev ones)."""
  root = tmp_path_factory.mktemp("docs_pretraining")
  with open(os.path.join(TASK, "dev.jsonl"), encoding="utf-8") as f:
    dev = {json.loads(line)["text"] for line in f}
  corpus = root / "corpus.jsonl"
  with open(corpus, "w", encoding="utf-8") as out:
    for text in docs_sections.pretraining_documents(
        os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), dev):
      out.write(json.dumps({"text": text}) + "\n")
    with open(os.path.join(TASK, "train.jsonl"), encoding="utf-8") as f:
      for line in f:  # unlabeled training inputs are fair pretraining text
        out.write(json.dumps({"text": json.loads(line)["text"]}) + "\n")
  (root / "model.json").write_text(json.dumps(MODEL))
  _run(["data_prep.build_shards", f"--input={corpus}", f"--vocab_dir={hf_tiny_dir}",
        f"--output_dir={root / 'shards'}", "--max_seq_len=64", "--num_shards=1",
        "--validation_fraction=0", "--noprogress"])
  _run(["roberta_tf.train", f"--config={root / 'model.json'}", f"--train_data={root / 'shards'}",
        f"--model_dir={root / 'model'}", "--max_seq_len=64", "--batch_size=32",
        "--train_steps=1000", "--learning_rate=3e-3", "--warmup_steps=100", "--log_every=250",
        "--checkpoint_every=1000", "--shuffle_buffer=1000"])
  return str(root / "model"), str(root / "model.json")


def test_pretrained_beats_random_init_on_docs_sections(pretrained, tmp_path, hf_tiny_dir):
  model_dir, model_json = pretrained
  common = dict(task="classification", train_file=os.path.join(TASK, "train.jsonl"),
                eval_file=os.path.join(TASK, "dev.jsonl"), vocab_dir=hf_tiny_dir,
                max_seq_len=64, batch_size=16, epochs=2, learning_rate=1e-3, seeds=1)
  with_pretraining = sweep_runner.run_sweep(FinetuneConfig(
      model_dir=str(tmp_path / "pretrained"), init_from=model_dir, **common))
  from_scratch = sweep_runner.run_sweep(FinetuneConfig(
      model_dir=str(tmp_path / "random"), config=model_json, **common))
  print(f"docs_sections dev accuracy, 2 epochs: pretrained {with_pretraining['accuracy']:.3f}, "
        f"random init {from_scratch['accuracy']:.3f}")
  assert with_pretraining["accuracy"] > 0.25  # 5 balanced classes: chance is 0.2
  assert with_pretraining["accuracy"] >= from_scratch["accuracy"] + 0.05
  assert with_pretraining["macro_f1"] > from_scratch["macro_f1"]
