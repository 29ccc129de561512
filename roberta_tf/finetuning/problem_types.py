"""The problem types (the values of --task) and batching names (TF-free, so that
`roberta_tf.finetune --help` starts instantly)."""

CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTIPLE_CHOICE = "multiple_choice"
EXTRACTIVE_QA = "extractive_qa"
TOKEN_CLASSIFICATION = "token_classification"
EMBEDDING = "embedding"
PROBLEM_TYPES = (CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE, EXTRACTIVE_QA, TOKEN_CLASSIFICATION,
                 EMBEDDING)

# How a text's token vectors become its embedding (--pooling): the mean over its tokens (<s> and
# </s> included, pads not: sentence-transformers' mean pooling), or the <s> vector.
MEAN, CLS = "mean", "cls"
POOLINGS = (MEAN, CLS)

# How training batches are formed and padded (bucketing.py).
LENGTH_BUCKETS = "length_buckets"
RANDOM = "random"
MAX_SEQ_LEN = "max_seq_len"
BATCHINGS = (LENGTH_BUCKETS, RANDOM, MAX_SEQ_LEN)
