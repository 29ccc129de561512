"""The packing names (data_prep --packing, dataset_info "packing"): one owner, no TensorFlow.

Block packings (data_prep/packing.py) write `<s> ... </s>` blocks; the pair packings
(data_prep/pair_packing.py) write BERT's `<s> A </s> B </s>` with a next-sentence label and
exist only for the paper's input-format ablation (Table 2). The document packings
(SEPARATE_DOCUMENTS, ModernBERT's way) are block packings whose blocks hold several
`<s> document </s>` segments and record where each starts (`document_starts`): attention and
rotary positions restart at each (example_spec.py, docs/long_inputs.md).
"""

FULL_SENTENCES = "full_sentences"
DOC_SENTENCES = "doc_sentences"
SEPARATE_DOCUMENTS = "separate_documents"
SEGMENT_PAIR = "segment_pair"
SENTENCE_PAIR = "sentence_pair"
BLOCK_PACKINGS = (FULL_SENTENCES, DOC_SENTENCES, SEPARATE_DOCUMENTS)
DOCUMENT_PACKINGS = (SEPARATE_DOCUMENTS,)
PAIR_PACKINGS = (SEGMENT_PAIR, SENTENCE_PAIR)
PACKINGS = BLOCK_PACKINGS + PAIR_PACKINGS
