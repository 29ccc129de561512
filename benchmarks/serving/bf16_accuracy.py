r"""Benchmark: what a bfloat16 export costs in accuracy, against its float32 twin (issue 53).

    nice -n 10 python -m benchmarks.serving.bf16_accuracy [--work_dir=runs/bf16_accuracy] \
        [--corpus=../shared/corpora/python-docs.jsonl.gz] [--init_from=MODEL_DIR] \
        [--tagger_dir=runs/tagging_vs_hf/ours] [--embedder_dir=runs/embedding_vs_st/ours]

Every figure comes from a SavedModel written by the project's binaries (`roberta_tf.export
--precision`, `roberta_tf.finetune --export_only --export_precision`) and reloaded here with
tf.saved_model.load, fed raw strings through its task signature (benchmarks/serving/bf16_scores.py):
1. fill_mask: the pretrained checkpoint (--init_from, or the one starting_checkpoint pretrains
   on the train documents with embedding_vs_st's recipe: runs/embedding_vs_st/pretrained is
   that checkpoint). Held-out text: the prose sentences (docs_sections.prose_paragraphs,
   docs_retrieval.sentences) of the documents docs_retrieval.split_of puts outside "train";
   each gives at most one masked whole word (held_out_ranks.pick_example's rule). Reported:
   top-1 agreement (bfloat16's first guess == float32's), each one's top-1 accuracy, and --
   since a small model's first guess is often just a frequent word, which agrees trivially --
   the agreement on the words float32 gets right and the overlap of the two top-5 lists; and
   how far bfloat16's `encode` vectors are from float32's (relative error, cosine).
2. classify: docs_sections (which of 5 docs sections a paragraph is from; --train_per_class /
   --dev_per_class) fine-tuned from the checkpoint; dev accuracy of each export.
3. answer: cloze QA in SQuAD v1.1 format (benchmarks/tasks/cloze_qa.py: train questions from the
   train documents, dev from the held-out ones) fine-tuned from the checkpoint; dev EM / F1
   (squad_eval) of each export.
4. tag / embed, when --tagger_dir / --embedder_dir hold fine-tuned models (tagging_vs_hf's and
   embedding_vs_st's): seqeval entity F1 on --tagging_file, nDCG@10 on --retrieval_dir.
--sides picks the parts (fill_mask,classify,answer,existing); e.g. a second checkpoint's
fill_mask alone: --sides=fill_mask --init_from=runs/tagging_vs_hf/pretrained --max_seq_len=64
--dev_percent=15 --test_percent=15 (roles_tagging's split) --work_dir=runs/bf16_accuracy/tagging.
Targets (issue 53): fill-mask agreement >= 95%; each fine-tuned metric within 0.5 point.
Accuracy is not timing: run it with `nice -n 10`, no CPU lock. Every step is cached in
work_dir (a rerun redoes only what is missing); a JSON line per run is appended to --records.
"""

from __future__ import annotations

import datetime
import json
import os
import random
import subprocess

import numpy as np
from absl import app, flags

from benchmarks.common import commands, parity_records, starting_checkpoint
from benchmarks.serving import bf16_scores
from benchmarks.tasks import cloze_qa, docs_retrieval, roles_tagging
from roberta_tf.finetuning import docs_sections

FLAGS = flags.FLAGS
cloze_qa.define_flags()
# embedding_vs_st's split: its checkpoint never saw the dev and test documents.
commands.define_corpus_flags(dev_percent=10, test_percent=15)
flags.DEFINE_integer("seed", 0, "Seed of the sets' sampling and of fine-tuning.")
flags.DEFINE_string("work_dir", "runs/bf16_accuracy", "Sets, models, exports, summary.json.")
# embedding_vs_st's recipe, on the train documents.
starting_checkpoint.define_flags(max_seq_len=128, pretrain_steps=2000)
flags.DEFINE_integer("fill_mask_sentences", 2500, "Held-out sentences tried (one masked word "
                     "each, when the rule finds one).")
flags.DEFINE_integer("train_per_class", 150, "docs_sections training paragraphs per section.")
flags.DEFINE_integer("dev_per_class", 100, "docs_sections dev paragraphs per section.")
flags.DEFINE_integer("classify_epochs", 5, "docs_sections fine-tuning epochs.")
flags.DEFINE_integer("qa_epochs", 6, "Cloze QA fine-tuning epochs.")
flags.DEFINE_float("learning_rate", 1e-3, "Fine-tuning peak learning rate (a tiny model).")
flags.DEFINE_integer("batch_size", 16, "Fine-tuning batch size.")
flags.DEFINE_string("tagger_dir", "runs/tagging_vs_hf/ours", "A token_classification model "
                    "dir (skipped when absent).")
