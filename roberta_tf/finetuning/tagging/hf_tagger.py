"""Hugging Face `RobertaForTokenClassification` folders <-> fine-tuned token-classification dirs.

HF's token classifier is RobertaModel WITHOUT its pooler (`roberta.*`: hf_weights' mapping,
reused here as is), dropout, and `classifier`, a Linear on every token vector:

| HF key                      | ours (finetuned_dir's FinetuneModel, task token_classification) |
|-----------------------------|------------------------------------------------------------------|
| roberta.*                   | encoder (hf_weights; pre-LN models: roberta_prelayernorm.*)      |
| classifier.weight [K, H]    | token_head/classifier kernel [H, K] (transposed)                 |
| classifier.bias [K]         | token_head/classifier bias [K]                                   |

config.json is hf_weights.config_to_hf's with architectures ["RobertaForTokenClassification"]
(RobertaPreLayerNormForTokenClassification for pre-LN), num_labels, id2label and label2id: the
ProblemInfo's labels in id order.

Import (`load_hf`): ProblemInfo(task_type="token_classification", labels = id2label in id order
(LABEL_i where the config has none, as transformers names them), max_seq_len =
max_position_embeddings - 2, tag_scheme from the label NAMES (`scheme_of_labels`)). The label
names cannot tell IOB1 from IOB2 (both use B- and I-; they differ in where B- appears in the
data), so B/I labels are read as IOB2; fine-tuning on IOB1 data again detects it from the tags.
An HF `classifier_dropout` is not kept: our head uses the encoder's dropout (training only).
"""

from __future__ import annotations

import numpy as np
from safetensors.numpy import save_file

from roberta_tf import models
from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning import finetuned_dir, heads, problem_types
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.tagging import tag_scores
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models.roberta import hf_weights
from roberta_tf.models.roberta.hf_weights import HFCheckpointError
from roberta_tf.tokenization import vocab_files

WEIGHT_KEY, BIAS_KEY = "classifier.weight", "classifier.bias"
ARCHITECTURE_SUFFIX = "ForTokenClassification"
_MLM_HEAD_PREFIX = "lm_head."
POOLER_KEY = "roberta.pooler.dense.weight"  # RobertaModel's pooler: never in a token classifier
# Other fine-tuned HF RoBERTa heads (class name suffix, keys only they have): refused by name.
# RobertaForMultipleChoice's classifier.weight [1, H] sits on the pooler.
_OTHER_HEADS = (("ForSequenceClassification", ("classifier.out_proj.weight",)),
                ("ForQuestionAnswering", ("qa_outputs.weight",)),
                ("ForMultipleChoice", (WEIGHT_KEY, POOLER_KEY)))


def is_finetuned_dir(model_dir: str) -> bool:
  """Whether model_dir/config.json has a "task" (a fine-tuned model dir); False when it cannot be
  read (model_dir.load then says why)."""
  return model_dir_lib.ModelDir(model_dir).section("task") is not None


def is_token_classifier(hf_config: dict, tensors: dict) -> bool:
  """An HF RobertaForTokenClassification checkpoint: by its architectures or its keys."""
  architectures = hf_config.get("architectures") or []
  return WEIGHT_KEY in tensors or any(
      str(a).endswith(ARCHITECTURE_SUFFIX) for a in architectures)


def check_importable(hf_config: dict, tensors: dict, source: str) -> None:
  """Raises HFCheckpointError (one line) for an HF fine-tuned head we do not import."""
  architectures = [str(a) for a in hf_config.get("architectures") or []]
  for suffix, keys in _OTHER_HEADS:
    named = [a for a in architectures if a.endswith(suffix)]
    if named or all(k in tensors for k in keys):
      raise HFCheckpointError(f"{source} is a {(named or ['Roberta' + suffix])[0]} checkpoint; "
                              "only RobertaForMaskedLM and RobertaForTokenClassification "
                              "checkpoints are imported")


