"""A vocabulary folder of either kind, as one object: its special ids, templates, size, files.

Two kinds of folder hold a vocabulary (no TensorFlow here: data_prep reads it too):
- `vocab.json` + `merges.txt` (GPT-2 / RoBERTa): RoBERTa's specials by name (<s>, <pad>, </s>,
  <unk>, <mask>) and RoBERTa's templates, `<s> A </s>` and `<s> A </s></s> B </s>`;
- `tokenizer.json` (an HF fast tokenizer, e.g. ModernBERT's, alone or in an HF model folder
  beside config.json, tokenizer_config.json, ...): the templates are its post-processor's
  (`[CLS] A [SEP]`, `[CLS] A [SEP] B [SEP]`); the roles from tokenizer_config.json /
  special_tokens_map.json when there, else from the template (its first id opens, its last
  closes) and the tokens' names ([PAD] / <pad> / <|padding|>, [MASK] / <mask>, [UNK] / <unk>).
A folder with both kinds is read as vocab.json + merges.txt (what this project always did).

`bos` and `eos` are the ids that open and close a sequence (dataset_info.json's names):
<s> / </s> for RoBERTa, [CLS] / [SEP] for ModernBERT (its config's bos/cls and eos/sep ids).
Code that builds sequences takes them and the pair template from here, not from constants.
"""

from __future__ import annotations

import dataclasses
import json

from roberta_tf.common import files
from roberta_tf.tokenization import tokenizer_json, vocab_files
from roberta_tf.tokenization.tokenizer_json import Template
from roberta_tf.tokenization.vocab_files import VocabFileError

BPE_FILES = "vocab.json+merges.txt"
TOKENIZER_JSON = "tokenizer.json"
# An HF folder's files that name the roles (cls_token, ...), read in this order.
ROLE_FILES = vocab_files.ROLE_FILES
_NAMES = {"pad": ("[PAD]", "<pad>", "<|padding|>"), "mask": ("[MASK]", "<mask>"),
          "unk": ("[UNK]", "<unk>")}
ROLES = ("bos", "pad", "eos", "unk", "mask")


def roberta_template(bos: int, eos: int) -> Template:
  """`<s> A </s>` and `<s> A </s></s> B </s>`."""
  return Template((bos,), (eos,), (eos, eos))


@dataclasses.dataclass(frozen=True)
class Vocabulary:
  """A vocabulary folder's facts.

  Attributes:
    directory: the folder.
    kind: BPE_FILES or TOKENIZER_JSON.
    files: the names of the files that define the ids (what an identity hashes, what a copy
      takes): ("vocab.json", "merges.txt") or ("tokenizer.json",).
    size: ids (max id + 1).
    special_ids: {"bos", "pad", "eos", "unk", "mask"} -> id (a role the vocabulary lacks is
      absent; "unk" may be).
    template: the single and pair templates' ids.
  """
  directory: str
  kind: str
  files: tuple[str, ...]
  size: int
  special_ids: dict[str, int]
  template: Template

  @property
  def cls_id(self) -> int:
    return self.special_ids["bos"]

  @property
  def sep_id(self) -> int:
    return self.special_ids["eos"]

  @property
  def pad_id(self) -> int:
    return self.special_ids["pad"]

  @property
  def mask_id(self) -> int:
    return self.special_ids["mask"]

  def paths(self) -> list[str]:
    return [files.join(self.directory, n) for n in self.files]

  @classmethod
  def of_dir(cls, directory: str) -> Vocabulary:
    """Reads a vocabulary folder of either kind; VocabFileError naming it when it is neither
    (or its files cannot be used)."""
    if vocab_files.present(directory) == list(vocab_files.FILES):
      return _of_bpe_files(directory)
    if files.isfile(tokenizer_json.path_in(directory)):
      return _of_tokenizer_json(directory)
    raise VocabFileError(f"{directory}: no vocabulary (neither vocab.json + merges.txt nor "
                         "tokenizer.json)")


def is_vocab_dir(directory: str) -> bool:
  """Whether `directory` holds a vocabulary of either kind."""
  return (vocab_files.present(directory) == list(vocab_files.FILES)
          or files.isfile(tokenizer_json.path_in(directory)))


def _of_bpe_files(directory: str) -> Vocabulary:
  vocab_path, _ = vocab_files.paths(directory)
  vocab = vocab_files.read_vocab(vocab_path)
  missing = [t for t in vocab_files.SPECIAL_TOKENS.values() if t not in vocab]
  if missing:
    raise VocabFileError(f"{vocab_path} lacks the special tokens {missing}")
  ids = {role: vocab[t] for role, t in vocab_files.SPECIAL_TOKENS.items()}
  return Vocabulary(directory, BPE_FILES, vocab_files.FILES, max(vocab.values()) + 1, ids,
                    roberta_template(ids["bos"], ids["eos"]))


def _named_roles(directory: str) -> dict[str, str]:
  """role -> token content, from an HF folder's special_tokens_map.json / tokenizer_config.json
  (cls_token -> bos, sep_token -> eos: they open and close a sequence)."""
  keys = {"cls_token": "bos", "sep_token": "eos", "pad_token": "pad", "mask_token": "mask",
          "unk_token": "unk"}
  roles: dict[str, str] = {}
  for name in reversed(ROLE_FILES):  # special_tokens_map.json last: it wins
    path = files.join(directory, name)
    if not files.isfile(path):
      continue
    try:
      config = json.loads(files.read_text(path))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
      raise VocabFileError(f"cannot read {path}: {e}") from e
    for key, role in keys.items():
      value = config.get(key) if isinstance(config, dict) else None
      value = value.get("content") if isinstance(value, dict) else value
      if isinstance(value, str):
        roles[role] = value
  return roles


def roles_of(spec: tokenizer_json.TokenizerSpec, named: dict[str, str] | None = None
             ) -> dict[str, int]:
  """{"bos", "pad", "eos", "unk", "mask"} -> id of a tokenizer.json: `named` (role -> token,
  `_named_roles`) first, then the template's ends and the tokens' names."""
  ids: dict[str, int] = {}
  if spec.template.prefix:
    ids["bos"] = spec.template.prefix[0]
  if spec.template.suffix:
    ids["eos"] = spec.template.suffix[-1]
  for role, names in _NAMES.items():
    found = [spec.vocab[n] for n in names if n in spec.vocab]
    if found:
      ids[role] = found[0]
  for role, token in (named or {}).items():
    if token not in spec.vocab:
      raise VocabFileError(f"{spec.path}: the {role} token {token!r} is not in it")
    if role in ("bos", "eos") and role in ids and ids[role] != spec.vocab[token]:
      raise VocabFileError(f"{spec.path}: the template's {role} id {ids[role]} is not the "
                           f"configured token {token!r} ({spec.vocab[token]})")
    ids[role] = spec.vocab[token]
  missing = [r for r in ROLES if r not in ids and r != "unk"]
  if missing:
    raise VocabFileError(f"{spec.path}: no {missing} token (a template [CLS] $A [SEP] names "
                         "bos/eos; [PAD], [MASK] by name or in tokenizer_config.json)")
  return {r: ids[r] for r in ROLES if r in ids}


def _of_tokenizer_json(directory: str) -> Vocabulary:
  spec = tokenizer_json.read(tokenizer_json.path_in(directory))
  return Vocabulary(directory, TOKENIZER_JSON, (tokenizer_json.TOKENIZER_JSON_FILE,),
                    max(spec.vocab.values()) + 1, roles_of(spec, _named_roles(directory)),
                    spec.template)
