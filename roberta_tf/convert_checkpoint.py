r"""Converts between Hugging Face checkpoints and roberta_tf model directories.

Every model family (models/registry.py) goes both ways as its HF *ForMaskedLM folder: RoBERTa
(RobertaForMaskedLM) and ModernBERT (ModernBertForMaskedLM, with its tokenizer.json,
tokenizer_config.json and special_tokens_map.json copied in and back out).

Import (HF RobertaForMaskedLM → model dir that train/evaluate/export/finetune accept):

  python -m roberta_tf.convert_checkpoint --hf_dir=roberta-base/ --model_dir=models/base

Export (model dir → an HF folder that transformers' `AutoModelForMaskedLM`, `AutoTokenizer` and
`pipeline("fill-mask")` load: config.json, model.safetensors, vocab.json, merges.txt,
tokenizer_config.json, special_tokens_map.json):

  python -m roberta_tf.convert_checkpoint --to_hf --model_dir=models/base --hf_dir=out/

keras-hub presets (what `keras_hub.models.RobertaMaskedLM.from_preset(DIR)` and
`RobertaTextClassifier.from_preset(DIR, num_classes=...)` load; written by keras-hub's own
`save_to_preset`, so the model dir must hold vocab.json and merges.txt):

  python -m roberta_tf.convert_checkpoint --to_keras_hub_preset=out/preset --model_dir=models/base
  python -m roberta_tf.convert_checkpoint --from_keras_hub_preset=preset/ --model_dir=models/kh

A fine-tuned token-classification model dir (config.json with a "task", roberta_tf.finetune
--task=token_classification) goes both ways as an HF `RobertaForTokenClassification` folder
(finetuning/tagging/hf_tagger.py): --to_hf writes id2label/label2id and a tokenizer with
add_prefix_space (HF's is_split_into_words encoding, ours); --hf_dir of such a folder (its
architectures or classifier.* keys say so) writes a fine-tuned model dir that finetune's
evaluation and export read. A model fine-tuned on ModernBERT goes both ways as HF's
ModernBertForSequenceClassification (classification, regression), ForMultipleChoice,
ForTokenClassification or ForQuestionAnswering folder (finetuning/finetuned_modernbert_hf.py;
the tokenizer.json as it is). Other fine-tuned heads are refused in one line.

A fine-tuned embedding model dir (roberta_tf.finetune --task=embedding) becomes a
sentence-transformers folder (finetuning/embedding/st_export.py: an HF RobertaModel, its tokenizer,
Pooling as fine-tuned, Normalize), which `SentenceTransformer(DIR).encode(texts)` loads and
which computes the exported SavedModel's `embed` vectors:

  python -m roberta_tf.convert_checkpoint --to_sentence_transformers=out/st --model_dir=models/emb

The HF side is read and written with safetensors' numpy API (no torch, no pickle). vocab.json
and merges.txt, when present, are copied along so the result carries its tokenizer. Every
directory may be a URL (gs://, ram://, ...: any scheme tf.io.gfile has registered).
"""

from __future__ import annotations

import dataclasses
import os
import sys

from absl import app

from roberta_tf.common import cli, files, options
from roberta_tf.common.options import option
from roberta_tf.tokenization import vocab_files

# The converters (roberta_tf.models, roberta_tf.finetuning) import TensorFlow: each function
# imports what it uses, so that importing this binary does not (common/cli.py's `run` quiets
# TensorFlow's start-up before `main` imports it).


@dataclasses.dataclass(frozen=True)
class ConvertSettings:
  """convert_checkpoint's flags: which conversion, and its directories."""
  model_dir: str = option(
      help="roberta_tf model dir: config.json + TF checkpoint (written on import, read with "
      "--to_hf).", path=True)
  hf_dir: str | None = option(
      None, "Hugging Face model dir: config.json + model.safetensors (read on import, written "
      "with --to_hf).", path=True)
  to_hf: bool = option(False, "Export --model_dir to --hf_dir instead of importing.")
  to_keras_hub_preset: str | None = option(
      None, "Write --model_dir (newest checkpoint, vocab files) as a keras-hub preset directory "
      "here.", path=True)
  from_keras_hub_preset: str | None = option(
      None, "Import this keras-hub RoBERTa preset directory into --model_dir.", path=True)
  to_sentence_transformers: str | None = option(
      None, "Write the fine-tuned embedding model --model_dir (roberta_tf.finetune "
      "--task=embedding) as a sentence-transformers folder here (what SentenceTransformer(DIR) "
      "loads).", path=True)
  overwrite: bool = option(False, "Replace an existing output directory's model files.")
  checkpoint: str | None = option(
      None, "With --to_hf / --to_keras_hub_preset / --to_sentence_transformers: the checkpoint "
      "prefix of --model_dir to convert (default: its newest; best: a pretraining run's "
      "train --keep_best checkpoint, --model_dir/best/).", path=True)


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# --model_dir is no absl-required flag: from_flags says it is missing, in one line.
options.define_flags(ConvertSettings, FLAGS, required=False)


