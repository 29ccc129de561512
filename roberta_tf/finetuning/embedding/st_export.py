"""A fine-tuned embedding model dir as a sentence-transformers folder.

`SentenceTransformer(DIR)` loads what `save` writes and computes our embeddings (the `embed`
signature's, serving/finetuned_export.py) on raw text:

  config.json, model.safetensors   the encoder as an HF `RobertaModel` (keys roberta.*:
                                   hf_weights' mapping, without the MLM head)
  vocab.json, merges.txt,          the tokenizer (hf_tokenizer_files), add_prefix_space false:
  tokenizer_config.json,           a text is encoded as it is, as our tokenizer does;
  special_tokens_map.json          model_max_length = the fine-tuned max_seq_len
  sentence_bert_config.json        {"max_seq_length": max_seq_len, "do_lower_case": false}
  modules.json                     Transformer (the root), Pooling (1_Pooling), Normalize
                                   (2_Normalize)
  1_Pooling/config.json            mean over the tokens or the <s> vector (ProblemInfo.pooling)
  2_Normalize/config.json          L2 (sentence-transformers 6 writes this file; older ones ignore
                                   it, and it keeps the folder non-empty on object stores)
  config_sentence_transformers.json  similarity_fn_name "cosine"

Why these agree with our model: ST's Transformer truncates with the tokenizer's
`max_length=max_seq_length`, which counts `<s>` and `</s>`: `<s> tokens[:max_seq_len-2] </s>`,
exactly featurize.build_inputs. Its mean pooling averages over the attention mask (<s> and </s>
included, pads not), as heads.pool does; Normalize is F.normalize (eps 1e-12, ours 1e-24 on the
squared norm: the same).

One known difference: a text containing the string "<pad>" is encoded as the pad id by both
tokenizers, and HF RoBERTa gives that token the pad POSITION (it derives positions from
input_ids != pad_id), our encoder a real one (from the padding mask, as in training); such
texts embed differently (cosine 0.76 for the text "<pad>" on a test model). Everything else
agrees (cosine >= 0.9999 on 1,200 varied texts: tests/test_embedding_export.py).

A ModernBERT embedding model (config family "modernbert") writes the encoder as an HF
`ModernBertModel` instead (modernbert_hf_weights' keys without "model.", config.json of
architecture ModernBertModel) and its tokenizer.json with HF role files (hf_tokenizer_files.
write_pipeline: [CLS] text [SEP], model_max_length = max_seq_len); no pooler exists there.
Truncation and pooling agree as above ([CLS] / [SEP] in the places of <s> / </s>).

RobertaModel has a pooler (dense + tanh on `<s>`) that embeddings never use; a checkpoint without
its weights makes transformers report them missing and initialize them at random. We write
them: weight = identity, bias = zeros (pooler_output = tanh(<s> vector), deterministic).
The module types in modules.json are the classic `sentence_transformers.models.*` names (what
versions up to 4.x wrote), which 6.x still resolves, to its new modules and without a warning.
"""

from __future__ import annotations

import numpy as np
from safetensors.numpy import save_file

from roberta_tf import models
from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning import finetuned_dir, problem_types
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.models import hf_tokenizer_files, registry
from roberta_tf.models import model_dir as model_dir_lib
from roberta_tf.models.modernbert import modernbert_hf_config as mb_config
from roberta_tf.models.modernbert import modernbert_hf_weights as mb_weights
from roberta_tf.models.roberta import hf_weights
from roberta_tf.tokenization import vocab_files

MODULES_FILE = "modules.json"
SBERT_CONFIG_FILE = "sentence_bert_config.json"
ST_CONFIG_FILE = "config_sentence_transformers.json"
POOLING_DIR, NORMALIZE_DIR = "1_Pooling", "2_Normalize"
MODULE_CONFIG_FILE = "config.json"  # a module's own config, in its subfolder
_MLM_HEAD_PREFIX = "lm_head."
_MODULES = (("", "Transformer"), (POOLING_DIR, "Pooling"), (NORMALIZE_DIR, "Normalize"))


def is_embedding_dir(model_dir: str) -> bool:
  """Whether model_dir is a fine-tuned model dir of task type embedding."""
  try:
    return finetuned_dir.read_problem_info(model_dir).task_type == problem_types.EMBEDDING
  except models.ModelDirError:
    return False


def load_embedder(model_dir: str, checkpoint: str | None = None):
  """(pretrainer, FinetuneModel, RobertaConfig, ProblemInfo) of a fine-tuned embedding dir
  (finetuned_dir.load_for_export); one-line refusals for anything else."""
  return finetuned_dir.load_for_export(
      model_dir, problem_types.EMBEDDING, "--to_sentence_transformers exports embedding models "
      "(roberta_tf.finetune --task=embedding) only", checkpoint)


def _prefix(model_config: models.RobertaConfig) -> str:
  return "roberta_prelayernorm" if model_config.pre_layer_norm else "roberta"


def to_hf_tensors(pretrainer: models.RobertaPretrainer) -> dict[str, np.ndarray]:
  """The HF RobertaModel state dict (float32 numpy, keys roberta.*) of pretrainer's encoder,
  with the unused pooler as identity / zeros (module docstring)."""
  tensors = {k: v for k, v in hf_weights.to_hf_tensors(pretrainer).items()
             if not k.startswith(_MLM_HEAD_PREFIX)}
  hidden, prefix = pretrainer.config.hidden_size, _prefix(pretrainer.config)
  tensors[f"{prefix}.pooler.dense.weight"] = np.eye(hidden, dtype=np.float32)
  tensors[f"{prefix}.pooler.dense.bias"] = np.zeros((hidden,), np.float32)
  return tensors


