"""keras-hub presets of RoBERTa: written from our pretrainer, read back into one.

A preset is a directory that `keras_hub.models.RobertaMaskedLM.from_preset(dir)` and
`keras_hub.models.RobertaTextClassifier.from_preset(dir, num_classes=...)` load and fit at the
model's own sequence length. It is written by keras-hub's own `save_to_preset` on a
`RobertaMaskedLM` built from our weights (then on a `RobertaTextClassifierPreprocessor`), so it
is exactly what keras-hub writes:

```
preset_dir/
  config.json            RobertaBackbone config (registered_name "keras_hub>RobertaBackbone")
  model.weights.h5       backbone weights
  task.json              RobertaMaskedLM config, its preprocessor included (a
                         RobertaMaskedLMPreprocessor at our max_seq_len); task.weights.h5:
                         backbone + MLM head weights
  preprocessor.json      RobertaTextClassifierPreprocessor (sequence_length = our max_seq_len)
  tokenizer.json         RobertaTokenizer config
  assets/tokenizer/      vocabulary.json (= our vocab.json) and merges.txt
  metadata.json          keras / keras-hub versions
```
Weights map as in `keras_hub_weights` (position row j of keras-hub = our row j + 2).

Why preprocessor.json is the classifier's: `RobertaMaskedLM.from_preset` builds its
preprocessor from task.json, but a task without its own task.json (`RobertaTextClassifier`)
reads preprocessor.json only if it holds that task's preprocessor class, and else builds one at
keras-hub's default 512 tokens, which a model with fewer positions cannot run ("Paddings must
be non-negative"). One file, one class: the classifier's is the one with no other source. A
standalone `RobertaMaskedLMPreprocessor.from_preset(dir)` therefore needs
`sequence_length=<max_seq_len>`.
"""

from __future__ import annotations

import json

import keras_hub

from roberta_tf.common import atomic_write, error_text, files
from roberta_tf.models import registry
from roberta_tf.models.roberta import keras_hub_weights
from roberta_tf.models.roberta.config import RobertaConfig
from roberta_tf.models.roberta.pretrainer import RobertaPretrainer

BACKBONE_CLASS = "keras_hub>RobertaBackbone"
MASKED_LM_CLASS = "keras_hub>RobertaMaskedLM"
CONFIG_FILE = "config.json"
TASK_FILE = "task.json"
TASK_WEIGHTS_FILE = "task.weights.h5"
# Where keras-hub's tokenizer keeps its assets: {vocabulary.json, merges.txt} are our
# {vocab.json, merges.txt}, byte for byte the same format.
TOKENIZER_ASSETS = "assets/tokenizer"
ASSET_NAMES = {"vocab.json": "vocabulary.json", "merges.txt": "merges.txt"}


class KerasHubPresetError(ValueError):
  """A preset directory that cannot be written or read; the message names it and the problem."""


def _check_special_ids(tokenizer, config: RobertaConfig, source: str) -> None:
  """keras-hub's tokenizer reads <s>/<pad>/</s> ids from the vocabulary: they must be ours."""
  pairs = [("<s>", tokenizer.start_token_id, config.bos_id),
           ("<pad>", tokenizer.pad_token_id, config.pad_id),
           ("</s>", tokenizer.end_token_id, config.eos_id)]
  wrong = [f"{token} is {got}, the model expects {want}" for token, got, want in pairs
           if got != want]
  if wrong:
    raise KerasHubPresetError(f"{source}: special ids disagree with the model: {'; '.join(wrong)}")
  if tokenizer.vocabulary_size() > config.vocab_size:
    raise KerasHubPresetError(f"{source}: {tokenizer.vocabulary_size()} tokens, more than the "
                              f"model's vocab_size {config.vocab_size}")


def build_masked_lm(pretrainer: RobertaPretrainer, vocab_path: str, merges_path: str,
                    source: str | None = None) -> keras_hub.models.RobertaMaskedLM:
  """A keras-hub RobertaMaskedLM (with its preprocessor) holding `pretrainer`'s weights.

  Args:
    pretrainer: our model (float32 weights).
    vocab_path, merges_path: its vocab.json and merges.txt (local paths: keras-hub's
      tokenizer opens them with `open`; `save_preset` takes URLs).
    source: the vocabulary's name in messages (default: vocab_path).

  Returns:
    RobertaMaskedLM whose backbone and MLM head equal ours; its preprocessor packs to
    `config.max_seq_len` tokens.
  """
  config = pretrainer.config
  tokenizer = keras_hub.models.RobertaTokenizer(vocabulary=vocab_path, merges=merges_path)
  _check_special_ids(tokenizer, config, source or vocab_path)
  backbone = keras_hub_weights.build_backbone(config)
  keras_hub_weights.copy_to_backbone(pretrainer.encoder, backbone)
  preprocessor = keras_hub.models.RobertaMaskedLMPreprocessor(
      tokenizer, sequence_length=config.max_seq_len)
  masked_lm = keras_hub.models.RobertaMaskedLM(backbone, preprocessor=preprocessor)
  keras_hub_weights.copy_head_to_masked_lm(pretrainer.mlm_head, masked_lm)
  return masked_lm


