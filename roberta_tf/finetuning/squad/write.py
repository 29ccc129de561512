"""Decoded SQuAD answers written as the official evaluation scripts read them."""

from __future__ import annotations

import dataclasses

from roberta_tf.common import atomic_write, files
from roberta_tf.finetuning.squad.decode import Candidate


def write_predictions(model_dir: str, predictions: dict[str, str],
                      nbest: dict[str, list[Candidate]], null_scores: dict[str, float]) -> None:
  """predictions.json (id -> text, as the official scripts read) and nbest_predictions.json
  (id -> the candidates best first, each with the question's no-answer score), in model_dir;
  `decode.decode`'s Answers, unpacked."""
  docs = {"predictions.json": predictions,
          "nbest_predictions.json": {
              qid: [{**dataclasses.asdict(c), "null_score": null_scores[qid]} for c in cands]
              for qid, cands in nbest.items()}}
  for name, doc in docs.items():
    atomic_write.write_json(files.join(model_dir, name), doc, indent=1, sort_keys=False,
                            ensure_ascii=False)
