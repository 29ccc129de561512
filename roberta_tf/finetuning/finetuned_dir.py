"""A fine-tuned model directory.

```
model_dir/
  config.json          {"model": RobertaConfig, "task": ProblemInfo, "finetune": FinetuneConfig}
  checkpoint, ckpt-N.* tf.train.Checkpoint(model=FinetuneModel) of the best run's best epoch
  vocab.json merges.txt (or tokenizer.json + its HF role files: the vocabulary's files)
  eval_results.json    the kept run's dev metrics; the median and spread over seeds per
                       configuration and overall; every run's history (sweep_runner.py);
                       written last, so its presence marks a complete sweep
  results.md           the same statistics as a table
  predictions.json, nbest_predictions.json   extractive QA: the kept run's dev predictions
  predictions.conll, test_predictions.conll  token classification: the kept run's dev (and
                       --test_file) words with their gold and predicted tags (tag_write.py)
  CoLA.tsv, MNLI-m.tsv, ...   GLUE presets: the kept model's test predictions (leaderboard
                       format, predictions.py), unless --predictions_dir puts them elsewhere
  runs/bs<B>_lr<rate>_seed<S>/   one directory per run of the sweep (its own best checkpoint,
                       eval_results.json and QA predictions)
```
config.json is read and written through models/model_dir.py's `ModelDir` (its "model" like
any model dir's, "task" and "finetune" here).
"""

from __future__ import annotations

import os

import tensorflow as tf

from roberta_tf import models
from roberta_tf.common import atomic_write, directory_lock, files
from roberta_tf.finetuning import glue, heads
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models import registry
from roberta_tf.models.roberta import hf_weights
from roberta_tf.tokenization import pipeline_tokenizer, vocab_files
from roberta_tf.tokenization.pipeline_tokenizer import PipelineTokenizer
from roberta_tf.tokenization.tokenizer import BytePairTokenizer

Tokenizer = BytePairTokenizer | PipelineTokenizer

RESULTS_FILE = "eval_results.json"
TOKENIZER_FILES = vocab_files.FILES
# What a fine-tuning run writes at the top of model_dir (besides checkpoints and runs/).
_WRITTEN = (model_dir_lib.CONFIG_FILE, RESULTS_FILE, "results.md", "checkpoint", "predictions.json",
            "nbest_predictions.json", "predictions.conll", "test_predictions.conll",
            glue.DIAGNOSTIC_FILE,
            *(name for preset in glue.PRESETS.values() for name, _ in preset.test_files))




def write_config(model_dir: str, model_config: models.RobertaConfig, info: ProblemInfo,
                 finetune: dict | None = None) -> None:
  model_dir_lib.ModelDir(model_dir).write(
      {"model": model_config.to_dict(), "task": info.to_dict(), "finetune": finetune or {}})


def read(model_dir: str) -> tuple[models.RobertaConfig, ProblemInfo]:
  """(RobertaConfig, ProblemInfo) of a fine-tuned model dir, from one read of its config.json;
  a clear error if it is not a fine-tuned model."""
  directory = model_dir_lib.ModelDir(model_dir)
  doc = directory.read()  # ModelDirError naming the file if unreadable
  if not isinstance(doc.get("task"), dict):
    raise models.ModelDirError(f"{directory.config_path} has no \"task\": {model_dir!r} is not "
                               "a fine-tuned model dir (roberta_tf.finetune writes one)")
  try:
    info = ProblemInfo.from_dict(doc["task"])
  except TypeError as e:
    raise models.ModelDirError(f"{directory.config_path}: bad \"task\": {e}") from e
  return directory.model_config(doc), info


def read_problem_info(model_dir: str) -> ProblemInfo:
  """The ProblemInfo in model_dir/config.json; a clear error if it is not a fine-tuned model."""
  return read(model_dir)[1]


