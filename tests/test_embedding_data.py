"""Text embeddings' data and scores: training rows, the BEIR-layout dev set, STS pairs (their
refusals with file:line), and the retrieval metrics as pytrec_eval computes them."""

import json
import os

import numpy as np
import pytest

from roberta_tf.finetuning.embedding import embed_data, embed_scores
from roberta_tf.finetuning.problem_data import ProblemDataError
from tests import finetune_fixtures as fx


def test_pairs_and_triples_load_by_text_fields(tmp_path):
  path = fx.write_table(str(tmp_path / "t.jsonl"), fx.embedding_rows(3, 0, negatives=True))
  rows = embed_data.read_pairs(path, ("query", "document", "negative"))
  assert len(rows) == 3 and all(len(r) == 3 for r in rows)
  assert rows[0][0].startswith("who keeps") and rows[0][1] != rows[0][2]


@pytest.mark.parametrize("rows, fields, message", [
    ([{"q": "a", "d": ""}], ("q", "d"), r"t.jsonl:1: field 'd' is empty"),
    ([{"q": "a", "d": "b"}, {"q": "a"}], ("q", "d"), r"t.jsonl:2: no field 'd'"),
    ([{"q": "a", "d": "b"}], ("q",), "--text_fields must name 2 or 3 columns"),
])
def test_bad_rows_are_refused_with_file_and_line(tmp_path, rows, fields, message):
  path = fx.write_table(str(tmp_path / "t.jsonl"), rows)
  with pytest.raises(ProblemDataError, match=message):
    embed_data.read_pairs(path, fields)


def test_beir_layout_loads_titles_and_relevant_queries(tmp_path):
  root = fx.write_beir(str(tmp_path / "dev"), 5, 0)
  with open(os.path.join(root, "corpus.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps({"_id": "t", "title": "Title", "text": "body"}) + "\n")
  with open(os.path.join(root, "queries.jsonl"), "a", encoding="utf-8") as f:
    f.write(json.dumps({"_id": "unjudged", "text": "nobody asks"}) + "\n")
  dev = embed_data.read_beir(root)
  assert dev.docs[-1] == "Title body" and len(dev.queries) == 5  # unjudged query dropped
  assert all(len(rel) == 1 for rel in dev.qrels.values())


def test_a_qrels_id_missing_from_the_corpus_names_its_line(tmp_path):
  root = fx.write_beir(str(tmp_path / "dev"), 3, 0)
  with open(os.path.join(root, "qrels", "dev.tsv"), "a", encoding="utf-8") as f:
    f.write("q1\tnot-a-doc\t1\n")
  with pytest.raises(ProblemDataError, match=r"qrels/dev.tsv:5: document 'not-a-doc' is not in "
                     "corpus.jsonl"):
    embed_data.read_beir(root)
  os.remove(os.path.join(root, "queries.jsonl"))
  with pytest.raises(ProblemDataError, match="queries.jsonl: no such file"):
    embed_data.read_beir(root)


def test_sts_pairs_need_numeric_scores(tmp_path):
  path = fx.write_table(str(tmp_path / "sts.tsv"), [
      {"sentence1": "a", "sentence2": "b", "score": "4.5"},
      {"sentence1": "c", "sentence2": "d", "score": "x"}])
  with pytest.raises(ProblemDataError, match=r"sts.tsv:3: score 'x' is not a number"):
    embed_data.read_sts(path)


def test_retrieval_scores_are_trec_evals():
  pytest.importorskip("pytrec_eval")
  qrels = {"q1": {"a": 1}, "q2": {"c": 1, "d": 1}}
  # q1: a at rank 2 -> nDCG 1/log2(3), MRR 1/2; q2: c first, d at 12th (outside 10).
  docs = ["a", "b", "c", "d"] + [f"x{i}" for i in range(10)]
  vectors = np.eye(len(docs), dtype=np.float32)
  queries = np.zeros((2, len(docs)), np.float32)
  queries[0, [1, 0]] = [0.9, 0.8]
  queries[1, 2], queries[1, 3] = 0.9, 0.05
  queries[1, 4:] = np.linspace(0.5, 0.1, 10)
  run = embed_scores.ranking(queries, vectors, ["q1", "q2"], docs)
  scores = embed_scores.retrieval_scores(qrels, run)
  ndcg_q2 = 1 / (1 + 1 / np.log2(3))  # one of two relevant found at rank 1 within 10
  assert scores["ndcg_at_10"] == pytest.approx((1 / np.log2(3) + ndcg_q2) / 2)
  assert scores["mrr_at_10"] == pytest.approx((0.5 + 1.0) / 2)
  assert scores["recall_at_100"] == pytest.approx(1.0)
