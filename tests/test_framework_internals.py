"""Canaries of roberta_tf/common/framework_internals.py: each fails on the TensorFlow / Keras
version that moves what the module reaches below the documented API for."""

import keras
import numpy as np
import tensorflow as tf

from roberta_tf.common import framework_internals


def test_the_object_graph_files_an_embedding_table_under_its_name(tmp_path):
  """A checkpoint's object graph: the root's child, then the Embedding's table by
  EMBEDDING_TABLE, whose checkpoint key holds the table."""
  layer = keras.layers.Embedding(5, 3)
  layer.build((None,))
  layer.embeddings.assign(np.arange(15, dtype=np.float32).reshape(5, 3))
  prefix = tf.train.Checkpoint(table_layer=layer).write(str(tmp_path / "ckpt"))
  reader = tf.train.load_checkpoint(prefix)
  assert framework_internals.OBJECT_GRAPH_KEY in reader.get_variable_to_shape_map()
  graph = framework_internals.checkpoint_object_graph(reader)
  (layer_id,) = [c.node_id for c in graph.nodes[0].children if c.local_name == "table_layer"]
  (table_id,) = [c.node_id for c in graph.nodes[layer_id].children
                 if c.local_name == framework_internals.EMBEDDING_TABLE]
  (key,) = [a.checkpoint_key for a in graph.nodes[table_id].attributes
            if a.name == "VARIABLE_VALUE"]
  np.testing.assert_array_equal(reader.get_tensor(key), layer.embeddings.numpy())


def test_the_dataset_graph_holds_the_pipelines_ops_and_function_bodies():
  dataset = tf.data.Dataset.range(4).map(lambda x: tf.py_function(lambda v: v, [x], tf.int64))
  graph = framework_internals.dataset_graph(dataset)
  assert "RangeDataset" in {node.op for node in graph.node}
  assert "EagerPyFunc" in {n.op for f in graph.library.function for n in f.node_def}
