r"""Benchmark: our text-embedding fine-tuning against sentence-transformers', from one checkpoint.

    nice -n 10 python -m benchmarks.embedding_vs_st [--work_dir=runs/embedding_vs_st] \
        [--init_from=MODEL_DIR] [--config=tiny] [--max_seq_len=128] [--pretrain_steps=2000] \
        [--batch_size=32] [--learning_rate=1e-3] [--epochs=2] [--seeds=3] [--hard_negatives] \
        [--sides=st,ours] [--train_pairs=4000] [--dev_queries=300] [--test_queries=500]

1. The set (benchmarks/docs_retrieval.py): the Python docs' summary sentences as queries, the
   rest of each description or paragraph as the passage, split by document into training
   pairs and held-out dev and test sets in BEIR's layout (the corpus: every passage of the
   split's documents).
2. The checkpoint: --init_from, or a pretraining with the project's pipeline on the train
   split's documents only (data_prep.build_shards with the fixture's 8K vocab, roberta_tf.train
   --config for --pretrain_steps of batch 32 x --max_seq_len), then `convert_checkpoint --to_hf`.
3. Ours: `roberta_tf.finetune --task=embedding --seeds=N --batching=random` (one process; each
   epoch scored on dev, each seed's best epoch kept in its run directory). finetune has no test
   file for embeddings, so each seed's kept checkpoint (runs/<run>/ckpt-N) is loaded here
   (finetuned_dir.new_model + restore), the test texts featurized as embedding_problem.py does
   (featurize.build_inputs + to_dense) and embedded, and scored by embedding_scores.
   The peer: benchmarks/st_embedding.py once per seed (SentenceTransformerTrainer +
   MultipleNegativesRankingLoss, scale 20, mean pooling, normalized), its best dev epoch scored
   on test by the same embedding_scores. Both: the same pairs, batch, learning rate, epochs
   (so updates), seeds, max_seq_len, AdamW beta2 0.98 eps 1e-6 weight decay 0.1 on matrices,
   6% warmup then linear decay, dropout 0.1, no clipping.
Printed: per side the median and per-seed test nDCG@10 of each seed's best dev epoch, dev
nDCG@10, training pairs/s (pairs x epochs / the epochs' seconds, each epoch's dev scoring
included on both sides) and the side's seconds; the difference in points (acceptance: ours >=
sentence-transformers - 1.0). One JSON line per finished side is appended to
benchmarks/records/embedding_vs_st.jsonl. Every step is skipped when its output exists.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import os
import statistics
import time

from absl import app, flags

from benchmarks import (
  commands,
  docs_retrieval,
  hf_finetune,
  parity_records,
  st_embedding,
  starting_checkpoint,
)

FLAGS = flags.FLAGS
docs_retrieval.define_flags()
flags.DEFINE_string("work_dir", "runs/embedding_vs_st", "Set, checkpoint, runs, summary.json.")
starting_checkpoint.define_flags(max_seq_len=128, pretrain_steps=2000, max_seq_len_help=(
    "texts are truncated to it, specials included, on both sides."))
flags.DEFINE_integer("batch_size", 32, "Fine-tuning batch size: in-batch negatives (both sides).")
flags.DEFINE_float("learning_rate", 1e-3, "Fine-tuning peak learning rate (both sides; a tiny "
                   "model learns little at 3e-4 in 2 epochs here).")
flags.DEFINE_integer("epochs", 2, "Fine-tuning epochs (both sides; the best dev epoch counts).")
flags.DEFINE_integer("seeds", 3, "Seeds 0..N-1 per side.")
flags.DEFINE_bool("hard_negatives", False, "Train on (anchor, positive, negative) rows: a "
                  "passage of the same document as each row's hard negative (both sides).")
flags.DEFINE_list("sides", ["st", "ours"], "Sides to run, in order (the table shows those "
                  "with results).")
flags.DEFINE_integer("st_threads", 0, "torch threads (0: torch's default).")
flags.DEFINE_string("records", os.path.join(commands.REPO, "benchmarks", "records",
                                            "embedding_vs_st.jsonl"),
                    "Where a finished side's record is appended.")

KEY_FIELDS = ("side", "run_key")
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


def _recipe() -> hf_finetune.Recipe:
  return hf_finetune.Recipe(max_seq_len=FLAGS.max_seq_len, batch_size=FLAGS.batch_size,
                            learning_rate=FLAGS.learning_rate, epochs=FLAGS.epochs)


def run_st(work: str, hf_dir: str, data: str) -> dict:
  """sentence-transformers' runs, one per seed (each kept in work/st/seedN.json)."""
  from roberta_tf.finetuning import embedding_data  # pylint: disable=import-outside-toplevel
  train = embedding_data.read_pairs(os.path.join(data, "train.jsonl"), _text_fields())
  dev, test = (embedding_data.read_beir(os.path.join(data, s)) for s in ("dev", "test"))
  runs = []
  for seed in range(FLAGS.seeds):
    path = os.path.join(work, "st", f"seed{seed}.json")
    if not os.path.isfile(path):
      print(f"sentence-transformers seed {seed}", flush=True)
      start = time.perf_counter()
      result = st_embedding.finetune(hf_dir, train, dev, test, _recipe(), seed,
                                     os.path.join(work, "st", "trainer"),
                                     threads=FLAGS.st_threads)
      result["seconds"] = time.perf_counter() - start
      os.makedirs(os.path.dirname(path), exist_ok=True)
      with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
      print(f"  {result['seconds']:.0f} s, test ndcg@10 {result['best_test']['ndcg_at_10']:.4f}",
            flush=True)
    with open(path, encoding="utf-8") as f:
      result = json.load(f)
    epoch_seconds = sum(e["train_seconds"] + e["eval_seconds"] for e in result["epochs"])
    runs.append({"seed": seed, "best_epoch": result["best_epoch"], "dev": result["best"],
                 "test": result["best_test"], "epoch_seconds": epoch_seconds,
                 "train_only_seconds": result["train_seconds"], "steps": result["steps"],
                 "pairs_per_sec": len(train) * FLAGS.epochs / epoch_seconds,
                 "seconds": result["seconds"]})
  return {"runs": runs, "seconds": sum(r["seconds"] for r in runs)}


