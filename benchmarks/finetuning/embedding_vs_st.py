r"""Benchmark: our text-embedding fine-tuning against sentence-transformers', from one checkpoint.

    nice -n 10 python -m benchmarks.finetuning.embedding_vs_st [--work_dir=runs/embedding_vs_st] \
        [--init_from=MODEL_DIR] [--config=tiny] [--max_seq_len=128] [--pretrain_steps=2000] \
        [--batch_size=32] [--learning_rate=1e-3] [--epochs=2] [--seeds=3] [--hard_negatives] \
        [--sides=st,ours] [--train_pairs=4000] [--dev_queries=300] [--test_queries=500]

1. The set (benchmarks/tasks/docs_retrieval.py): the Python docs' summary sentences as queries, the
   rest of each description or paragraph as the passage, split by document into training
   pairs and held-out dev and test sets in BEIR's layout (the corpus: every passage of the
   split's documents).
2. The checkpoint: --init_from, or a pretraining with the project's pipeline on the train
   split's documents only (data_prep.build_shards with the fixture's 8K vocab, roberta_tf.train
   --config for --pretrain_steps of batch 32 x --max_seq_len), then `convert_checkpoint --to_hf`.
3. Ours: `roberta_tf.finetune --task=embedding --seeds=N --batching=random` (one process; each
   epoch scored on dev, each seed's best epoch kept in its run directory). finetune has no test
   file for embeddings, so each seed's kept checkpoint (runs/<run>/ckpt-N) is loaded here
   (finetuned_dir.new_model + restore), the test texts featurized as embed_problem.py does
   (featurize.build_inputs + to_dense) and embedded, and scored by embed_scores.
   The peer: benchmarks/finetuning/st_embedding.py once per seed (SentenceTransformerTrainer +
   MultipleNegativesRankingLoss, scale 20, mean pooling, normalized), its best dev epoch scored
   on test by the same embed_scores. Both: the same pairs, batch, learning rate, epochs
   (so updates), seeds, max_seq_len, AdamW beta2 0.98 eps 1e-6 weight decay 0.1 on matrices,
   6% warmup then linear decay, dropout 0.1, no clipping.
Printed: per side the median and per-seed test nDCG@10 of each seed's best dev epoch, dev
nDCG@10, training pairs/s (pairs x epochs / the epochs' seconds, each epoch's dev scoring
included on both sides) and the side's seconds; the difference in points (acceptance: ours >=
sentence-transformers - 1.0). One JSON line per finished side is appended to
benchmarks/records/embedding_vs_st.jsonl. Every step is skipped when its output exists.
"""

from __future__ import annotations

import gzip
import json
import os

from absl import app, flags

from benchmarks.common import starting_checkpoint
from benchmarks.finetuning import peer_comparison, st_embedding
from benchmarks.tasks import docs_retrieval

FLAGS = flags.FLAGS
docs_retrieval.define_flags()
peer_comparison.define_flags("embedding_vs_st", "st", batch_size=32, epochs=2, max_seq_len=128,
                             pretrain_steps=2000, notes={
    "max_seq_len": "texts are truncated to it, specials included, on both sides.",
    "batch_size": "; in-batch negatives",
    "learning_rate": "a tiny model learns little at 3e-4 in 2 epochs here"})
flags.DEFINE_bool("hard_negatives", False, "Train on (anchor, positive, negative) rows: a "
                  "passage of the same document as each row's hard negative (both sides).")

NAMES = {"ours": "roberta_tf", "st": "sentence-transformers"}


def _train_texts():
  """The corpus's train-split documents (dev and test text is never pretrained on)."""
  with gzip.open(FLAGS.corpus, "rt", encoding="utf-8") as f:
    for line in f:
      doc = json.loads(line)
      if docs_retrieval.split_of(doc["source"], FLAGS.dev_percent,
                                 FLAGS.test_percent) == "train":
        yield doc["text"]


def pretrain(work: str) -> str:
  """The starting checkpoint: --init_from, or one pretrained here on the train documents."""
  return starting_checkpoint.from_flags(work, _train_texts())


def retrieval_set(work: str) -> str:
  """work/data: train.jsonl, dev/ and test/ (BEIR), counts.json."""
  data = os.path.join(work, "data")
  if not os.path.isfile(os.path.join(data, "counts.json")):
    docs_retrieval.build_from_flags(data)
  with open(os.path.join(data, "counts.json"), encoding="utf-8") as f:
    counts = json.load(f)
  print(f"set: {counts['train']['pairs']} training pairs ({counts['train']['documents']} "
        f"documents); dev {counts['dev']['queries']} queries over {counts['dev']['corpus']} "
        f"passages ({counts['dev']['documents']} documents); test {counts['test']['queries']} "
        f"queries over {counts['test']['corpus']} passages ({counts['test']['documents']} "
        "documents)", flush=True)
  return data


def _text_fields() -> list[str]:
  return ["anchor", "positive"] + (["negative"] if FLAGS.hard_negatives else [])


def run_st(work: str, hf_dir: str, data: str) -> dict:
  """sentence-transformers' runs, one per seed (each kept in work/st/seedN.json)."""
  from roberta_tf.finetuning.embedding import embed_data  # pylint: disable=import-outside-toplevel
  train = embed_data.read_pairs(os.path.join(data, "train.jsonl"), _text_fields())
  dev, test = (embed_data.read_beir(os.path.join(data, s)) for s in ("dev", "test"))
  results = peer_comparison.peer_runs(
      work, "st", lambda seed: st_embedding.finetune(
          hf_dir, train, dev, test, peer_comparison.recipe(), seed,
          os.path.join(work, "st", "trainer"), threads=FLAGS.st_threads),
      lambda result: f"test ndcg@10 {result['best_test']['ndcg_at_10']:.4f}")
  runs = []
  for seed, result in enumerate(results):
    epoch_seconds = sum(e["train_seconds"] + e["eval_seconds"] for e in result["epochs"])
    runs.append({"seed": seed, "best_epoch": result["best_epoch"], "dev": result["best"],
                 "test": result["best_test"], "epoch_seconds": epoch_seconds,
                 "train_only_seconds": result["train_seconds"], "steps": result["steps"],
                 "pairs_per_sec": len(train) * FLAGS.epochs / epoch_seconds,
                 "seconds": result["seconds"]})
  return {"runs": runs, "seconds": sum(r["seconds"] for r in runs)}