def scheme_of_labels(labels) -> str:
  """The tag scheme the label names show (tag_scores.SCHEMES): B/I prefixes -> IOB2 (IOB1
  has the same names), B/I/E/S -> IOBES, B/I/L/U -> BILOU, none -> plain."""
  # Each label as a one-tag sentence: detect_scheme then sees only the prefixes; "I-X" after
  # nothing reads as IOB1, which label names alone cannot tell from IOB2.
  scheme = tag_scores.detect_scheme([[label] for label in labels])
  return tag_scores.IOB2 if scheme == tag_scores.IOB1 else scheme


def labels_from_hf(hf_config: dict, num_labels: int, source: str) -> tuple[str, ...]:
  """id2label in id order (transformers' LABEL_i without one); its ids must be 0..K-1."""
  id2label = hf_config.get("id2label")
  if not id2label:
    return tuple(f"LABEL_{i}" for i in range(num_labels))
  try:
    by_id = {int(k): str(v) for k, v in id2label.items()}
  except (AttributeError, TypeError, ValueError) as e:
    raise HFCheckpointError(f"{source}: id2label is not an object of id -> label: {e}") from e
  if sorted(by_id) != list(range(num_labels)):
    raise HFCheckpointError(f"{source}: id2label has ids {sorted(by_id)}, but the classifier "
                            f"has {num_labels} outputs (ids 0..{num_labels - 1} expected)")
  labels = tuple(by_id[i] for i in range(num_labels))
  if len(set(labels)) != len(labels):
    raise HFCheckpointError(f"{source}: id2label names a label twice: {list(labels)}")
  return labels


def config_to_hf(model_config: models.RobertaConfig, labels) -> dict:
  """config.json of the HF token classifier (see the module docstring)."""
  hf = hf_weights.config_to_hf(model_config)
  hf["architectures"] = [a.replace("ForMaskedLM", ARCHITECTURE_SUFFIX)
                         for a in hf["architectures"]]
  hf["num_labels"] = len(labels)
  hf["id2label"] = {str(i): label for i, label in enumerate(labels)}
  hf["label2id"] = {label: i for i, label in enumerate(labels)}
  return hf


def _tagger(model_config: models.RobertaConfig, info: ProblemInfo):
  """(pretrainer, FinetuneModel) sharing one encoder: hf_weights maps the pretrainer's encoder
  (its MLM head is not part of the fine-tuned model and is never written), the model is what
  the fine-tuned dir's checkpoint holds (built as finetuned_dir.new_model builds it)."""
  pretrainer = models.build_pretrainer(model_config)
  return pretrainer, finetuned_dir.model_on(pretrainer.encoder, model_config, info)


def to_hf_tensors(pretrainer: models.RobertaPretrainer,
                  model: heads.FinetuneModel) -> dict[str, np.ndarray]:
  """The HF RobertaForTokenClassification state dict (float32 numpy) of `model`, whose encoder
  is `pretrainer`'s."""
  tensors = {k: v for k, v in hf_weights.to_hf_tensors(pretrainer).items()
             if not k.startswith(_MLM_HEAD_PREFIX)}
  classifier = model.head.classifier
  tensors[WEIGHT_KEY] = np.ascontiguousarray(np.asarray(classifier.kernel.numpy(), np.float32).T)
  tensors[BIAS_KEY] = np.asarray(classifier.bias.numpy(), np.float32)
  return tensors


def load_finetuned(model_dir: str, checkpoint: str | None = None):
  """(pretrainer, FinetuneModel, RobertaConfig, ProblemInfo) of a fine-tuned token-classification
  dir (finetuned_dir.load_for_export); a one-line refusal for other task types."""
  return finetuned_dir.load_for_export(
      model_dir, problem_types.TOKEN_CLASSIFICATION, "--to_hf exports pretrained models "
      "(RobertaForMaskedLM) and token_classification ones (RobertaForTokenClassification) only",
      checkpoint)