def embed(model, tokenizer, texts: list[str], max_seq_len: int, batch_size: int = 64):
  """float32 [N, H] vectors of the fine-tuned model, featurized as embedding_problem.py does
  (`<s> text </s>`, truncated to max_seq_len)."""
  import numpy as np  # pylint: disable=import-outside-toplevel

  from roberta_tf.finetuning import featurize  # pylint: disable=import-outside-toplevel
  ids = featurize.build_inputs(featurize.tokenize(tokenizer, texts), None, max_seq_len,
                               tokenizer.bos_id, tokenizer.eos_id)
  out = [model(featurize.to_dense(ids[i:i + batch_size], tokenizer.pad_id),
               training=False)["embeddings"].numpy() for i in range(0, len(texts), batch_size)]
  return np.concatenate(out).astype(np.float32)


def ours_test_scores(out: str, test_dir: str) -> dict[int, dict]:
  """{seed: test metrics} of each seed's kept checkpoint (runs/<run>/ckpt-N)."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf import models
  from roberta_tf.finetuning import embedding_data, embedding_scores, finetuned_dir, sweep
  with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
    results = json.load(f)
  model_config, info = models.read_config(out), finetuned_dir.read_problem_info(out)
  tokenizer = finetuned_dir.load_tokenizer(out)
  test = embedding_data.read_beir(test_dir)
  scores = {}
  for run in results["runs"]:
    run_dir = os.path.join(out, "runs", sweep.RunKey(run["batch_size"], run["learning_rate"],
                                                     run["seed"]).name)
    with open(os.path.join(run_dir, "eval_results.json"), encoding="utf-8") as f:
      prefix = os.path.join(run_dir, json.load(f)["checkpoint"])
    model = finetuned_dir.new_model(model_config, info, dtype="float32")
    finetuned_dir.restore(model, prefix)
    vectors = embed(model, tokenizer, test.docs + test.queries, info.max_seq_len)
    ranked = embedding_scores.ranking(vectors[len(test.docs):], vectors[:len(test.docs)],
                                      test.query_ids, test.doc_ids)
    scores[run["seed"]] = embedding_scores.retrieval_scores(test.qrels, ranked)
  return scores


def _finetune_ours(work: str, model_dir: str, data: str, out: str) -> None:
  print("ours", flush=True)
  start = time.perf_counter()
  commands.run_module(
      ["roberta_tf.finetune", "--task=embedding", f"--init_from={model_dir}",
       f"--train_file={os.path.join(data, 'train.jsonl')}",
       f"--eval_file={os.path.join(data, 'dev')}", f"--text_fields={','.join(_text_fields())}",
       f"--model_dir={out}", f"--max_seq_len={FLAGS.max_seq_len}",
       f"--batch_size={FLAGS.batch_size}", f"--learning_rate={FLAGS.learning_rate}",
       f"--epochs={FLAGS.epochs}", f"--seeds={FLAGS.seeds}", "--batching=random",
       "--pooling=mean", "--similarity_scale=20"],
      os.path.join(work, "ours.log"), timed=True)
  with open(os.path.join(work, "ours_seconds.json"), "w", encoding="utf-8") as f:
    json.dump({"seconds": time.perf_counter() - start}, f)


def run_ours(work: str, model_dir: str, data: str) -> dict:
  """roberta_tf.finetune over all seeds in one process (work/ours), each seed's kept model
  scored on test (work/ours_test.json); the side's summary."""
  out = os.path.join(work, "ours")
  if not os.path.isfile(os.path.join(out, "eval_results.json")):
    _finetune_ours(work, model_dir, data, out)
  test_path = os.path.join(work, "ours_test.json")
  if not os.path.isfile(test_path):
    with open(test_path, "w", encoding="utf-8") as f:
      json.dump(ours_test_scores(out, os.path.join(data, "test")), f, indent=1)
  with open(test_path, encoding="utf-8") as f:
    test = {int(seed): metrics for seed, metrics in json.load(f).items()}
  with open(os.path.join(out, "eval_results.json"), encoding="utf-8") as f:
    results = json.load(f)
  with open(os.path.join(work, "ours_seconds.json"), encoding="utf-8") as f:
    seconds = json.load(f)["seconds"]
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
  runs = side["runs"]
  median = lambda split, key: statistics.median(r[split][key] for r in runs)
  return {"test_ndcg_at_10": median("test", "ndcg_at_10"),
          "test_mrr_at_10": median("test", "mrr_at_10"),
          "test_recall_at_100": median("test", "recall_at_100"),
          "dev_ndcg_at_10": median("dev", "ndcg_at_10"),
          "test_ndcg_at_10_per_seed": [r["test"]["ndcg_at_10"] for r in runs],
          "dev_ndcg_at_10_per_seed": [r["dev"]["ndcg_at_10"] for r in runs],
          "pairs_per_sec": statistics.median(r["pairs_per_sec"] for r in runs),
          "seconds": side["seconds"]}