def embed(model, tokenizer, texts: list[str], max_seq_len: int, batch_size: int = 64):
  """float32 [N, H] vectors of the fine-tuned model, featurized as embed_problem.py does
  (`<s> text </s>`, truncated to max_seq_len)."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from roberta_tf.finetuning import featurize  # pylint: disable=import-outside-toplevel
  ids = featurize.build_inputs(featurize.tokenize(tokenizer, texts), None, max_seq_len,
                               tokenizer.template)
  out = [model(featurize.to_dense(ids[i:i + batch_size], tokenizer.pad_id),
               training=False)["embeddings"].numpy() for i in range(0, len(texts), batch_size)]
  return np.concatenate(out).astype(np.float32)


def ours_test_scores(out: str, test_dir: str) -> dict[int, dict]:
  """{seed: test metrics} of each seed's kept checkpoint (runs/<run>/ckpt-N)."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf import models
  from roberta_tf.finetuning import finetuned_dir, sweep
  from roberta_tf.finetuning.embedding import embed_data, embed_scores
  with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
    results = json.load(f)
  model_config, info = models.read_config(out), finetuned_dir.read_problem_info(out)
  tokenizer = finetuned_dir.load_tokenizer(out)
  test = embed_data.read_beir(test_dir)
  scores = {}
  for run in results["runs"]:
    run_dir = os.path.join(out, "runs", sweep.RunKey(run["batch_size"], run["learning_rate"],
                                                     run["seed"]).name)
    with open(os.path.join(run_dir, "eval_results.json"), encoding="utf-8") as f:
      prefix = os.path.join(run_dir, json.load(f)["checkpoint"])
    model = finetuned_dir.new_model(model_config, info, dtype="float32")
    finetuned_dir.restore(model, prefix)
    vectors = embed(model, tokenizer, test.docs + test.queries, info.max_seq_len)
    ranked = embed_scores.ranking(vectors[len(test.docs):], vectors[:len(test.docs)],
                                  test.query_ids, test.doc_ids)
    scores[run["seed"]] = embed_scores.retrieval_scores(test.qrels, ranked)
  return scores


def run_ours(work: str, model_dir: str, data: str) -> dict:
  """roberta_tf.finetune over all seeds in one process (work/ours), each seed's kept model
  scored on test (work/ours_test.json); the side's summary."""
  results, seconds = peer_comparison.ours(work, model_dir, [
      "--task=embedding", f"--train_file={os.path.join(data, 'train.jsonl')}",
      f"--eval_file={os.path.join(data, 'dev')}", f"--text_fields={','.join(_text_fields())}",
      "--batching=random", "--pooling=mean", "--similarity_scale=20"])
  test_path = os.path.join(work, "ours_test.json")
  if not os.path.isfile(test_path):
    with open(test_path, "w", encoding="utf-8") as f:
      json.dump(ours_test_scores(os.path.join(work, "ours"), os.path.join(data, "test")), f,
                indent=1)
  with open(test_path, encoding="utf-8") as f:
    test = {int(seed): metrics for seed, metrics in json.load(f).items()}
  with open(os.path.join(data, "counts.json"), encoding="utf-8") as f:
    pairs = json.load(f)["train"]["pairs"]
  runs = []
  for run in sorted(results["runs"], key=lambda r: r["seed"]):
    epoch_seconds = sum(e["seconds"] for e in run["history"])
    runs.append({"seed": run["seed"], "best_epoch": run["epoch"], "dev": run["metrics"],
                 "test": test[run["seed"]], "epoch_seconds": epoch_seconds,
                 "steps": run["history"][-1]["step"],
                 "train_loss": [e["train_loss"] for e in run["history"]],
                 "pairs_per_sec": pairs * len(run["history"]) / epoch_seconds})
  return {"runs": runs, "seconds": seconds}


def summarize(side: dict) -> dict:
  """The side's medians over seeds: test and dev nDCG@10 (and test MRR@10, Recall@100),
  training pairs/s."""
  return peer_comparison.summary(side, "ndcg_at_10", "pairs_per_sec",
                                 also_test=("mrr_at_10", "recall_at_100"))


def main(argv):
  del argv
  work = peer_comparison.start()
  data = retrieval_set(work)
  model_dir = pretrain(work)
  hf_dir = starting_checkpoint.to_hf(work, model_dir)
  run_key = peer_comparison.fingerprint(
      [os.path.join(data, name) for name in ("train.jsonl", "dev/corpus.jsonl",
                                             "dev/queries.jsonl", "test/corpus.jsonl",
                                             "test/queries.jsonl")],
      model_dir, FLAGS.hard_negatives)
  sides = peer_comparison.run_sides(work, {"st": lambda: run_st(work, hf_dir, data),
                                           "ours": lambda: run_ours(work, model_dir, data)},
                                    run_key, summarize, text_fields=_text_fields())
  peer_comparison.print_table(
      "held-out test nDCG@10", sides, summarize, NAMES, "ndcg_at_10",
      ("test median", "dev", "pairs/s", "pairs_per_sec"))


if __name__ == "__main__":
  app.run(main)