def import_hf(hf_dir: str, out_model_dir: str, overwrite: bool = False) -> str:
  """HF checkpoint dir → new model dir of the family its `model_type` names
  (models/registry.py; a RobertaForTokenClassification's, and a ModernBertFor<task>'s
  (finetuned_modernbert_hf.py): a fine-tuned one); returns the
  checkpoint prefix written. The folder's vocab.json + merges.txt, or its family's tokenizer
  files (ModernBERT: tokenizer.json, tokenizer_config.json, special_tokens_map.json), are
  copied along."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf.finetuning.tagging import hf_tagger
  from roberta_tf.models import model_dir, registry
  from roberta_tf.models.roberta import hf_weights
  hf_config, tensors = hf_weights.read_hf_dir(hf_dir)
  family = registry.family_of_hf(hf_config)
  if family is not None and family.name != registry.DEFAULT_FAMILY:
    from roberta_tf.finetuning import finetuned_modernbert_hf
    from roberta_tf.models.modernbert import modernbert_hf_tasks
    if modernbert_hf_tasks.is_task_folder(hf_config):  # a fine-tuned model: a fine-tuned dir
      return finetuned_modernbert_hf.import_hf(hf_dir, out_model_dir,
                                               _tokenizer_files(family, hf_dir), overwrite)
    pretrainer = registry.load_hf(hf_dir, family=family)
    return model_dir.save(out_model_dir, pretrainer, overwrite=overwrite,
                          files=_tokenizer_files(family, hf_dir))
  source = files.join(hf_dir, hf_weights.WEIGHTS_FILE)
  hf_tagger.check_importable(hf_config, tensors, hf_dir)
  if hf_tagger.is_token_classifier(hf_config, tensors):
    return hf_tagger.import_hf(hf_dir, out_model_dir, hf_config, tensors, overwrite=overwrite)
  config = hf_weights.config_from_hf(hf_config, files.join(hf_dir, hf_weights.CONFIG_FILE))
  pretrainer = registry.build_pretrainer(config)
  hf_weights.set_from_hf_tensors(pretrainer, tensors, source)
  prefix = model_dir.save(out_model_dir, pretrainer, overwrite=overwrite)
  vocab_files.copy_vocab_files(hf_dir, out_model_dir)
  return prefix


def _tokenizer_files(family, src_dir: str) -> dict[str, str]:
  """{name: path} of `family`'s tokenizer files (and vocab.json / merges.txt) in `src_dir`."""
  names = (*vocab_files.FILES, *family.tokenizer_files)
  return {name: files.join(src_dir, name) for name in names
          if files.isfile(files.join(src_dir, name))}


def _reads_tokenizer_json(directory: str) -> bool:
  """Whether `directory`'s vocabulary is a tokenizer.json this project runs (copied on import)."""
  from roberta_tf.tokenization import vocabulary  # pylint: disable=import-outside-toplevel
  if vocab_files.present(directory):
    return False
  try:
    return vocabulary.Vocabulary.of_dir(directory).kind == vocabulary.TOKENIZER_JSON
  except vocab_files.VocabFileError:
    return False


def missing_vocab_warning(hf_dir: str, out_model_dir: str) -> str | None:
  """The warning for an import whose HF dir lacked vocab.json/merges.txt (and a tokenizer.json
  this project reads), or None."""
  missing = [name for name in vocab_files.FILES
             if not files.isfile(files.join(out_model_dir, name))]
  if not missing or _reads_tokenizer_json(out_model_dir):
    return None
  has_fast = files.isfile(files.join(hf_dir, "tokenizer.json"))
  return (f"warning: {hf_dir} has no {' or '.join(missing)}"
          f"{' (only tokenizer.json, which is not read)' if has_fast else ''}: {out_model_dir} "
          "has weights but no tokenizer, so export, fine-tuning and continued pretraining "
          "need --vocab_dir; copy the model's vocab.json and merges.txt into it to fix that")