def modernbert_tensors(pretrainer) -> dict[str, np.ndarray]:
  """The HF ModernBertModel state dict (float32 numpy, its own keys: no "model.") of a
  ModernBERT pretrainer's encoder."""
  return mb_weights.tensors_of(mb_weights.encoder_weight_map(
      pretrainer.encoder, pretrainer.config.num_layers, prefix=""))


def config_to_hf(model_config: models.RobertaConfig) -> dict:
  """config.json of the HF RobertaModel (RobertaPreLayerNormModel for a pre-LN model)."""
  hf = hf_weights.config_to_hf(model_config)
  hf["architectures"] = [a.replace("ForMaskedLM", "Model") for a in hf["architectures"]]
  return hf


def pooling_config(hidden_size: int, pooling: str) -> dict:
  """1_Pooling/config.json (the classic keys: every ST version reads them)."""
  if pooling not in problem_types.POOLINGS:
    raise ValueError(f"pooling {pooling!r} is not one of {problem_types.POOLINGS}")
  return {"word_embedding_dimension": int(hidden_size),
          "pooling_mode_cls_token": pooling == problem_types.CLS,
          "pooling_mode_mean_tokens": pooling == problem_types.MEAN,
          "pooling_mode_max_tokens": False,
          "pooling_mode_mean_sqrt_len_tokens": False,
          "pooling_mode_weightedmean_tokens": False,
          "pooling_mode_lasttoken": False,
          "include_prompt": True}


def modules_config() -> list[dict]:
  """modules.json: the Transformer at the root, then Pooling, then Normalize."""
  return [{"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
          for i, (path, kind) in enumerate(_MODULES)]


def sentence_bert_config(info: ProblemInfo) -> dict:
  """sentence_bert_config.json: truncation to the fine-tuned length, <s> and </s> included."""
  return {"max_seq_length": int(info.max_seq_len), "do_lower_case": False}


def st_config() -> dict:
  """config_sentence_transformers.json."""
  return {"model_type": "SentenceTransformer", "prompts": {}, "default_prompt_name": None,
          "similarity_fn_name": "cosine"}


def _check_output(out_dir: str, overwrite: bool) -> str:
  out_dir = files.normalize(out_dir)
  if files.exists(out_dir) and not files.isdir(out_dir):
    raise model_dir_lib.ModelDirError(f"{out_dir!r} exists and is not a directory")
  if files.isdir(out_dir) and files.listdir(out_dir) and not overwrite:
    raise model_dir_lib.ModelDirError(f"{out_dir!r} exists and is not empty; pass --overwrite "
                                      "to replace it")
  return out_dir


def save(model_dir: str, out_dir: str, overwrite: bool = False,
         checkpoint: str | None = None) -> list[str]:
  """Writes the sentence-transformers folder of fine-tuned embedding `model_dir` to out_dir;
  returns the files written (relative paths, sorted).

  The folder is assembled under a temporary name and replaces out_dir when complete
  (atomic_write.atomic_dir); a non-empty out_dir needs `overwrite`.

  Raises:
    HFCheckpointError: model_dir is not a fine-tuned embedding model, or has no HF equivalent.
    ModelDirError: out_dir is not empty (without overwrite), or model_dir is unreadable.
    VocabFileError: model_dir's vocab files are missing or lack a special token.
  """
  out_dir = _check_output(out_dir, overwrite)
  pretrainer, _, model_config, info = load_embedder(model_dir, checkpoint)
  modernbert = registry.family_of(model_config).name != registry.DEFAULT_FAMILY
  missing = [p for p in vocab_files.paths(model_dir) if not files.isfile(p)]
  if missing and not files.isfile(files.join(model_dir, vocab_files.TOKENIZER_FILE)):
    raise vocab_files.VocabFileError(f"{', '.join(missing)} not found: a sentence-transformers "
                                     "folder carries its tokenizer")
  with atomic_write.atomic_dir(out_dir) as tmp:  # a local directory, even for a URL out_dir
    with atomic_write.atomic_path(files.join(tmp, hf_weights.WEIGHTS_FILE),
                                  umask_mode=True) as weights:
      # transformers refuses safetensors files without format metadata.
      save_file(modernbert_tensors(pretrainer) if modernbert else to_hf_tensors(pretrainer),
                weights, metadata={"format": "pt"})
    json_files = {
        hf_weights.CONFIG_FILE: (mb_config.config_to_hf(model_config, "ModernBertModel")
                                 if modernbert else config_to_hf(model_config)),
        SBERT_CONFIG_FILE: sentence_bert_config(info),
        MODULES_FILE: modules_config(),
        ST_CONFIG_FILE: st_config(),
        f"{POOLING_DIR}/{MODULE_CONFIG_FILE}": pooling_config(model_config.hidden_size,
                                                              info.pooling),
        f"{NORMALIZE_DIR}/{MODULE_CONFIG_FILE}": {"module_input_name": "sentence_embedding",
                                                  "module_output_name": "sentence_embedding"},
    }
    for name, doc in json_files.items():
      files.makedirs(files.dirname(files.join(tmp, name)))
      atomic_write.write_json(files.join(tmp, name), doc)
    written = [hf_weights.WEIGHTS_FILE, *json_files]
    copied = vocab_files.copy_vocab_files(model_dir, tmp)
    written += copied
    if vocab_files.TOKENIZER_FILE in copied:  # a tokenizer.json vocabulary (ModernBERT's)
      written += hf_tokenizer_files.write_pipeline(tmp, info.max_seq_len)
    else:
      written += hf_tokenizer_files.write(tmp, vocab_files.paths(tmp)[0], info.max_seq_len,
                                          add_prefix_space=False)
  return sorted(set(written))
