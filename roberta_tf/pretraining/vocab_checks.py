"""Where pretraining's model meets the shards' vocabulary, before anything is written.

Vocabularies are compared by content (tokenization/vocab_files.VocabId: the sha256 of vocab.json
and merges.txt; the shards' as dataset_info.json records it, a model dir's from the files beside
its checkpoints):
- resuming a model dir (checkpoints there, no --overwrite) accepts only its own vocabulary:
  training on shards of another would go on from weights whose rows mean other tokens, and
  the run would replace the model dir's vocab.json with the shards';
- `--init_from=M` accepts M's vocabulary or one that extends it (`data_prep.train_tokenizer
  --extend_from`): the model then grows, and `init_from_plan` is the growth's one plan (which
  old pieces spell each new token), handed to the weight copy (models/growth.py).
Anything else is refused in one line naming both flags and directories
(tokenization/vocab_growth.check). `--eval_data` must be of --train_data's vocabulary (the ids
the model learns), checked here with the rest of what its input pipeline would refuse only after
config.json and the vocabulary files are written (`check_eval_data`).
"""

from __future__ import annotations

from roberta_tf.data import dataset_info, vocab_info
from roberta_tf.models import checkpoint_files
from roberta_tf.models.model_dir import ModelDir
from roberta_tf.models.roberta.config import RobertaConfig
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.tokenization import vocab_growth
from roberta_tf.tokenization.vocab_growth import VocabGrowth, VocabGrowthError


def check_resume(cfg: TrainConfig, info: dict) -> None:
  """Refuses to resume --model_dir on --train_data of another vocabulary than its own.

  Raises:
    VocabGrowthError: one line naming both.
  """
  if cfg.model.overwrite or not checkpoint_files.steps_on_disk(cfg.model.model_dir):
    return
  shards, shards_dir = vocab_info.shards_vocabulary(cfg.train_data, info)
  ModelDir(cfg.model.model_dir).check_vocabulary(
      shards, ("--train_data", cfg.train_data), shards_dir,
      hint=f"resume it on shards of its vocabulary, or start a new model dir from it "
      f"(--init_from={cfg.model.model_dir} --model_dir=NEW) on shards of a vocabulary grown "
      "from it")


def init_from_plan(cfg: TrainConfig, info: dict, model_vocab_size: int) -> VocabGrowth | None:
  """How --init_from's model (of `model_vocab_size` ids) grows to --train_data's vocabulary:
  None for the same vocabulary, else the growth plan of one that extends it.

  Raises:
    VocabGrowthError: one line naming --train_data and --init_from: another vocabulary (of any
      size), or a larger one whose files are not there to check that it extends the model's.
  """
  shards, shards_dir = vocab_info.shards_vocabulary(cfg.train_data, info)
  plan = ModelDir(cfg.model.init_from, "--init_from").check_vocabulary(
      shards, ("--train_data", cfg.train_data), shards_dir, grow=True,
      hint="continue on shards of the model's vocabulary, or of one grown from it")
  if plan is None and shards.size != model_vocab_size:
    # --init_from records no vocabulary (a dir saved without vocab files): sizes alone.
    raise VocabGrowthError(
        f"--train_data={cfg.train_data!r} has {shards.size} token ids, --init_from="
        f"{cfg.model.init_from!r} {model_vocab_size} and no vocab.json: "
        + ("continue on shards of the model's vocabulary (or of one grown from it)"
           if shards.size < model_vocab_size else
           "growing the model needs its vocab.json, to check that the shards' extends it"))
  return plan


def check_eval_data(cfg: TrainConfig, info: dict, model_config: RobertaConfig) -> None:
  """Refuses --eval_data the run could not evaluate on, before anything is written in the model
  dir: shards of another vocabulary than --train_data's (`info`; by content, so one of the same
  size but other tokens too), or ones the eval pipeline would refuse after config.json is
  written (no validation split, sequences longer than --max_seq_len or `model_config`'s
  position table).

  Raises:
    VocabGrowthError: one line naming --eval_data and --train_data.
    dataset_info.DatasetInfoError: one line naming --eval_data's dataset_info.json.
  """
  if not cfg.eval_data:
    return
  eval_info = dataset_info.read(cfg.eval_data)
  train, train_dir = vocab_info.shards_vocabulary(cfg.train_data, info)
  evaluation, eval_dir = vocab_info.shards_vocabulary(cfg.eval_data, eval_info)
  vocab_growth.check(train, evaluation, model_side=("--train_data", cfg.train_data),
                     other_side=("--eval_data", cfg.eval_data), model_dir=train_dir,
                     other_dir=eval_dir, grow=False,
                     hint="evaluate on shards encoded with the vocabulary of --train_data "
                     "(data_prep.build_shards --vocab_dir=it)")
  dataset_info.check_compatible(eval_info,
                                max_positions=getattr(model_config, "max_positions", None),
                                max_seq_len=cfg.data.max_seq_len, where=cfg.eval_data)
  dataset_info.split_files(cfg.eval_data, eval_info, "validation")
