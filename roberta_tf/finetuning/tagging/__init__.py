"""Token classification: tag every word (NER, POS, slots).

Modules, in the order data flows through them:
  tag_read      CoNLL / JSON-lines tagged sentences, the label set
  tag_features  words -> pieces (HF's add_prefix_space rule) -> windows; tags read back
  tag_scores    seqeval's entity metrics; the tag scheme (IOB1/IOB2/IOBES/BILOU/plain)
  tag_problem   TokenClassificationProblem: windows, the per-piece loss, dev/test scores
  tag_write     predictions.conll (word, gold, predicted)
  tag_tf        the export's word split, windows and entity grouping in TF ops
  hf_tagger     RobertaForTokenClassification folders in and out (convert_checkpoint)
"""
