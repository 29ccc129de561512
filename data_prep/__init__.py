"""Corpus to shards: tokenizer training and TFRecord shard building (python -m data_prep.*).

Importing the package, or any of its modules, changes nothing in the process, as with
roberta_tf; the binaries quiet TensorFlow's start-up themselves (roberta_tf/common/cli.py's
`run`).
"""