def new_model(model_config: models.RobertaConfig, info: ProblemInfo, dtype=None,
              init_from: str = "") -> heads.FinetuneModel:
  """The fine-tuning model: encoder (random, or init_from's weights) + a fresh head."""
  encoder = heads.pretrained_encoder(model_config, dtype=dtype, init_from=init_from)
  return model_on(encoder, model_config, info, dtype=dtype)


def model_on(encoder, model_config: models.RobertaConfig, info: ProblemInfo,
             dtype=None) -> heads.FinetuneModel:
  """The fine-tuning model of `info` on `encoder`, a fresh head (what a checkpoint restores)."""
  return heads.FinetuneModel(encoder, info.task_type, info.num_outputs,
                             dropout=heads.dropout_of(model_config),
                             initializer_range=model_config.initializer_range, dtype=dtype,
                             answer_classifier=info.answer_classifier, pooling=info.pooling,
                             model_config=model_config)


def load_for_export(model_dir: str, task_type: str, refusal: str, checkpoint: str | None = None):
  """(pretrainer, FinetuneModel, RobertaConfig, ProblemInfo) of a fine-tuned dir of `task_type`
  (its newest checkpoint, or `checkpoint`), the model built on the pretrainer's encoder so that
  hf_weights maps it (the MLM head is not the fine-tuned model's and is never written).

  Raises:
    hf_weights.HFCheckpointError: "<model_dir> is a fine-tuned <type> model; <refusal>" for
      another task type, or a model HF has no class for.
  """
  model_config, info = read(model_dir)
  if info.task_type != task_type:
    raise hf_weights.HFCheckpointError(
        f"{model_dir} is a fine-tuned {info.task_type} model; {refusal}")
  if registry.family_of(model_config).name == registry.DEFAULT_FAMILY:
    hf_weights.check_exportable(model_config)  # RoBERTa options no HF class has
  if checkpoint:
    model_dir_lib.check_checkpoint(checkpoint)
  pretrainer = models.build_pretrainer(model_config)
  model = model_on(pretrainer.encoder, model_config, info)
  restore(model, checkpoint or model_dir_lib.latest_checkpoint(model_dir))
  return pretrainer, model, model_config, info


def save_checkpoint(directory: str, model: heads.FinetuneModel, number: int) -> str:
  """Writes model as directory's only checkpoint `ckpt-<number>`; returns its prefix."""
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), directory,
                                       max_to_keep=1, checkpoint_name="ckpt")
  return manager.save(checkpoint_number=number)


def write_new(out_dir: str, model: heads.FinetuneModel, model_config, info: ProblemInfo,
              copy_vocab, overwrite: bool = False) -> str:
  """A new fine-tuned model dir of `model` (config.json with "task", one checkpoint `ckpt-0`, the
  files `copy_vocab(tmp_dir)` writes), assembled under a temporary name and renamed when
  complete; returns the checkpoint prefix.

  Raises:
    ModelDirError: out_dir is not a directory, or not empty (without overwrite).
  """
  out_dir = files.normalize(out_dir)
  if files.exists(out_dir) and not files.isdir(out_dir):
    raise model_dir_lib.ModelDirError(f"{out_dir!r} exists and is not a directory")
  if files.isdir(out_dir) and files.listdir(out_dir) and not overwrite:
    raise model_dir_lib.ModelDirError(f"{out_dir!r} exists and is not empty; refusing to "
                                      "overwrite it")
  with atomic_write.atomic_dir(out_dir) as tmp:
    write_config(tmp, model_config, info)
    prefix = save_checkpoint(tmp, model, 0)
    copy_vocab(tmp)
  return files.join(out_dir, files.basename(prefix))


def restore(model: heads.FinetuneModel, prefix: str) -> None:
  status = tf.train.Checkpoint(model=model).restore(prefix)
  try:
    status.assert_existing_objects_matched()
  except AssertionError as e:
    raise models.ModelDirError(f"checkpoint {prefix} does not fit the fine-tuning model: "
                               f"{str(e)[:500]}") from e


