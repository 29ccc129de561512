"""A model fine-tuned on a ModernBERT encoder (heads.py's HF ModernBERT head) as the HF folder
transformers loads: classification and regression as ModernBertForSequenceClassification
(regression: one label), multiple choice as ModernBertForMultipleChoice, token tagging as
ModernBertForTokenClassification, extractive QA as ModernBertForQuestionAnswering (SQuAD v2's
answerability classifier has no place there: such a model is refused); the weights are
copied into a `ModernBertTaskModel` (the same encoder and head, built the same way) and written
by models/modernbert/modernbert_hf_tasks.py."""

from __future__ import annotations

from roberta_tf.finetuning import finetuned_dir, problem_types
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
