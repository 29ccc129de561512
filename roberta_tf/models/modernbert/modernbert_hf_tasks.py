"""HF `ModernBertFor{SequenceClassification, MultipleChoice, TokenClassification,
QuestionAnswering}` folders in and out (ModernBertTaskModel). Keys: the encoder's under
"model." (modernbert_hf_weights), then

| HF key                        | ours                                           |
|-------------------------------|------------------------------------------------|
| head.dense.weight [H, H]      | <task>_head/head/dense kernel (transposed)     |
| head.norm.weight              | <task>_head/head/norm gamma                    |
| classifier.weight [K, H]      | <task>_head/classifier kernel (transposed);    |
|                               | K = 1 for multiple choice, 2 for QA            |
| classifier.bias [K]           | <task>_head/classifier bias                    |

config.json: the encoder's (both dialects, modernbert_hf_config) with the architecture,
classifier_pooling, classifier_dropout, id2label and label2id (num_labels follows from them in
transformers; multiple choice's classifier has 1 output whatever num_labels says).
"""

from __future__ import annotations

from roberta_tf.common import files
from roberta_tf.models.modernbert import modernbert_hf_weights as mlm_weights
from roberta_tf.models.modernbert.modernbert_hf_config import config_from_hf, config_to_hf
from roberta_tf.models.modernbert.modernbert_task_heads import (
  MULTIPLE_CHOICE,
  QUESTION_ANSWERING,
  SEQUENCE_CLASSIFICATION,
  TOKEN_CLASSIFICATION,
  ModernBertTaskModel,
)
from roberta_tf.models.roberta import hf_weights
from roberta_tf.models.roberta.hf_weights import HFCheckpointError

ARCHITECTURES = {"ModernBertForSequenceClassification": SEQUENCE_CLASSIFICATION,
                 "ModernBertForTokenClassification": TOKEN_CLASSIFICATION,
                 "ModernBertForMultipleChoice": MULTIPLE_CHOICE,
                 "ModernBertForQuestionAnswering": QUESTION_ANSWERING}
_ARCHITECTURE_OF = {task: name for name, task in ARCHITECTURES.items()}


def _weight_map(model: ModernBertTaskModel):
  entries = mlm_weights.encoder_weight_map(model.encoder, model.config.num_layers)
  entries += mlm_weights.head_weight_map(model.head.head)
  classifier = model.head.classifier
  return entries + [("classifier.weight", classifier.kernel, True),
                    ("classifier.bias", classifier.bias, False)]


def labels_of(hf_config: dict, num_labels: int) -> list[str]:
  """The label names in id order (LABEL_i where the config has none, as transformers)."""
  id2label = {int(k): str(v) for k, v in (hf_config.get("id2label") or {}).items()}
  return [id2label.get(i, f"LABEL_{i}") for i in range(num_labels)]


def is_task_folder(hf_config: dict) -> bool:
  """Whether an HF config.json dict names one of ARCHITECTURES."""
  return any(a in ARCHITECTURES for a in hf_config.get("architectures") or [])


def read_config(hf_dir: str) -> dict:
  """hf_dir's config.json."""
  return hf_weights.read_hf_dir(hf_dir)[0]


def load_hf_task(hf_dir: str, dtype=None) -> tuple[ModernBertTaskModel, list[str]]:
  """(the task model, its label names in id order) of an HF ModernBERT task folder
  (ARCHITECTURES)."""
  hf_config, tensors = hf_weights.read_hf_dir(hf_dir)
  source = files.join(hf_dir, hf_weights.CONFIG_FILE)
  tasks = [ARCHITECTURES[a] for a in hf_config.get("architectures") or [] if a in ARCHITECTURES]
  if not tasks:
    raise HFCheckpointError(f"{source}: architectures {hf_config.get('architectures')} name "
                            f"none of {sorted(ARCHITECTURES)}")
  classifier = tensors.get("classifier.weight")
  if classifier is None or classifier.ndim != 2:
    raise HFCheckpointError(f"{files.join(hf_dir, hf_weights.WEIGHTS_FILE)}: no "
                            "classifier.weight [num_labels, H]")
  try:
    config = config_from_hf(hf_config, source)
  except ValueError as e:
    raise HFCheckpointError(str(e)) from e
  model = ModernBertTaskModel(config, tasks[0], int(classifier.shape[0]), dtype=dtype)
  mlm_weights.assign(_weight_map(model), mlm_weights.with_model_prefix(dict(tensors)),
                     files.join(hf_dir, hf_weights.WEIGHTS_FILE), _ARCHITECTURE_OF[tasks[0]])
  return model, labels_of(hf_config, model.num_labels)


def save_hf_task(hf_dir: str, model: ModernBertTaskModel, labels: list[str] | None = None) -> None:
  """Writes a folder that transformers' AutoModelFor<task> (ARCHITECTURES) loads."""
  labels = list(labels) if labels is not None else [f"LABEL_{i}" for i in
                                                    range(model.num_labels)]
  if len(labels) != model.num_labels:
    raise ValueError(f"{len(labels)} label names for {model.num_labels} labels")
  hf_config = config_to_hf(model.config, _ARCHITECTURE_OF[model.task])
  hf_config["id2label"] = {str(i): name for i, name in enumerate(labels)}
  hf_config["label2id"] = {name: i for i, name in enumerate(labels)}
  mlm_weights.write_hf_dir(hf_dir, mlm_weights.tensors_of(_weight_map(model)), hf_config)
