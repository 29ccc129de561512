"""A model fine-tuned on a ModernBERT encoder (heads.py's HF ModernBERT head) as the HF folder
transformers loads: classification and regression as ModernBertForSequenceClassification
(regression: one label), multiple choice as ModernBertForMultipleChoice, token tagging as
ModernBertForTokenClassification, extractive QA as ModernBertForQuestionAnswering (SQuAD v2's
answerability classifier has no place there: such a model is refused); the weights are
copied into a `ModernBertTaskModel` (the same encoder and head, built the same way) and written
by models/modernbert/modernbert_hf_tasks.py. `import_hf` is the way back: an HF folder of any of
those classes as a fine-tuned model dir (`convert_checkpoint --hf_dir`)."""

from __future__ import annotations

from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning import finetuned_dir, problem_types
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models import registry
from roberta_tf.models.roberta.hf_weights import CONFIG_FILE, WEIGHTS_FILE, HFCheckpointError

_TASKS = {problem_types.CLASSIFICATION: "sequence_classification",
          problem_types.REGRESSION: "sequence_classification",
          problem_types.MULTIPLE_CHOICE: "multiple_choice",
          problem_types.TOKEN_CLASSIFICATION: "token_classification",
          problem_types.EXTRACTIVE_QA: "question_answering"}


def is_modernbert_finetuned(model_dir: str) -> bool:
  """Whether model_dir is a fine-tuned model dir on a ModernBERT encoder."""
  try:
    config, _ = finetuned_dir.read(model_dir)
  except (registry.ConfigError, model_dir_lib.ModelDirError):
    return False
  return registry.family_of(config).name != registry.DEFAULT_FAMILY


def save_hf(model_dir: str, hf_dir: str, checkpoint: str | None = None) -> list[str]:
  """Writes fine-tuned ModernBERT `model_dir` (its newest checkpoint, or `checkpoint`) to
  hf_dir: config.json (architecture, id2label / label2id) and model.safetensors; returns
  their names.

  Raises:
    HFCheckpointError: a task HF has no ModernBERT class for (embeddings:
      --to_sentence_transformers writes those), or QA with an answerability classifier.
  """
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert import modernbert_hf_tasks
  from roberta_tf.models.modernbert.modernbert_task_heads import ModernBertTaskModel
  config, info = finetuned_dir.read(model_dir)
  if info.task_type not in _TASKS:
    raise HFCheckpointError(f"{model_dir} is a fine-tuned {info.task_type} model on ModernBERT; "
                            f"--to_hf writes {sorted(_TASKS)} ones")
  if info.answer_classifier:
    raise HFCheckpointError(f"{model_dir} has an answerability classifier (--answer_classifier),"
                            " which ModernBertForQuestionAnswering has no place for")
  if checkpoint:
    model_dir_lib.check_checkpoint(checkpoint)
  model = finetuned_dir.new_model(config, info, dtype="float32")
  finetuned_dir.restore(model, checkpoint or model_dir_lib.latest_checkpoint(model_dir))
  task_model = ModernBertTaskModel(config, _TASKS[info.task_type], model.head.num_labels)
  task_model.encoder.set_weights(model.encoder.get_weights())
  task_model.head.set_weights(model.head.get_weights())
  labels = list(info.labels) if info.task_type == problem_types.CLASSIFICATION or (
      info.task_type == problem_types.TOKEN_CLASSIFICATION) else None
  modernbert_hf_tasks.save_hf_task(hf_dir, task_model, labels)
  return [CONFIG_FILE, WEIGHTS_FILE]


def _problem_info(task: str, num_labels: int, labels: list[str], hf_config: dict,
                  max_seq_len: int) -> ProblemInfo:
  """The ProblemInfo of an imported HF task model: sequence classification with one label (or
  problem_type "regression") is regression; single texts (HF's config does not say pairs)."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf.finetuning.tagging import hf_tagger
  if task == "sequence_classification":
    if num_labels == 1 or hf_config.get("problem_type") == "regression":
      return ProblemInfo(problem_types.REGRESSION, max_seq_len, text_fields=("text",))
    return ProblemInfo(problem_types.CLASSIFICATION, max_seq_len, labels=tuple(labels),
                       text_fields=("text",))
  if task == "token_classification":
    return ProblemInfo(problem_types.TOKEN_CLASSIFICATION, max_seq_len, labels=tuple(labels),
                       tag_scheme=hf_tagger.scheme_of_labels(labels))
  if task == "multiple_choice":
    return ProblemInfo(problem_types.MULTIPLE_CHOICE, max_seq_len)
  return ProblemInfo(problem_types.EXTRACTIVE_QA, max_seq_len)


def import_hf(hf_dir: str, out_dir: str, tokenizer_files: dict[str, str],
              overwrite: bool = False) -> str:
  """An HF ModernBertFor{SequenceClassification, MultipleChoice, TokenClassification,
  QuestionAnswering} folder -> a new fine-tuned model dir (config.json with "task", one
  checkpoint, `tokenizer_files` {name: path} copied); returns the checkpoint prefix. The dir is
  assembled under a temporary name and renamed when complete.

  Raises:
    HFCheckpointError: not such a folder, or its weights do not fit its config.
    ModelDirError: out_dir is not empty (without overwrite) or not a directory.
  """
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models.modernbert import modernbert_hf_tasks
  task_model, labels = modernbert_hf_tasks.load_hf_task(hf_dir)
  config = task_model.config
  info = _problem_info(task_model.task, task_model.num_labels, labels,
                       modernbert_hf_tasks.read_config(hf_dir), config.max_seq_len)
  model = finetuned_dir.new_model(config, info, dtype="float32")
  model.encoder.set_weights(task_model.encoder.get_weights())
  model.head.set_weights(task_model.head.get_weights())

  def copy_vocab(tmp):
    for name, src in tokenizer_files.items():
      atomic_write.copy_file(src, files.join(tmp, name))
  return finetuned_dir.write_new(out_dir, model, config, info, copy_vocab, overwrite)
