"""Tags text with a fine-tuned token classifier's SavedModel (`finetune --export_dir` of a
--task=token_classification run): its entities, or a tagged file's metrics.

  python -m roberta_tf.tag --saved_model=DIR "Alice met Bob in Paris." "Another text"
  python -m roberta_tf.tag --saved_model=DIR --input_file=texts.txt --output_file=out.jsonl
  python -m roberta_tf.tag --saved_model=DIR --eval_file=dev.conll --output_file=pred.conll

Texts: each argument, or each line of --input_file (UTF-8; invalid bytes read as U+FFFD, as
the SavedModel reads them). The SavedModel splits a text into words at whitespace (Python's
str.split()), tags each word and groups the words into entities as transformers'
token-classification pipeline does with aggregation_strategy="first" (serving/
finetuned_export.py, finetuning/tagging/tag_tf.py); each entity is printed as its type, its
character offsets [start, end) (Python str indices), its text and score. --output_file writes
JSON lines {"text", "entities": [{"entity_group", "score", "word", "start", "end"}]} (the
pipeline's keys; "word" is text[start:end]), with "truncated": true for a text longer than
the SavedModel reads (its later words have no tags).

--eval_file (CoNLL or JSON lines, finetuning/tagging/tag_read.py): each sentence's words joined by
single spaces are tagged and scored against the gold tags with seqeval (tag_scores.py, the
scheme the model was trained with); the metrics print as JSON, --output_file gets the
predictions file (word gold predicted). Needs only tensorflow (and seqeval for --eval_file).
"""

from __future__ import annotations

import dataclasses
import json
import sys

from absl import app

from roberta_tf.common import cli, files, options
from roberta_tf.common.options import POSITIVE, option
from roberta_tf.serving import frozen_weights, saved_model_reader


@dataclasses.dataclass(frozen=True)
class TagSettings:
  """tag's flags."""
  saved_model: str = option(
      help="Directory written by `finetune --export_dir` for a --task=token_classification "
      "model (a path or a URL).", path=True)
  input_file: str | None = option(
      None, "Tag every line of this UTF-8 file (one text a line).", path=True)
  eval_file: str | None = option(
      None, "Score the model on this tagged file (CoNLL or JSON lines, as finetune's "
      "--eval_file): its sentences' words joined by single spaces.", path=True)
  label_field: str = option(
      "", "--eval_file JSON lines: the tags field (default: \"tags\" or \"ner_tags\"; integer "
      "tags are named by the model's labels).")
  output_file: str | None = option(
      None, "With texts: JSON lines of their entities; with --eval_file: the predictions file "
      "(word gold predicted).", path=True)
  batch_size: int = option(64, "Texts per call of the SavedModel.", check=POSITIVE)


FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
options.define_flags(TagSettings, FLAGS)


def _load(saved_model: str):
  """(the tag signature, tag_info as Python values) of a tagging SavedModel."""
  loaded = saved_model_reader.load(saved_model, ("tag", "tag_info"), "the export of a "
                                   "--task=token_classification model (finetune --export_dir)")
  info = {k: v.numpy() for k, v in loaded.signatures["tag_info"]().items()}
  info["labels"] = [label.decode("utf-8") for label in info["labels"]]
  info["tag_scheme"] = info["tag_scheme"].decode("utf-8")
  return loaded.signatures["tag"], info