def load(model_dir: str, dtype="float32") -> tuple[heads.FinetuneModel, models.RobertaConfig,
                                                   ProblemInfo]:
  """A fine-tuned model with its weights, its RobertaConfig and ProblemInfo."""
  model_config, info = read(model_dir)
  model = new_model(model_config, info, dtype=dtype)
  restore(model, model_dir_lib.latest_checkpoint(model_dir))
  return model, model_config, info


# sha256 of the vocabulary files (vocab_files.vocabulary_files) -> tokenizer
_TOKENIZERS: dict[str, Tokenizer] = {}


def load_tokenizer(vocab_dir: str) -> Tokenizer:
  """vocab_dir's tokenizer (either kind of folder: pipeline_tokenizer.load_tokenizer), shared
  within a process by every directory holding the same vocabulary files' bytes: building one
  and tracing its first call take seconds, and a sweep, an export after training or a test
  suite would otherwise pay that again and again."""
  names = vocab_files.vocabulary_files(vocab_dir)
  try:
    key = "+".join(f"{n}:{vocab_files.file_sha256(files.join(vocab_dir, n))}" for n in names)
  except OSError:  # let the tokenizer name the missing file
    key = ""
  if not key:
    return pipeline_tokenizer.load_tokenizer(vocab_dir)
  if key not in _TOKENIZERS:
    _TOKENIZERS[key] = pipeline_tokenizer.load_tokenizer(vocab_dir)
  return _TOKENIZERS[key]


def copy_tokenizer(src_dir: str, dst_dir: str) -> None:
  """Copies the vocabulary files (atomically): vocab.json + merges.txt, both of which must exist
  when either does, or a tokenizer.json and its role files."""
  copied = vocab_files.copy_vocab_files(src_dir, dst_dir)
  missing = ([n for n in TOKENIZER_FILES if n not in copied]
             if vocab_files.TOKENIZER_FILE not in copied else [])
  if missing:
    raise FileNotFoundError(f"{files.join(src_dir, missing[0])} not found")


def check_writable(model_dir: str, overwrite: bool, protected: tuple[str, ...] = ()) -> None:
  """Raises ValueError unless model_dir may receive a fine-tuning run: absent, empty, or
  (overwrite) holding an earlier run; never one of `protected` (the pretrained model / vocab
  directories)."""
  if any(p and _same_path(p, model_dir) for p in protected):
    raise ValueError(f"--model_dir={model_dir!r} is the --init_from/--vocab_dir directory; "
                     "fine-tuning writes a new directory")
  if files.exists(model_dir) and not files.isdir(model_dir):
    raise ValueError(f"--model_dir={model_dir!r} exists and is not a directory")
  # On a URL the run's own lock object is there already (common/directory_lock.py).
  entries = [n for n in files.listdir(model_dir) if n != directory_lock.LOCK_NAME] if (
      files.isdir(model_dir)) else []
  if entries and not overwrite:
    raise ValueError(f"--model_dir={model_dir!r} is not empty; pass --overwrite to replace an "
                     "earlier fine-tuning run there")


def prepare(model_dir: str) -> None:
  """Creates model_dir and removes what an earlier fine-tuning run wrote there (only that)."""
  if files.isdir(model_dir):
    for name in files.listdir(model_dir):
      path = files.join(model_dir, name)
      if name == "runs":
        files.rmtree(path)
      elif name in _WRITTEN + TOKENIZER_FILES or name.startswith("ckpt-"):
        files.remove(path)
  files.makedirs(model_dir)


def _same_path(a: str, b: str) -> bool:
  """Whether two directory names are the same place: URLs compared as given (less a trailing
  '/'), local paths made absolute."""
  if files.is_url(a) or files.is_url(b):
    return files.normalize(a) == files.normalize(b)
  return os.path.abspath(a) == os.path.abspath(b)  # local-only: both are local paths
