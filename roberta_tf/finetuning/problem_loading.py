"""Builds a run's fine-tuning problem (problems.py, tag_problem.py) from its settings: reads
its training and dev data and passes everything in, whole."""

from __future__ import annotations

from roberta_tf.finetuning import glue, problem_data, problem_types, problems
from roberta_tf.finetuning.embedding import embed_problem
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.squad import read as squad_read
from roberta_tf.finetuning.tagging import tag_problem


def load_problem(cfg, tokenizer) -> problems.Problem:
  """Reads and featurizes a run's training and dev data (cfg: a FinetuneConfig), batched as
  cfg.batching says."""
  if cfg.glue_task:
    return _glue_problem(cfg, tokenizer)
  if cfg.task == problem_types.TOKEN_CLASSIFICATION:
    return tag_problem.load(cfg, tokenizer)
  if cfg.task == problem_types.EMBEDDING:
    return embed_problem.load(cfg, tokenizer)
  if cfg.task in (problem_types.CLASSIFICATION, problem_types.REGRESSION):
    return _table_problem(cfg, tokenizer)
  if cfg.task == problem_types.MULTIPLE_CHOICE:
    return _choice_problem(cfg, tokenizer)
  return _squad_problem(cfg, tokenizer)


def _glue_problem(cfg, tokenizer) -> problems.SequenceProblem:
  """A GLUE preset's problem (glue.py), with its test sets (leaderboard file, examples,
  indices) for the predictions of the kept model."""
  preset = glue.get(cfg.glue_task)
  data = glue.read_data(preset, cfg.data_dir, cfg.glue_diagnostic, cfg.skip_bad_examples)
  info = ProblemInfo(preset.task_type, cfg.data.max_seq_len, labels=preset.labels,
                     text_fields=preset.text_fields)
  (_, dev), *extra = data.dev
  return problems.SequenceProblem(info, tokenizer, data.train, dev, cfg.train_file,
                                  cfg.eval_file, extra_dev=extra, batching=cfg.batching,
                                  glue_preset=preset, test_sets=data.test)


def _table_problem(cfg, tokenizer) -> problems.SequenceProblem:
  """Classification or regression read from --train_file/--eval_file tables."""
  regression = cfg.task == problem_types.REGRESSION
  train, dev = (problem_data.read_text_examples(path, cfg.text_fields, cfg.label_field,
                                                regression)
                for path in (cfg.train_file, cfg.eval_file))
  labels = () if regression else tuple(problem_data.label_names(train, cfg.labels))
  info = ProblemInfo(cfg.task, cfg.data.max_seq_len, labels=labels,
                     text_fields=tuple(cfg.text_fields))
  return problems.SequenceProblem(info, tokenizer, train, dev, cfg.train_file, cfg.eval_file,
                                  batching=cfg.batching)


def _choice_problem(cfg, tokenizer) -> problems.MultipleChoiceProblem:
  train = problem_data.read_choice_examples(cfg.train_file)
  dev = problem_data.read_choice_examples(cfg.eval_file)
  info = ProblemInfo(cfg.task, cfg.data.max_seq_len, num_choices=len(train[0].options))
  return problems.MultipleChoiceProblem(info, tokenizer, train, dev, batching=cfg.batching)


def _squad_problem(cfg, tokenizer) -> problems.ExtractiveQAProblem:
  skipped = []
  train, train_v2 = squad_read.read_squad(cfg.train_file, skip_bad=cfg.skip_bad_examples,
                                          on_skip=skipped.append)
  dev, dev_v2 = squad_read.read_squad(cfg.eval_file, skip_bad=cfg.skip_bad_examples,
                                      on_skip=skipped.append)
  if skipped:
    print(f"warning: --skip_bad_examples: skipped {len(skipped)} answers whose text is not at "
          f"their answer_start (and questions left without an answer); the first: {skipped[0]}",
          flush=True)
  info = ProblemInfo(cfg.task, cfg.data.max_seq_len, max_query_len=cfg.max_query_len,
                     doc_stride=cfg.doc_stride, max_answer_len=cfg.max_answer_len,
                     n_best_size=cfg.n_best_size, version_2=train_v2 or dev_v2,
                     null_score_threshold=cfg.null_score_threshold,
                     answer_classifier=(train_v2 or dev_v2) and cfg.squad_v2_null == "classifier")
  return problems.ExtractiveQAProblem(info, tokenizer, train, dev, batching=cfg.batching)
