"""The one place that reaches below TensorFlow's and Keras' documented API.

Each entry exists because no public API gives the same thing; each is pinned by a canary in
tests/test_framework_internals.py that fails on the TensorFlow / Keras version that moves it,
so an upgrade breaks there, by name, instead of silently somewhere else. Nothing else in the
tree reads a `_`-prefixed attribute of TensorFlow or Keras.

- `checkpoint_object_graph`: a checkpoint's object graph (which object holds which variable).
  `tf.train.list_variables` gives only checkpoint keys, and a training checkpoint files a model
  variable under whichever path reached it first (often the optimizer's), so finding a model
  variable's shape by its place in the model needs the graph TensorFlow stores under the
  `_CHECKPOINTABLE_OBJECT_GRAPH` key as a `TrackableObjectGraph` proto (not exported as tf.*).
- `EMBEDDING_TABLE`: the name under which that graph files a `keras.layers.Embedding`'s table
  (the layer's `_embeddings` attribute; `embeddings` is only a property).
- `dataset_graph`: a tf.data pipeline's serialized graph (its ops), which the tests read to
  prove an input pipeline has no Python ops (TPU readiness); `Dataset._as_serialized_graph`.
"""

from __future__ import annotations

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

# The checkpoint key of the object graph (tensorflow/python/trackable/constants.py).
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
# A keras.layers.Embedding's table, as its checkpoint object graph names it.
EMBEDDING_TABLE = "_embeddings"


def checkpoint_object_graph(reader) -> trackable_object_graph_pb2.TrackableObjectGraph:
  """The object graph of the checkpoint `reader` reads (a tf.compat.v1.train.NewCheckpointReader
  / `tf.train.load_checkpoint` result): `.nodes[i].children` (local_name, node_id) and
  `.nodes[i].attributes` (name, checkpoint_key); node 0 is the root.

  Raises what the reader raises (tf.errors.OpError on an unreadable file), and
  google.protobuf's DecodeError (a ValueError) on a damaged graph.
  """
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor(OBJECT_GRAPH_KEY))
  return graph


def dataset_graph(dataset: tf.data.Dataset) -> tf.compat.v1.GraphDef:
  """The GraphDef of `dataset`'s pipeline: its nodes and, in `.library.function`, the bodies
  of its map/filter/interleave/... functions."""
  graph = tf.compat.v1.GraphDef()
  graph.ParseFromString(dataset._as_serialized_graph().numpy())  # pylint: disable=protected-access
  return graph