flags.DEFINE_string("tagging_file", "runs/tagging_vs_hf/data/test.conll", "Its CoNLL set.")
flags.DEFINE_string("embedder_dir", "runs/embedding_vs_st/ours", "An embedding model dir "
                    "(skipped when absent).")
flags.DEFINE_string("retrieval_dir", "runs/embedding_vs_st/data/test", "Its BEIR split.")
flags.DEFINE_list("sides", ["fill_mask", "classify", "answer", "existing"], "What to "
                  "measure (existing: the --tagger_dir and --embedder_dir models).")
flags.DEFINE_string("records", os.path.join(commands.REPO, "benchmarks", "records",
                                            "bf16_accuracy.jsonl"), "Where a run is appended.")

PRECISIONS = ("float32", "bfloat16")
AGREEMENT_TARGET = 95.0  # percent of masked words
POINTS_TARGET = 0.5  # metric points


def _path(path: str) -> str:
  return path if os.path.isabs(path) else os.path.join(commands.REPO, path)


def pretrained(work: str) -> str:
  """The starting checkpoint: --init_from, or one pretrained here on the train documents."""
  texts = (text for source, text in roles_tagging.documents(FLAGS.corpus)
           if docs_retrieval.split_of(source, FLAGS.dev_percent, FLAGS.test_percent) == "train")
  return starting_checkpoint.from_flags(work, texts)


def code_state() -> str:
  """HEAD, plus the package files that differ from it ("+" joined): the code an export ran."""
  changed = subprocess.run(["git", "status", "--porcelain", "--", "roberta_tf"],
                           cwd=commands.REPO, capture_output=True, text=True, check=False).stdout
  files = sorted(line[3:] for line in changed.splitlines() if line[:2].strip())
  return "+".join([starting_checkpoint.git_head(), *files])


def exports(work: str, name: str, model_dir: str, finetuned: bool) -> dict[str, str]:
  """{precision: SavedModel dir} of model_dir in float32 and bfloat16 (work/exports/name_P,
  with the code state that wrote it in name_P.code: exports are cached, delete to redo)."""
  out = {}
  for precision in PRECISIONS:
    path = os.path.join(work, "exports", f"{name}_{precision}")
    if not os.path.isfile(os.path.join(path, "saved_model.pb")):
      args = (["roberta_tf.finetune", "--export_only", f"--export_precision={precision}"]
              if finetuned else ["roberta_tf.export", f"--precision={precision}"])
      state = code_state()
      commands.run_module([*args, f"--model_dir={model_dir}", f"--export_dir={path}",
                           "--overwrite"], os.path.join(work, f"export_{name}_{precision}.log"),
                          timed=True)
      with open(f"{path}.code", "w", encoding="utf-8") as f:
        f.write(state)
    out[precision] = path
  return out


def export_code(work: str) -> dict[str, str]:
  """{export name: the code state that wrote it} of every export in work/exports."""
  folder = os.path.join(work, "exports")
  out = {}
  for name in sorted(os.listdir(folder)):
    if name.endswith(".code"):
      with open(os.path.join(folder, name), encoding="utf-8") as f:
        out[name[:-5]] = f.read()
  return out


def held_out_sentences(count: int) -> list[str]:
  """`count` prose sentences (6..60 words) of the held-out documents, sampled (seeded)."""
  found = set()
  for source, text in roles_tagging.documents(FLAGS.corpus):
    if docs_retrieval.split_of(source, FLAGS.dev_percent, FLAGS.test_percent) != "train":
      for paragraph in docs_sections.prose_paragraphs(text):
        found.update(s for s in docs_retrieval.sentences(paragraph)
                     if 6 <= len(s.split()) <= 60)
  pool = sorted(found)
  return random.Random(FLAGS.seed).sample(pool, min(count, len(pool)))


def fill_mask_side(work: str, model_dir: str) -> dict:
  """Top-1 agreement and accuracy of the pretrained model's two exports on held-out words;
  also the agreement on the words float32 gets right (where the model used the context, not
  only word frequency) and the mean overlap of the two top-5 lists."""
  paths = exports(work, "pretrained", model_dir, finetuned=False)
  sentences = held_out_sentences(FLAGS.fill_mask_sentences)
  words = bf16_scores.masked_words(paths["float32"], model_dir, sentences, FLAGS.max_seq_len)
  top = {p: bf16_scores.fill_mask_top(paths[p], words) for p in PRECISIONS}
  targets = np.array([w.target for w in words])
  first = {p: top[p][:, 0] for p in PRECISIONS}
  right = first["float32"] == targets
  overlap = [len(set(a) & set(b)) / len(a) for a, b in zip(top["float32"], top["bfloat16"])]
  return {"task": "fill_mask", "metric": "top-1 accuracy", "examples": len(words),
          **{p: 100.0 * float((first[p] == targets).mean()) for p in PRECISIONS},
          "agreement": 100.0 * float((first["float32"] == first["bfloat16"]).mean()),
          "agreement_where_float32_right": 100.0 * float(
              (first["bfloat16"][right] == targets[right]).mean()),
          "float32_right": int(right.sum()), "top5_overlap": 100.0 * float(np.mean(overlap)),
          "distinct_float32_guesses": len(set(first["float32"].tolist())),
          "encode": bf16_scores.encode_error(paths["float32"], paths["bfloat16"],
                                             sentences[:500])}


