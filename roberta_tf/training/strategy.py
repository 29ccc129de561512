"""Choosing the tf.distribute strategy (--strategy)."""

import tensorflow as tf

from roberta_tf.common.option_groups import STRATEGIES  # declared TF-free for --help
from roberta_tf.training import cluster as cluster_lib


def split_cpu(num_devices: int) -> None:
  """Splits the host CPU into ``num_devices`` logical devices (testing MirroredStrategy on CPU).

  Must run before TensorFlow initializes its devices (before the first op).
  """
  if num_devices > 1:
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(num_devices)])


def make_strategy(name: str, tpu_address: str = "",
                  peer_timeout_s: float = cluster_lib.DEFAULT_PEER_TIMEOUT_S,
                  log=print) -> tf.distribute.Strategy:
  """Builds the strategy. ``auto``: mirrored when there is more than one GPU, else default.

  ``mirrored`` uses every GPU, or every logical CPU device when there is no GPU;
  ``multi_worker`` reads the cluster from the TF_CONFIG environment variable and first waits
  (at most `peer_timeout_s`, logging whom it waits for; SIGTERM and Ctrl-C stop it) until every
  peer answers: training/cluster.py says why.

  Raises:
    ValueError: an unknown name, or TF_CONFIG missing or malformed.
    cluster.ClusterError: peers unreached after `peer_timeout_s`, SIGTERM while waiting, or
      this worker's address in use.
  """
  if name not in STRATEGIES:
    raise ValueError(f"--strategy={name!r}: expected one of {', '.join(STRATEGIES)}")
  if name == "multi_worker":
    # Before anything that initializes TensorFlow's devices (list_logical_devices below):
    # collective ops can only be configured at startup.
    cluster_lib.wait_for_peers(cluster_lib.read_tf_config(), peer_timeout_s, log)
    return tf.distribute.MultiWorkerMirroredStrategy()
  gpus = tf.config.list_logical_devices("GPU")
  if name == "auto":
    name = "mirrored" if len(gpus) > 1 else "default"
  if name == "default":
    return tf.distribute.get_strategy()
  if name == "mirrored":
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices=devices)
  resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu_address)
  tf.config.experimental_connect_to_cluster(resolver)
  tf.tpu.experimental.initialize_tpu_system(resolver)
  return tf.distribute.TPUStrategy(resolver)


def cluster_of(strategy: tf.distribute.Strategy) -> cluster_lib.Cluster | None:
  """TF_CONFIG's cluster for a multi-worker strategy (None otherwise)."""
  if not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return None
  try:
    return cluster_lib.read_tf_config()
  except ValueError:
    return None


def task_id(strategy: tf.distribute.Strategy) -> int:
  """This worker's index in a multi-worker cluster (0 otherwise)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  return int(getattr(resolver, "task_id", 0) or 0)


def is_chief(strategy: tf.distribute.Strategy) -> bool:
  """True on the worker that writes checkpoints and summaries (always true off multi-worker)."""
  resolver = getattr(strategy, "cluster_resolver", None)
  if resolver is None or not isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy):
    return True
  task_type, task_id = resolver.task_type, resolver.task_id
  return task_type in (None, "chief") or (task_type == "worker" and task_id == 0)