def tag_texts(signature, texts: list[str], batch_size: int) -> list[dict]:
  """Per text: {"text", "entities": [HF pipeline dicts], "tags": word tags, "truncated"}."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  results = []
  for begin in range(0, len(texts), batch_size):
    batch = texts[begin:begin + batch_size]
    out = {k: v.numpy() for k, v in signature(text=tf.constant(batch)).items()}
    for i, text in enumerate(batch):
      entities = []
      for e in range(int(out["num_entities"][i])):
        start, end = int(out["entity_start"][i, e]), int(out["entity_end"][i, e])
        entities.append({"entity_group": out["entity_type"][i, e].decode("utf-8"),
                         "score": float(out["entity_score"][i, e]), "word": text[start:end],
                         "start": start, "end": end})
      tags = [t.decode("utf-8") for t in out["word_tags"][i, :int(out["num_words"][i])]]
      results.append({"text": text, "entities": entities, "tags": tags,
                      "truncated": bool(out["truncated"][i])})
  return results


def format_entities(result: dict) -> str:
  """A text and its entities, one a line."""
  lines = [result["text"]]
  if result["truncated"]:
    lines.append("  (truncated: longer than the SavedModel reads; its later words have no tags)")
  if not result["entities"]:
    lines.append("  (no entities)")
  for e in result["entities"]:
    lines.append(f"  {e['entity_group']} {e['start']}:{e['end']} {e['word']!r} {e['score']:.3f}")
  return "\n".join(lines)


def _read_texts(path: str) -> list[str]:
  """One text a line (a final newline ends the last line; "\\r\\n" endings read as "\\n")."""
  text = files.read_bytes(path).decode("utf-8", "replace")
  lines = text.split("\n")
  if lines and lines[-1] == "":
    lines.pop()
  return [line[:-1] if line.endswith("\r") else line for line in lines]


def evaluate(signature, info: dict, path: str, label_field: str, batch_size: int):
  """(metrics, sentences, predicted tags) of the model on a tagged file."""
  # pylint: disable=import-outside-toplevel
  from roberta_tf.finetuning.tagging import tag_read, tag_scores
  sentences = tag_read.read_tagged(path, info["labels"], label_field)
  results = tag_texts(signature, [" ".join(s.words) for s in sentences], batch_size)
  predicted = []
  for sentence, result in zip(sentences, results, strict=True):
    tags = result["tags"]
    if len(tags) != len(sentence.words) and not result["truncated"]:
      raise ValueError(f"{sentence.where}: {len(sentence.words)} words but the SavedModel "
                       f"tagged {len(tags)}")
    predicted.append(tags + [tag_scores.OUTSIDE] * (len(sentence.words) - len(tags)))
  cut = sum(r["truncated"] for r in results)
  if cut:
    print(f"note: {cut} sentences longer than the SavedModel reads; their later words count "
          "as O", file=sys.stderr, flush=True)
  metrics = tag_scores.score([s.tags for s in sentences], predicted, info["labels"],
                             info["tag_scheme"])
  return metrics, sentences, predicted


def _write_entities(path: str, results: list[dict]) -> None:
  from roberta_tf.common import atomic_write  # pylint: disable=import-outside-toplevel
  rows = [{"text": r["text"], "entities": r["entities"], **({"truncated": True}
                                                            if r["truncated"] else {})}
          for r in results]
  atomic_write.write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n"
                                        for row in rows))


def main(argv):
  frozen_weights.serve_only()  # this process only serves: oneDNN may keep packed weights
  args = argv[1:]
  s = options.from_flags(TagSettings, FLAGS)
  if sum(bool(x) for x in (args, s.input_file, s.eval_file)) != 1:
    raise app.UsageError("give texts as arguments, or --input_file, or --eval_file (one of them)")
  for flag, path in (("input_file", s.input_file), ("eval_file", s.eval_file)):
    if path and not files.isfile(path):
      raise ValueError(f"--{flag}={path}: no such file")
  signature, info = _load(s.saved_model)
  if s.eval_file:
    metrics, sentences, predicted = evaluate(signature, info, s.eval_file, s.label_field,
                                             s.batch_size)
    print(json.dumps(metrics, sort_keys=True), flush=True)
    if s.output_file:
      from roberta_tf.finetuning.tagging import tag_write  # pylint: disable=import-outside-toplevel
      tag_write.write_predictions(s.output_file, sentences, predicted)
    return 0
  texts = (_read_texts(s.input_file) if s.input_file else
           [a.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in args])
  results = tag_texts(signature, texts, s.batch_size)
  if s.output_file:
    _write_entities(s.output_file, results)
  else:
    print("\n".join(format_entities(r) for r in results), flush=True)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