def finetune(work: str, name: str, model_dir: str, args: list[str]) -> str:
  """work/name: roberta_tf.finetune from model_dir with `args` (cached); returns the dir."""
  out = os.path.join(work, name)
  if not os.path.isfile(os.path.join(out, "eval_results.json")):
    commands.run_module(
        ["roberta_tf.finetune", f"--init_from={model_dir}", f"--model_dir={out}",
         f"--max_seq_len={FLAGS.max_seq_len}", f"--batch_size={FLAGS.batch_size}",
         f"--learning_rate={FLAGS.learning_rate}", f"--seed={FLAGS.seed}", "--seeds=1", *args],
        os.path.join(work, f"{name}.log"), timed=True)
  return out


def _compare(task: str, metric: str, scores: dict[str, dict], key: str) -> dict:
  """A table row: each export's `key` and the share of examples they predict alike."""
  same = [a == b for a, b in zip(scores["float32"]["predictions"],
                                 scores["bfloat16"]["predictions"])]
  return {"task": task, "metric": metric, "examples": len(same),
          **{p: scores[p][key] for p in PRECISIONS},
          "agreement": 100.0 * sum(same) / len(same)}


def classify_side(work: str, model_dir: str) -> dict:
  """docs_sections fine-tuned, exported twice, dev accuracy through `classify`."""
  data = os.path.join(work, "sections")
  if not os.path.isfile(os.path.join(data, "dev.jsonl")):
    train, dev = docs_sections.build(FLAGS.corpus, FLAGS.train_per_class, FLAGS.dev_per_class,
                                     seed=FLAGS.seed)
    os.makedirs(data, exist_ok=True)
    docs_sections.write_jsonl(os.path.join(data, "train.jsonl"), train)
    docs_sections.write_jsonl(os.path.join(data, "dev.jsonl"), dev)
  out = finetune(work, "sections_model", model_dir,
                 ["--task=classification", f"--train_file={data}/train.jsonl",
                  f"--eval_file={data}/dev.jsonl", "--text_fields=text", "--label_field=label",
                  f"--epochs={FLAGS.classify_epochs}"])
  with open(os.path.join(data, "dev.jsonl"), encoding="utf-8") as f:
    rows = [json.loads(line) for line in f]
  paths = exports(work, "sections", out, finetuned=True)
  scores = {p: bf16_scores.classify(paths[p], rows) for p in PRECISIONS}
  return _compare("classify (docs_sections)", "dev accuracy", scores, "accuracy")


def qa_sides(work: str, model_dir: str) -> list[dict]:
  """Cloze QA fine-tuned, exported twice, dev EM and F1 through `answer`."""
  data = os.path.join(work, "cloze_qa")
  if not os.path.isfile(os.path.join(data, "counts.json")):
    cloze_qa.build_from_flags(data)
  out = finetune(work, "qa_model", model_dir,
                 ["--task=extractive_qa", f"--train_file={data}/train.json",
                  f"--eval_file={data}/dev.json", "--max_query_len=48", "--doc_stride=48",
                  f"--epochs={FLAGS.qa_epochs}"])
  paths = exports(work, "qa", out, finetuned=True)
  scores = {p: bf16_scores.answer(paths[p], os.path.join(data, "dev.json")) for p in PRECISIONS}
  return [_compare("answer (cloze QA)", "dev F1", scores, "f1"),
          _compare("answer (cloze QA)", "dev EM", scores, "exact_match")]


