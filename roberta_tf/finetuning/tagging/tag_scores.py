"""Token classification's dev metrics, as the field computes them: `seqeval`.

Entity-level precision, recall and F1 (micro over entities) in seqeval's default mode
(conlleval's rules: an I- tag after O or another type opens an entity), and in its strict mode
with the tags' own scheme (an entity counts only when its tags follow the scheme exactly);
token accuracy over words; and F1 per entity type ("<type>_f1").

Tag schemes (`detect_scheme` reads them from the training tags):
  IOB2   every entity starts with B- (CoNLL-2003 as HF's datasets ship it)
  IOB1   B- only between two adjacent entities of one type (the original CoNLL-2003 files)
  IOBES  S- single-word entities, E- last words (also written BIOES / BILOU's U-/L- as BILOU)
  plain  tags without prefixes (parts of speech, UD's UPOS): each word is an entity of its
         tag's type; its F1 is then F1 over the words whose tag is not "O" (and per tag)
A prefixed tag is written "X-TYPE" (seqeval's and CoNLL's format).

TF-free; seqeval is imported when scoring, not when the names are asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

IOB1, IOB2, IOBES, BILOU, PLAIN = "IOB1", "IOB2", "IOBES", "BILOU", "plain"
SCHEMES = (IOB1, IOB2, IOBES, BILOU, PLAIN)
OUTSIDE = "O"
_PREFIXES = {IOB2: set("BI"), IOBES: set("BIES"), BILOU: set("BILU")}
SUMMARY = ("f1", "precision", "recall", "accuracy", "strict_f1", "strict_precision",
           "strict_recall")


def _split(tag: str) -> tuple[str, str]:
  """"B-PER" -> ("B", "PER"); "O" -> ("O", ""); "NN" -> ("", "NN")."""
  if tag == OUTSIDE:
    return OUTSIDE, ""
  if len(tag) > 2 and tag[1] == "-" and tag[0] in "BIESLU":
    return tag[0], tag[2:]
  return "", tag


def detect_scheme(sentences: Sequence[Sequence[str]]) -> str:
  """The scheme of tag sequences (see the module docstring): prefixes used, and for B/I
  whether an entity ever starts with I- (IOB1)."""
  prefixes = {_split(t)[0] for tags in sentences for t in tags} - {OUTSIDE}
  if not prefixes or "" in prefixes:
    return PLAIN
  if prefixes <= _PREFIXES[IOB2]:
    for tags in sentences:
      previous = OUTSIDE
      for tag in tags:
        prefix, kind = _split(tag)
        if prefix == "I" and _split(previous)[1] != kind:
          return IOB1
        previous = tag
    return IOB2
  return IOBES if prefixes <= _PREFIXES[IOBES] else BILOU if prefixes <= _PREFIXES[BILOU] else (
      PLAIN)


def entity_types(labels: Sequence[str], scheme: str) -> list[str]:
  """The entity types of a label set, in first-appearance order."""
  types = []
  for tag in labels:
    kind = tag if scheme == PLAIN else _split(tag)[1]
    if tag != OUTSIDE and kind and kind not in types:
      types.append(kind)
  return types


def metric_names(labels: Sequence[str], scheme: str) -> tuple[str, ...]:
  """What `score` returns for this label set: SUMMARY, then "<type>_f1" per type."""
  return SUMMARY + tuple(f"{kind}_f1" for kind in entity_types(labels, scheme))


def _as_entities(sentences: Sequence[Sequence[str]], scheme: str) -> list[list[str]]:
  """Plain tags as one-word entities (B-<tag>), so seqeval scores them; others unchanged."""
  if scheme != PLAIN:
    return [list(tags) for tags in sentences]
  return [[OUTSIDE if t == OUTSIDE else f"B-{t}" for t in tags] for tags in sentences]


def score(gold: Sequence[Sequence[str]], predicted: Sequence[Sequence[str]], labels: Sequence[str],
          scheme: str) -> dict[str, float]:
  """seqeval's metrics of predicted tag sequences against the gold ones (one list of tags per
  sentence, the same lengths): the names of `metric_names(labels, scheme)`; a type never
  predicted nor gold scores 0."""
  # pylint: disable=import-outside-toplevel
  from seqeval import metrics as seqeval_metrics
  from seqeval import scheme as seqeval_scheme
  y_true, y_pred = _as_entities(gold, scheme), _as_entities(predicted, scheme)
  strict_scheme = getattr(seqeval_scheme, IOB2 if scheme == PLAIN else scheme)
  out = {
      "f1": seqeval_metrics.f1_score(y_true, y_pred),
      "precision": seqeval_metrics.precision_score(y_true, y_pred),
      "recall": seqeval_metrics.recall_score(y_true, y_pred),
      "accuracy": seqeval_metrics.accuracy_score(y_true, y_pred),
      "strict_f1": seqeval_metrics.f1_score(y_true, y_pred, mode="strict", scheme=strict_scheme),
      "strict_precision": seqeval_metrics.precision_score(y_true, y_pred, mode="strict",
                                                          scheme=strict_scheme),
      "strict_recall": seqeval_metrics.recall_score(y_true, y_pred, mode="strict",
                                                    scheme=strict_scheme),
  }
  report = seqeval_metrics.classification_report(y_true, y_pred, output_dict=True,
                                                 zero_division=0)
  for kind in entity_types(labels, scheme):
    out[f"{kind}_f1"] = report.get(kind, {}).get("f1-score", 0.0)
  return {k: float(v) for k, v in out.items()}
