"""Corpus to shards: tokenizer training and TFRecord shard building (python -m data_prep.*).

Importing the package quiets TensorFlow's start-up (roberta_tf/common/quiet_start.py) before any
of its modules can import TensorFlow, as importing roberta_tf does.
"""

from roberta_tf.common import quiet_start

quiet_start.install()
