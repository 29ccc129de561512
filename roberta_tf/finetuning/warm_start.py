"""Where a fine-tuning run's weights start: random, a pretrained model dir, or a fine-tuned one.

`--init_from` may name either kind of directory:
- a pretrained model dir (config.json + a RobertaPretrainer checkpoint): its encoder, a new head
  (the MLM head is dropped);
- a fine-tuned model dir (config.json with a "task", as roberta_tf.finetune writes): the
  paper's chain for RTE, STS-B and MRPC, which start from the MNLI model. Its encoder is taken;
  its head is kept when it answers the same question -- the same task type, the same class
  names in the same order (and for SQuAD v2 the same answerability classifier) -- and replaced
  by a new one otherwise (MNLI's 3 classes -> RTE's 2, or classification -> STS-B's
  regression). A kept head continues from its trained weights (say, more MNLI epochs).
"""

from __future__ import annotations

from roberta_tf import models
from roberta_tf.finetuning import finetuned_dir, heads, problem_types
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.models import model_dir as model_dir_lib


def source_info(init_from: str) -> ProblemInfo | None:
  """The ProblemInfo of a fine-tuned init_from dir; None for a pretrained one (or none)."""
  if not init_from or not model_dir_lib.ModelDir(init_from).has_config():
    return None
  try:
    return finetuned_dir.read_problem_info(init_from)
  except models.ModelDirError:
    return None  # a pretrained model dir: config.json without a "task"


def keeps_head(source: ProblemInfo, target: ProblemInfo) -> bool:
  """Whether a fine-tuned source's head fits the target task unchanged."""
  return (source.task_type == target.task_type and source.labels == target.labels
          and source.answer_classifier == target.answer_classifier)


def describe(init_from: str, target: ProblemInfo) -> str:
  """One line for the log: where the weights start."""
  if not init_from:
    return "random init"
  source = source_info(init_from)
  head = ("no head: --pooling=" + target.pooling if target.task_type == problem_types.EMBEDDING
          else "new head")
  if source is None:
    return f"init from {init_from} (pretrained encoder, {head})"
  what = ("its head kept (same task and labels)" if keeps_head(source, target) else
          f"a new head (it was {source.task_type}"
          f"{' ' + '/'.join(source.labels) if source.labels else ''})")
  return f"init from fine-tuned {init_from}: its encoder, {what}"


def warm_started_model(model_config: models.RobertaConfig, info: ProblemInfo, dtype=None,
                       init_from: str = "") -> heads.FinetuneModel:
  """The fine-tuning model for `info`, its weights from init_from (see the module docstring).

  model_config may differ from init_from's only in dropout. Build it under the run's strategy
  scope, after seeding (a new head's init draws from the seed).
  """
  source = source_info(init_from)
  if source is None:
    return finetuned_dir.new_model(model_config, info, dtype=dtype, init_from=init_from)
  trained = finetuned_dir.new_model(model_config, source, dtype=dtype)
  finetuned_dir.restore(trained, model_dir_lib.latest_checkpoint(init_from))
  if keeps_head(source, info):
    return trained
  return finetuned_dir.model_on(trained.encoder, model_config, info, dtype=dtype)