def save_hf(model_dir: str, hf_dir: str, checkpoint: str | None = None) -> int:
  """Writes config.json + model.safetensors of the fine-tuned tagger in model_dir as an HF
  RobertaForTokenClassification folder; returns the model's max_seq_len (for the tokenizer)."""
  pretrainer, model, model_config, info = load_finetuned(model_dir, checkpoint)
  files.makedirs(hf_dir)
  with atomic_write.atomic_path(files.join(hf_dir, hf_weights.WEIGHTS_FILE),
                                umask_mode=True) as tmp:
    # transformers refuses safetensors files without format metadata.
    save_file(to_hf_tensors(pretrainer, model), tmp, metadata={"format": "pt"})
  atomic_write.write_json(files.join(hf_dir, hf_weights.CONFIG_FILE),
                          config_to_hf(model_config, info.labels))
  return model_config.max_seq_len


def _classifier(tensors: dict, hidden: int, source: str) -> tuple[np.ndarray, np.ndarray]:
  """(weight [K, H], bias [K]) popped from tensors, float32, shapes checked."""
  weight, bias = tensors.pop(WEIGHT_KEY, None), tensors.pop(BIAS_KEY, None)
  if weight is None or bias is None:
    missing = WEIGHT_KEY if weight is None else BIAS_KEY
    raise HFCheckpointError(f"{source}: missing key {missing!r} (a RobertaForTokenClassification "
                            "checkpoint is expected)")
  if weight.ndim != 2 or weight.shape[1] != hidden or bias.shape != weight.shape[:1]:
    raise HFCheckpointError(f"{source}: {WEIGHT_KEY} {tuple(weight.shape)} and {BIAS_KEY} "
                            f"{tuple(bias.shape)} do not fit [num_labels, {hidden}] and "
                            "[num_labels]")
  return weight.astype(np.float32), bias.astype(np.float32)


def load_hf(hf_config: dict, tensors: dict, source: str):
  """(FinetuneModel, RobertaConfig, ProblemInfo) of an HF RobertaForTokenClassification's
  config.json dict and state dict (hf_weights.read_hf_dir)."""
  model_config = hf_weights.config_from_hf(hf_config, source)
  tensors = dict(tensors)
  weight, bias = _classifier(tensors, model_config.hidden_size, source)
  labels = labels_from_hf(hf_config, weight.shape[0], source)
  info = ProblemInfo(problem_types.TOKEN_CLASSIFICATION, max_seq_len=model_config.max_seq_len,
                     labels=labels, tag_scheme=scheme_of_labels(labels))
  pretrainer, model = _tagger(model_config, info)
  # The HF model has no MLM head; hf_weights checks every key it maps, so give it the fresh
  # pretrainer's own (which the fine-tuned model does not hold).
  tensors.update({k: v for k, v in hf_weights.to_hf_tensors(pretrainer).items()
                  if k.startswith(_MLM_HEAD_PREFIX)})
  hf_weights.set_from_hf_tensors(pretrainer, tensors, source)
  model.head.classifier.kernel.assign(weight.T)
  model.head.classifier.bias.assign(bias)
  return model, model_config, info


def import_hf(hf_dir: str, out_dir: str, hf_config: dict, tensors: dict,
              overwrite: bool = False) -> str:
  """HF token classifier (already read: hf_weights.read_hf_dir) -> a new fine-tuned model dir
  (config.json with "task", one checkpoint, hf_dir's vocab files); returns the checkpoint
  prefix. The dir is assembled under a temporary name and renamed when complete."""
  source = files.join(hf_dir, hf_weights.WEIGHTS_FILE)
  model, model_config, info = load_hf(hf_config, tensors, source)
  return finetuned_dir.write_new(out_dir, model, model_config, info,
                                 lambda tmp: vocab_files.copy_vocab_files(hf_dir, tmp), overwrite)