def _fingerprint(data: str, model_dir: str) -> str:
  """What a side's figures depend on besides the code: the set, the checkpoint, the recipe."""
  digest = hashlib.sha256()
  for name in ("train.jsonl", "dev/corpus.jsonl", "dev/queries.jsonl", "test/corpus.jsonl",
               "test/queries.jsonl"):
    with open(os.path.join(data, name), "rb") as f:
      digest.update(f.read())
  with open(os.path.join(model_dir, "checkpoint"), "rb") as f:  # names the checkpoint's step
    digest.update(f.read())
  digest.update(json.dumps([vars(_recipe()), FLAGS.seeds, FLAGS.config, FLAGS.pretrain_steps,
                            FLAGS.hard_negatives]).encode())
  return digest.hexdigest()[:16]


def record(side: str, result: dict, run_key: str) -> None:
  """Appends the side's record unless one with the same key is there."""
  if any(r.get("side") == side and r.get("run_key") == run_key
         for r in parity_records.read(FLAGS.records)):
    return
  parity_records.append(FLAGS.records, {
      "side": side, "run_key": run_key, "git": starting_checkpoint.git_head(),
      "host": starting_checkpoint.host(),
      "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
      "recipe": vars(_recipe()), "seeds": FLAGS.seeds, "config": FLAGS.config,
      "text_fields": _text_fields(),
      "checkpoint": FLAGS.init_from or f"pretrained {FLAGS.pretrain_steps} steps",
      **summarize(result), "runs": result["runs"]}, KEY_FIELDS)


def print_table(sides: dict[str, dict]) -> None:
  print(f"\nheld-out test nDCG@10, best dev epoch of {FLAGS.epochs}, seeds "
        f"0..{FLAGS.seeds - 1}:")
  print(f"  {'side':<22} {'test median':>11}  {'per seed':<26} {'dev':>7} {'pairs/s':>8} "
        f"{'seconds':>8}")
  for side, result in sides.items():
    s = summarize(result)
    print(f"  {NAMES[side]:<22} {s['test_ndcg_at_10']:>11.4f}  "
          f"{', '.join(f'{v:.4f}' for v in s['test_ndcg_at_10_per_seed']):<26} "
          f"{s['dev_ndcg_at_10']:>7.4f} {s['pairs_per_sec']:>8.1f} {s['seconds']:>8.0f}")
  if len(sides) == 2:
    difference = 100 * (summarize(sides["ours"])["test_ndcg_at_10"]
                        - summarize(sides["st"])["test_ndcg_at_10"])
    print(f"  difference {difference:+.2f} points (acceptance: >= -1.0)")


def main(argv):
  del argv
  # torch's OpenMP threads spin while they wait; beside other jobs that burns their time slices
  # (benchmarks/quality_vs_hf.py measured a step 1.7x as long as with passive waiting).
  os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
  work = os.path.abspath(FLAGS.work_dir)  # the binaries run with the repository as cwd
  os.makedirs(work, exist_ok=True)
  data = retrieval_set(work)
  model_dir = pretrain(work)
  hf_dir = starting_checkpoint.to_hf(work, model_dir)
  run_key = _fingerprint(data, model_dir)
  sides = {}
  for side in FLAGS.sides:
    run = {"st": lambda: run_st(work, hf_dir, data),
           "ours": lambda: run_ours(work, model_dir, data)}[side]
    sides[side] = run()
    record(side, sides[side], run_key)
  with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
    json.dump({side: summarize(result) for side, result in sides.items()}, f, indent=1)
  print_table(sides)


if __name__ == "__main__":
  app.run(main)
