"""The whole journey on a URL: prep -> train -> resume -> evaluate -> export -> reload ->
fill-mask -> fine-tune -> its export, on TF's in-memory `ram://` file system (a registered
non-POSIX scheme, as gs:// is), equal to the same journey on local disk.

`ram://` lives inside one process, so every binary runs in this one (tests/harness.py's
in-process call). The journey must leave no local `ram:` directory behind (the old failure:
`os.path.normpath("ram://m")` is the local path `ram:/m`).
"""

import json
import os
import re
import uuid

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import files
from roberta_tf.training import checkpointing
from tests.conftest import REPO, TESTDATA
from tests.harness import call_module

pytestmark = pytest.mark.slow

SENTENCES = ["The <mask> statement defines a function.", "A list is a <mask> sequence."]


def _ok(proc):
  assert proc.returncode == 0, proc.stderr[-3000:]
  return proc.stdout


def _stage_inputs(root: str) -> None:
  """The corpus and the fine-tuning problem, copied under `root` with files.copy."""
  files.makedirs(files.join(root, "problem"))
  files.copy(os.path.join(TESTDATA, "python_docs_small.jsonl.gz"),
             files.join(root, "corpus.jsonl.gz"))
  for split, every in (("train", 5), ("dev", 5)):  # a fifth of docs_sections: a quick problem
    with open(os.path.join(TESTDATA, "docs_sections", f"{split}.jsonl"), encoding="utf-8") as f:
      rows = f.readlines()[::every]
    with files.open(files.join(root, "problem", f"{split}.jsonl"), "w") as f:
      f.writelines(rows)


def _untimed(doc):
  """`doc` without wall-clock figures (seconds, rates), which differ between any two runs."""
  if isinstance(doc, dict):
    return {k: _untimed(v) for k, v in doc.items()
            if not re.search(r"seconds|minutes|per_sec|time", k)}
  return [_untimed(v) for v in doc] if isinstance(doc, list) else doc


def _journey(root: str, reload: bool) -> dict:
  """Runs every stage with its inputs and outputs under `root`; returns what must agree.
  reload: also reload both SavedModels in this process (the fill_mask binary reloads the
  pretrained one either way)."""
  _stage_inputs(root)
  j = lambda *p: files.join(root, *p)  # noqa: E731
  _ok(call_module("data_prep.train_tokenizer", f"--input={j('corpus.jsonl.gz')}",
                  "--vocab_size=600", f"--output_dir={j('vocab')}", "--noprogress"))
  _ok(call_module("data_prep.build_shards", f"--input={j('corpus.jsonl.gz')}",
                  f"--vocab_dir={j('vocab')}", f"--output_dir={j('shards')}",
                  "--max_seq_len=64", "--num_shards=2", "--validation_fraction=0.1",
                  "--noprogress"))
  train = ["roberta_tf.train", "--config=tiny", f"--train_data={j('shards')}",
           f"--eval_data={j('shards')}", f"--model_dir={j('model')}", "--max_seq_len=64",
           "--batch_size=8", "--warmup_steps=1", "--log_every=2", "--eval_every=4",
           "--eval_steps=2", "--checkpoint_every=2", "--dropout=0", "--learning_rate=1e-3"]
  _ok(call_module(*train, "--train_steps=2"))
  resumed = _ok(call_module(*train, "--train_steps=4"))
  assert "resumed from" in resumed and j("model", "ckpt-2") in resumed
  evaluation = _ok(call_module("roberta_tf.evaluate", f"--model_dir={j('model')}",
                               f"--eval_data={j('shards')}", "--eval_steps=2"))
  _ok(call_module("roberta_tf.export", f"--model_dir={j('model')}",
                  f"--export_dir={j('export')}"))
  fill = _ok(call_module("roberta_tf.fill_mask", f"--saved_model={j('export')}", *SENTENCES))
  _ok(call_module("roberta_tf.finetune", "--task=classification", f"--init_from={j('model')}",
                  f"--train_file={j('problem', 'train.jsonl')}",
                  f"--eval_file={j('problem', 'dev.jsonl')}", "--text_fields=text",
                  "--label_field=label", f"--model_dir={j('ft')}", "--max_seq_len=48",
                  "--batch_sizes=16", "--learning_rates=1e-3", "--seeds=1", "--epochs=1",
                  "--dropout=0", *([f"--export_dir={j('ft_export')}"] if reload else [])))
  out = {}
  if reload:
    out["top_ids"] = tf.saved_model.load(j("export")).signatures["fill_mask"](
        text=tf.constant(SENTENCES))["top_ids"].numpy()
    classify = tf.saved_model.load(j("ft_export")).signatures["classify"]
    first_arg = next(iter(classify.structured_input_signature[1]))
    out["finetuned"] = classify(**{first_arg: tf.constant(["A backslash continues a line."])})
  results = files.read_json(j("ft", "eval_results.json"))
  return {
      **out,
      "vocab": files.read_bytes(j("vocab", "merges.txt")),
      "shards": files.read_json(j("shards", "dataset_info.json"))["splits"],
      "weights": checkpointing.weights_digest(models.load(j("model"), dtype="float32")),
      "eval": evaluation.replace(root, "ROOT"),
      "fill_mask": fill.replace(root, "ROOT"),
      "ft_results": json.dumps(_untimed(results), sort_keys=True).replace(root, "ROOT"),
      "ft_files": sorted(files.listdir(j("ft"))),
  }


@pytest.mark.timeout(900)
def test_journey_on_ram_equals_local_disk(tmp_path):
  before = set(os.listdir(REPO))
  on_ram = _journey(f"ram://journey-{uuid.uuid4().hex[:8]}", reload=True)
  assert "ram:" not in os.listdir(REPO) and set(os.listdir(REPO)) <= before | {".pytest_cache"}
  on_disk = _journey(str(tmp_path / "journey"), reload=False)
  assert on_ram["vocab"] == on_disk["vocab"]
  assert json.dumps(on_ram["shards"], sort_keys=True) == json.dumps(on_disk["shards"],
                                                                    sort_keys=True)
  assert on_ram["weights"] == on_disk["weights"]
  assert re.search(r"perplexity [\d.]+", on_ram["eval"]) and on_ram["eval"] == on_disk["eval"]
  assert re.search(r"<mask>", on_ram["fill_mask"]) and on_ram["fill_mask"] == on_disk["fill_mask"]
  assert on_ram["ft_results"] == on_disk["ft_results"] and on_ram["ft_files"] == on_disk["ft_files"]
  # The reloaded exports (in this process: ram:// is this process's) answer.
  assert on_ram["top_ids"].shape[0] == len(SENTENCES)
  probs = [v.numpy() for v in on_ram["finetuned"].values() if v.dtype.is_floating]
  assert probs and all(np.all(np.isfinite(p)) for p in probs)


def test_an_unknown_scheme_is_refused_naming_the_flag(tmp_path):
  proc = call_module("roberta_tf.train", "--config=tiny", "--train_data=nosuch://bucket/shards",
                     f"--model_dir={tmp_path / 'm'}")
  assert proc.returncode == 1
  assert re.fullmatch(r"error: --train_data=nosuch://bucket/shards: no file system handles "
                      r"'nosuch://' here \(registered: .*ram://.*\n", proc.stderr), proc.stderr
  assert not os.path.exists(tmp_path / "m")