def export_hf(in_model_dir: str, out_hf_dir: str, overwrite: bool = False,
              checkpoint: str | None = None) -> list[str]:
  """Model dir (newest checkpoint) → HF folder out_hf_dir; returns the file names written.

  config.json + model.safetensors (RobertaForMaskedLM; a fine-tuned token classifier's:
  RobertaForTokenClassification); with the model dir's vocab files also vocab.json,
  merges.txt and the tokenizer's tokenizer_config.json + special_tokens_map.json.
  """
  # pylint: disable=import-outside-toplevel
  from roberta_tf.finetuning import finetuned_modernbert_hf
  from roberta_tf.finetuning.embedding import st_export
  from roberta_tf.finetuning.tagging import hf_tagger
  from roberta_tf.models import hf_tokenizer_files, model_dir, registry
  from roberta_tf.models.roberta import hf_weights
  if st_export.is_embedding_dir(in_model_dir):
    raise hf_weights.HFCheckpointError(
        f"{in_model_dir} is a fine-tuned embedding model: --to_sentence_transformers=DIR writes "
        "it (an HF RobertaModel in a sentence-transformers folder), not --to_hf")
  weights = files.join(out_hf_dir, hf_weights.WEIGHTS_FILE)
  if files.exists(weights) and not overwrite:
    raise model_dir.ModelDirError(f"{weights} exists; pass --overwrite to replace it")
  if finetuned_modernbert_hf.is_modernbert_finetuned(in_model_dir):
    written = finetuned_modernbert_hf.save_hf(in_model_dir, out_hf_dir, checkpoint=checkpoint)
    family = registry.get("modernbert")
    for name, src in _tokenizer_files(family, in_model_dir).items():
      files.copy(src, files.join(out_hf_dir, name), overwrite=True)
      written.append(name)
    return written
  tagger = hf_tagger.is_finetuned_dir(in_model_dir)
  if tagger:
    max_seq_len = hf_tagger.save_hf(in_model_dir, out_hf_dir, checkpoint=checkpoint)
  else:
    pretrainer = model_dir.load(in_model_dir, checkpoint=checkpoint)
    family = registry.family_of(pretrainer.config)
    registry.hf_converter(family).save_hf(out_hf_dir, pretrainer)
    max_seq_len = pretrainer.config.max_seq_len
    if family.name != registry.DEFAULT_FAMILY:
      written = [hf_weights.CONFIG_FILE, hf_weights.WEIGHTS_FILE]
      for name, src in _tokenizer_files(family, in_model_dir).items():
        files.copy(src, files.join(out_hf_dir, name), overwrite=True)
        written.append(name)
      return written
  written = [hf_weights.CONFIG_FILE, hf_weights.WEIGHTS_FILE]
  written += vocab_files.copy_vocab_files(in_model_dir, out_hf_dir)
  if set(vocab_files.FILES) <= set(written):
    # A tagger's words are encoded each after a space (tag_features.py): add_prefix_space.
    written += hf_tokenizer_files.write(out_hf_dir, vocab_files.paths(out_hf_dir)[0],
                                        max_seq_len, add_prefix_space=tagger)
  elif vocab_files.TOKENIZER_FILE in written:  # a tokenizer.json vocabulary: it, as HF's
    written += hf_tokenizer_files.write_pipeline(out_hf_dir, max_seq_len)
  return list(dict.fromkeys(written))