def existing_sides(work: str) -> list[dict]:
  """The tagging and embedding models other benchmarks fine-tuned, when they are there."""
  rows = []
  tagger, embedder = _path(FLAGS.tagger_dir), _path(FLAGS.embedder_dir)
  if FLAGS.tagger_dir and os.path.isfile(os.path.join(tagger, "eval_results.json")):
    sentences = roles_tagging.read_conll(_path(FLAGS.tagging_file))
    paths = exports(work, "tagger", tagger, finetuned=True)
    scores = {p: bf16_scores.tag(paths[p], sentences) for p in PRECISIONS}
    rows.append(_compare("tag (roles_tagging)", "test entity F1", scores, "f1"))
  if FLAGS.embedder_dir and os.path.isfile(os.path.join(embedder, "eval_results.json")):
    paths = exports(work, "embedder", embedder, finetuned=True)
    scores = {p: bf16_scores.embed(paths[p], _path(FLAGS.retrieval_dir)) for p in PRECISIONS}
    rows.append(_compare("embed (docs_retrieval)", "test nDCG@10", scores, "ndcg_at_10"))
  return rows


def cpu() -> str:
  """The CPU's name, family/model, cores and bfloat16 matmul flags (AMX or AVX512-BF16 run
  bf16 natively; without either, bf16 matmuls are emulated)."""
  with open("/proc/cpuinfo", encoding="utf-8") as f:
    fields = dict(line.split(":", 1) for line in f.read().split("\n\n")[0].splitlines()
                  if ":" in line)
  fields = {k.strip(): v.strip() for k, v in fields.items()}
  have = [name for name in ("amx_bf16", "avx512_bf16") if name in fields.get("flags", "").split()]
  return (f"{starting_checkpoint.host()}, family {fields.get('cpu family', '?')} model "
          f"{fields.get('model', '?')}, {' '.join(have) or 'no bf16 matmul flags'}"
          f"{'' if 'amx_bf16' in have else ', no AMX'}")


def holds(row: dict) -> bool:
  if row["task"] == "fill_mask":
    return row["agreement"] >= AGREEMENT_TARGET
  return abs(row["bfloat16"] - row["float32"]) <= POINTS_TARGET


def print_table(rows: list[dict], header: bool = True) -> None:
  """Each row: its task, metric, example count, the two exports' figures (percent), their
  difference in points, the share of examples both predict alike, and whether it holds."""
  if header:
    print(f"\nbf16 exports vs float32 (same checkpoint; each through its SavedModel) on "
          f"{cpu()}:")
    print(f"  {'task':<26} {'metric':<16} {'n':>5} {'float32':>8} {'bfloat16':>8} "
          f"{'diff':>6} {'agree %':>7}  target")
  for row in rows:
    target = (f"agreement >= {AGREEMENT_TARGET:g}%" if row["task"] == "fill_mask"
              else f"|diff| <= {POINTS_TARGET:g}")
    print(f"  {row['task']:<26} {row['metric']:<16} {row['examples']:>5} "
          f"{row['float32']:>8.2f} {row['bfloat16']:>8.2f} "
          f"{row['bfloat16'] - row['float32']:>+6.2f} {row['agreement']:>7.2f}  "
          f"{target}: {'holds' if holds(row) else 'MISSED'}")
    if row["task"] == "fill_mask":
      print(f"  {'':<26} of the {row['float32_right']} words float32 gets right, bfloat16 keeps "
            f"{row['agreement_where_float32_right']:.2f}%; top-5 overlap "
            f"{row['top5_overlap']:.2f}%; float32's first guesses: "
            f"{row['distinct_float32_guesses']} distinct ids")
      e = row["encode"]
      print(f"  {'':<26} encode: |bf16 - fp32| / |fp32| per token vector mean "
            f"{e['relative_error_mean']:.4f}, p99 {e['relative_error_p99']:.4f}; cosine "
            f"{e['cosine_mean']:.5f} ({e['tokens']} tokens)")


def main(argv):
  del argv
  work = os.path.abspath(FLAGS.work_dir)  # the binaries run with the repository as cwd
  os.makedirs(work, exist_ok=True)
  model_dir = pretrained(work)
  rows = []
  sides = {"fill_mask": lambda: [fill_mask_side(work, model_dir)],
           "classify": lambda: [classify_side(work, model_dir)],
           "answer": lambda: qa_sides(work, model_dir), "existing": lambda: existing_sides(work)}
  for name in FLAGS.sides:
    new = sides[name]()
    print_table(new, header=False)  # as it finishes: the whole run takes minutes
    rows += new
  with open(os.path.join(work, "summary.json"), "w", encoding="utf-8") as f:
    json.dump(rows, f, indent=1)
  print_table(rows)
  parity_records.append(FLAGS.records, {
      "git": starting_checkpoint.git_head(), "host": cpu(),
      "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
      "checkpoint": FLAGS.init_from or f"pretrained {FLAGS.pretrain_steps} steps",
      "export_code": export_code(work),
      "rows": [{**r, "holds": holds(r)} for r in rows]}, ("git", "host", "rows"))


if __name__ == "__main__":
  app.run(main)