def save_preset(pretrainer: RobertaPretrainer, vocab_path: str, merges_path: str,
                preset_dir: str, overwrite: bool = False) -> None:
  """Writes `pretrainer` and its tokenizer as a keras-hub preset (see the module docstring).

  The preset is assembled under a temporary name and renamed when complete.

  Raises:
    KerasHubPresetError: `preset_dir` exists and is not empty (without `overwrite`), or the
      vocabulary's special ids are not the model's.
    KerasHubWeightsError: the architecture has no keras-hub equivalent (e.g. eps != 1e-5).
  """
  if pretrainer.config.type_vocab_size > 1 or pretrainer.config.next_sentence_head:
    raise KerasHubPresetError("this model has segment token types / an NSP head (the "
                              "input-format ablation's); keras-hub's RobertaBackbone has neither")
  keras_hub_weights.check_supported(pretrainer.config)  # pre-LN / gated FFN: refused, named
  preset_dir = files.normalize(preset_dir)
  if files.exists(preset_dir) and not files.isdir(preset_dir):
    raise KerasHubPresetError(f"{preset_dir!r} exists and is not a directory")
  if files.isdir(preset_dir) and files.listdir(preset_dir) and not overwrite:
    raise KerasHubPresetError(f"{preset_dir!r} exists and is not empty; pass --overwrite to "
                              f"replace it")
  # keras-hub reads and writes local files only: the vocabulary is read from local copies
  # (of URLs), and the preset is written to a local directory that atomic_dir publishes.
  with files.local_copy(vocab_path) as vocab, files.local_copy(merges_path) as merges:
    masked_lm = build_masked_lm(pretrainer, vocab, merges, source=vocab_path)
    classifier_preprocessor = keras_hub.models.RobertaTextClassifierPreprocessor(
        masked_lm.preprocessor.tokenizer, sequence_length=pretrainer.config.max_seq_len)
    with atomic_write.atomic_dir(preset_dir) as tmp:
      masked_lm.save_to_preset(tmp)
      classifier_preprocessor.save_to_preset(tmp)  # preprocessor.json: see the module docstring


def _read_json(path: str) -> dict:
  try:
    return files.read_json(path)
  except (OSError, json.JSONDecodeError) as e:
    raise KerasHubPresetError(f"cannot read {path}: {e}") from e
  except Exception as e:  # a TF file system's error on a URL
    if not error_text.is_tf_error(e):
      raise
    raise KerasHubPresetError(f"cannot read {path}: {error_text.one_line(e)}") from e


def has_masked_lm_head(preset_dir: str) -> bool:
  """Whether the preset holds a RobertaMaskedLM task with its weights (else: backbone only)."""
  task = files.join(preset_dir, TASK_FILE)
  return (files.isfile(task) and files.isfile(files.join(preset_dir, TASK_WEIGHTS_FILE))
          and _read_json(task).get("registered_name") == MASKED_LM_CLASS)


def check_preset(preset_dir: str) -> None:
  """Raises KerasHubPresetError unless `preset_dir` (a path or URL) is a keras-hub RoBERTa
  preset directory."""
  config_path = files.join(preset_dir, CONFIG_FILE)
  if not files.isdir(preset_dir):
    raise KerasHubPresetError(f"keras-hub preset {preset_dir!r} is not a directory")
  if not files.isfile(config_path):
    raise KerasHubPresetError(f"{config_path} not found: {preset_dir!r} is not a keras-hub "
                              f"preset (save_to_preset writes config.json + model.weights.h5)")
  name = _read_json(config_path).get("registered_name")
  if name != BACKBONE_CLASS:
    raise KerasHubPresetError(f"{config_path}: the backbone is {name!r}, not {BACKBONE_CLASS!r}: "
                              f"only RoBERTa presets can be imported")


def vocab_paths(preset_dir: str) -> dict[str, str] | None:
  """{our file name: path in the preset} of the tokenizer's assets, or None if it has none."""
  paths = {ours: files.join(preset_dir, TOKENIZER_ASSETS, theirs)
           for ours, theirs in ASSET_NAMES.items()}
  return paths if all(files.isfile(p) for p in paths.values()) else None


def load_preset(preset_dir: str, dtype=None) -> tuple[RobertaPretrainer, bool]:
  """Our pretrainer with a keras-hub RoBERTa preset's weights.

  Args:
    preset_dir: a preset directory, local or a URL (from `save_to_preset`, ours or
      keras-hub's). keras-hub reads local files only (a URL it would copy into a cache under
      ~/.keras that it never refreshes), so a URL's preset is read from a local copy.
    dtype: the dtype policy to build our model with.

  Returns:
    (pretrainer, head_loaded): head_loaded is False for a backbone-only preset (no
    RobertaMaskedLM task weights), whose MLM head keeps our fresh initialization.

  Raises:
    KerasHubPresetError: not a directory, no config.json, not a RobertaBackbone, or a
      tokenizer whose special ids are not RoBERTa's.
  """
  check_preset(preset_dir)
  head_loaded = has_masked_lm_head(preset_dir)
  has_tokenizer = bool(vocab_paths(preset_dir))
  with files.local_copy(preset_dir) as local:
    if head_loaded:
      masked_lm = keras_hub.models.RobertaMaskedLM.from_preset(local, dtype="float32")
      backbone = masked_lm.backbone
    else:
      backbone = keras_hub.models.RobertaBackbone.from_preset(local, dtype="float32")
    config = keras_hub_weights.config_from_backbone(backbone)
    if has_tokenizer:
      tokenizer = keras_hub.models.RobertaTokenizer.from_preset(local)
      _check_special_ids(tokenizer, config, files.join(preset_dir, TOKENIZER_ASSETS))
  pretrainer = registry.build_pretrainer(config, dtype=dtype)
  keras_hub_weights.copy_from_backbone(backbone, pretrainer.encoder)
  if head_loaded:
    keras_hub_weights.copy_head_from_masked_lm(masked_lm, pretrainer.mlm_head)
  return pretrainer, head_loaded