def export_keras_hub(in_model_dir: str, preset_dir: str, overwrite: bool = False,
                     checkpoint: str | None = None) -> None:
  """Model dir (newest checkpoint + vocab.json, merges.txt) → keras-hub preset directory."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models import model_dir
  from roberta_tf.models.roberta import keras_hub_preset
  model_dir.read_config(in_model_dir)  # Not a model dir at all: say that first.
  vocab, merges = vocab_files.paths(in_model_dir)
  missing = [p for p in (vocab, merges) if not files.isfile(p)]
  if missing:
    raise model_dir.ModelDirError(f"{', '.join(missing)} not found: a keras-hub preset carries "
                                  f"its tokenizer, so {in_model_dir!r} needs its vocab files")
  pretrainer = model_dir.load(in_model_dir, checkpoint=checkpoint)
  keras_hub_preset.save_preset(pretrainer, vocab, merges, preset_dir, overwrite=overwrite)


def import_keras_hub(preset_dir: str, out_model_dir: str, overwrite: bool = False) -> tuple[
    str, bool]:
  """keras-hub preset → new model dir (with the preset's vocab files, if it has a tokenizer).

  Returns (checkpoint prefix written, whether the preset had an MLM head).
  """
  # pylint: disable=import-outside-toplevel
  from roberta_tf.models import model_dir
  from roberta_tf.models.roberta import keras_hub_preset
  pretrainer, head_loaded = keras_hub_preset.load_preset(preset_dir)
  vocab = keras_hub_preset.vocab_paths(preset_dir)
  prefix = model_dir.save(out_model_dir, pretrainer, overwrite=overwrite, files=vocab)
  return prefix, head_loaded


def _overlap(a: str, b: str) -> bool:
  """Whether directory `a` is, holds or lies inside directory `b`."""
  if not files.is_url(a) and not files.is_url(b):
    src, dst = (os.path.realpath(p) for p in (a, b))  # local-only: both local, links resolved
    return os.path.commonpath([src, dst]) in (src, dst)
  if files.scheme(a) != files.scheme(b):
    return False  # a URL and a local path, or two file systems
  a, b = files.normalize(a), files.normalize(b)
  return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def _check_conversion(s: ConvertSettings):
  """Raises app.UsageError unless the settings name exactly one conversion."""
  to_kh, from_kh, to_st = s.to_keras_hub_preset, s.from_keras_hub_preset, s.to_sentence_transformers
  if to_st and (to_kh or from_kh or s.hf_dir or s.to_hf):
    raise app.UsageError("--to_sentence_transformers is a conversion of its own: give it with "
                         "--model_dir only")
  if to_kh and from_kh:
    raise app.UsageError("give one of --to_keras_hub_preset and --from_keras_hub_preset")
  if (to_kh or from_kh) and (s.hf_dir or s.to_hf):
    raise app.UsageError("--hf_dir/--to_hf and a keras-hub preset flag are separate conversions")
  if not (to_kh or from_kh or to_st or s.hf_dir):
    raise app.UsageError("--hf_dir is required (or --to_keras_hub_preset / "
                         "--from_keras_hub_preset / --to_sentence_transformers)")
  if s.checkpoint and not (to_kh or to_st or s.to_hf):
    raise app.UsageError("--checkpoint picks what --to_hf / --to_keras_hub_preset / "
                         "--to_sentence_transformers convert")


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  s = options.from_flags(ConvertSettings, FLAGS)
  _check_conversion(s)
  # pylint: disable=import-outside-toplevel
  from roberta_tf.finetuning import finetuned_dir
  from roberta_tf.finetuning.embedding import st_export
  from roberta_tf.finetuning.tagging import hf_tagger
  from roberta_tf.models import hf_tokenizer_files, model_dir
  from roberta_tf.models.roberta import keras_hub_preset
  if s.to_sentence_transformers:
    out = s.to_sentence_transformers
    if _overlap(s.model_dir, out):  # --overwrite replaces the folder
      raise model_dir.ModelDirError(f"--to_sentence_transformers={out} and --model_dir="
                                    f"{s.model_dir} overlap; write the folder elsewhere")
    written = st_export.save(s.model_dir, out, overwrite=s.overwrite, checkpoint=s.checkpoint)
    print(f"wrote sentence-transformers folder {out}: {', '.join(written)}")
  elif s.to_keras_hub_preset:
    if _overlap(s.model_dir, s.to_keras_hub_preset):
      # --overwrite replaces the preset dir: it must never hold (or be) the model dir.
      raise keras_hub_preset.KerasHubPresetError(
          f"--to_keras_hub_preset={s.to_keras_hub_preset} and --model_dir={s.model_dir} "
          "overlap; write the preset elsewhere")
    export_keras_hub(s.model_dir, s.to_keras_hub_preset, overwrite=s.overwrite,
                     checkpoint=s.checkpoint)
    print(f"wrote keras-hub preset {s.to_keras_hub_preset}")
  elif s.from_keras_hub_preset:
    prefix, head_loaded = import_keras_hub(s.from_keras_hub_preset, s.model_dir,
                                           overwrite=s.overwrite)
    print(f"wrote {s.model_dir}/config.json and checkpoint {prefix}")
    if not head_loaded:
      print("note: the preset has no RobertaMaskedLM head; the MLM head is freshly initialized")
  elif s.to_hf:
    written = export_hf(s.model_dir, s.hf_dir, overwrite=s.overwrite, checkpoint=s.checkpoint)
    print(f"wrote {s.hf_dir}/{{{','.join(written)}}}")
    if hf_tokenizer_files.TOKENIZER_CONFIG_FILE not in written:
      print(f"note: no vocab files in {s.model_dir}: the HF folder has no tokenizer")
  else:
    prefix = import_hf(s.hf_dir, s.model_dir, overwrite=s.overwrite)
    print(f"wrote {s.model_dir}/config.json and checkpoint {prefix}")
    if hf_tagger.is_finetuned_dir(s.model_dir):
      info = finetuned_dir.read_problem_info(s.model_dir)
      print(f"a fine-tuned token_classification model: {len(info.labels)} labels, tag scheme "
            f"{info.tag_scheme} (read from the label names), max_seq_len {info.max_seq_len}")
    warning = missing_vocab_warning(s.hf_dir, s.model_dir)
    if warning:
      print(warning, file=sys.stderr)
  return 0


def console_main():
  """The console-script entry point (pyproject.toml)."""
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
