r"""Where our train step's time goes: a per-op-type table from the TF profiler.

    python -m benchmarks.training.step_profile [--preset=medium] [--precision=mixed_bfloat16] \
        [--batch_size=32] [--max_seq_len=128] [--steps=4] [--warmup_steps=3] [--threads=0] \
        [--inter_op_threads=1] [--top_ops=25] [--json_out=FILE]

The step is throughput_vs_hf.py's "ours" (`PretrainingTask` + `build_train_step` over batches of the
real pipeline from synthetic shards, V 8000). After --warmup_steps untimed steps,
`tf.profiler.experimental` traces --steps steps; the trace's xplane.pb (its host plane's TF op
events on the executor's threads, one per op execution) is summed by op type into groups
(matmul, cast, layer norm, softmax, ...; GROUPS) with each group's share of the summed op time.
By default ops run one at a time (--inter_op_threads=1, each op on all --threads intra-op
threads), so the op times add up to the step's; with TF's default two ops share the cores and
each one's time includes the other's. The wall step time (untraced) is printed beside them;
it is also measured with --inter_op_threads. Prints the CPU (/proc/cpuinfo) first.
"""

from __future__ import annotations

import collections
import glob
import json
import os
import re
import tempfile
import time
import types

import numpy as np
from absl import app, flags

from benchmarks.common import commands

# (group, regex on the op type), first match wins; op types not matched are "other".
GROUPS = (
    ("XLA clusters", r"^XLA cluster$"),
    ("matmul", r"MatMul|Einsum|Conv"),
    ("cast", r"^(_Mkl)?Cast$"),
    ("layer norm", r"LayerNorm|Moments|SquaredDifference|Rsqrt|Mean$"),
    ("softmax / xent", r"Softmax|CrossEntropy|LogSoftmax"),
    ("gelu / erf", r"Gelu|Erf"),
    ("dropout / rng", r"Random|Stateless|Dropout|Rng"),
    ("adamw update", r"Apply|ResourceApply|AssignSub|AssignAdd|Assign|Sqrt|RealDiv|Pow"),
    ("gather / scatter", r"Gather|Scatter|Unsorted|Segment|Slice|Unique|Cumsum"),
    ("transpose / reshape", r"Transpose|Reshape|Pack|Unpack|Concat|Split|Tile|Broadcast"),
    ("reduce (norms, sums)", r"^(_Mkl)?(Sum|Max|Min|ArgMax|L2Loss|Prod|All|Any)$"),
    ("elementwise add/mul/sub", r"Add|Mul|Sub|Neg|Square|Maximum|Minimum|Select|Where|"
                                r"BiasAdd|Fill|ZerosLike|OnesLike|Sign|Abs|Exp|Log|Equal|"
                                r"Greater|Less|Logical|IsFinite"),
    ("variable reads / identity", r"ReadVariable|Identity|NoOp|Const|Shape|Size|Rank"),
)
# An XLA cluster's run (models/fused_ops.py's under mixed precision); the executor's and XLA's
# other events ("ExecutorState::ProcessAsync::Start", "ThunkExecutor::Execute") wrap it.
XLA_RUN = "CpuExecutable::ExecuteAsyncOnStream"
# Function-call wrappers: their events contain their ops' events, so they are not summed.
WRAPPERS = re.compile(r"PartitionedCall|While|^If$|StatelessIf|Case|__inference|"
                      r"FunctionRun|ExecutorState|Process$|_Send|_Recv")


FLAGS = flags.FLAGS


def define_flags() -> None:
  """This script's flags (defined when it runs: op_profile imports it)."""
  flags.DEFINE_string("preset", "medium", "Model preset.")
  flags.DEFINE_string("precision", "mixed_bfloat16", "Training precision.")
  commands.define_batch_flags(batch_size=32, max_seq_len=128)
  flags.DEFINE_integer("steps", 4, "Traced steps.")
  flags.DEFINE_integer("warmup_steps", 3, "Untimed steps first.")
  flags.DEFINE_integer("threads", 0, "Intra-op threads (0: all CPUs).")
  flags.DEFINE_integer("inter_op_threads", 1, "Inter-op threads (1: ops one at a time, so op "
                       "times add up to the step; 0: TF's default, throughput_vs_hf's, where two "
                       "ops share the cores).")
  flags.DEFINE_float("dropout", 0.0, "Dropout of the model.")
  flags.DEFINE_integer("top_ops", 25, "Op types listed one by one.")
  flags.DEFINE_string("json_out", "", "Append the table as one JSON line.")


def build_step(args, work: str):
  """throughput_vs_hf's "ours" step over its dumped batches: () -> loss tensor."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from benchmarks.training import throughput_vs_hf  # pylint: disable=import-outside-toplevel
  from benchmarks.training.throughput import write_synthetic_shards  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)  # before TF initializes
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_op_threads)
  vs_args = types.SimpleNamespace(presets=args.preset, batch_size=args.batch_size,
                                  max_seq_len=args.max_seq_len, dropout=args.dropout,
                                  clip_norm=None, num_batches=16)  # throughput_vs_hf's defaults
  data = os.path.join(work, "shards")
  os.makedirs(data)
  write_synthetic_shards(data, num_sequences=1024, seq_len=args.max_seq_len)
  batches = os.path.join(work, "batches.npz")
  throughput_vs_hf.dump_batches(vs_args, data, batches)
  # The objects of throughput_vs_hf's "ours" worker (built here: that worker's spec is its own).
  from roberta_tf.data import dataset_info  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.task import PretrainingTask, model_config_for  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining.train_config import TrainConfig  # pylint: disable=import-outside-toplevel
  from roberta_tf.training.task import build_train_step  # pylint: disable=import-outside-toplevel
  cfg = TrainConfig.from_dict(
      throughput_vs_hf.train_config_fields(vs_args, data, args.preset, args.precision))
  strategy = tf.distribute.get_strategy()
  model_config = model_config_for(cfg, dataset_info.read(cfg.train_data))
  train_step = build_train_step(PretrainingTask(cfg, strategy, model_config), strategy)
  with np.load(batches) as z:
    arrays = {k: z[k] for k in z.files}
  iterator = iter(tf.data.Dataset.from_tensor_slices(arrays).repeat().prefetch(2))
  return lambda: train_step(lambda: next(iterator))[0]["loss"]


def op_events(logdir: str):
  """(op type, duration ps) of every TF op event on the host plane of the trace in logdir."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  space = xplane_pb2.XSpace()
  (path,) = glob.glob(os.path.join(logdir, "plugins/profile/*/*.xplane.pb"))
  with open(path, "rb") as f:  # local-only: the profiler's own output file
    space.ParseFromString(f.read())
  for plane in space.planes:
    if not plane.name.startswith("/host:CPU"):
      continue
    for line in plane.lines:
      if not line.name.startswith("tf_Compute"):  # the executor's (inter-op) threads
        continue
      for event in line.events:
        name = plane.event_metadata[event.metadata_id].name
        if name == XLA_RUN:
          yield "XLA cluster", event.duration_ps
          continue
        if ":" not in name or "::" in name:  # TF op events are "op_name:OpType"
          continue
        op_type = name.rsplit(":", 1)[1]
        if op_type and not WRAPPERS.search(op_type):
          yield op_type, event.duration_ps


def group_of(op_type: str) -> str:
  return next((g for g, pattern in GROUPS if re.search(pattern, op_type)), "other")


def table(events, steps: int, step_s: float, top: int) -> dict:
  """{"groups": {group: ms/step}, "ops": {type: ms/step}, "total_ms", "step_ms"}."""
  by_type = collections.Counter()
  for op_type, ps in events:
    by_type[op_type] += ps / 1e9 / steps
  by_group = collections.Counter()
  for op_type, ms in by_type.items():
    by_group[group_of(op_type)] += ms
  return {"groups": dict(by_group.most_common()), "ops": dict(by_type.most_common(top)),
          "total_ms": sum(by_type.values()), "step_ms": step_s * 1e3}


def print_table(result: dict) -> None:
  total = result["total_ms"]
  print(f"wall step {result['step_ms']:.0f} ms; summed op time {total:.0f} ms/step")
  print(f"{'group':28} {'ms/step':>9} {'share':>7}")
  for group, ms in result["groups"].items():
    print(f"{group:28} {ms:9.1f} {ms / total:7.1%}")
  print(f"\n{'op type':28} {'ms/step':>9} {'share':>7}  group")
  for op_type, ms in result["ops"].items():
    print(f"{op_type:28} {ms:9.1f} {ms / total:7.1%}  {group_of(op_type)}")


def main(argv):
  del argv
  args = commands.flag_args(FLAGS)
  args.threads = args.threads or os.cpu_count()
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  from benchmarks.training.throughput import cpu_model  # pylint: disable=import-outside-toplevel
  work = tempfile.mkdtemp(prefix="train_step_profile_")
  step = build_step(args, work)
  for _ in range(args.warmup_steps):
    float(step())
  start = time.perf_counter()
  for _ in range(args.steps):
    float(step())
  step_s = (time.perf_counter() - start) / args.steps  # untraced
  logdir = os.path.join(work, "trace")
  tf.profiler.experimental.start(logdir)
  for _ in range(args.steps):
    float(step())
  tf.profiler.experimental.stop()
  result = table(op_events(logdir), args.steps, step_s, args.top_ops)
  cpu = cpu_model()
  print(f"CPU: {cpu}\n{args.preset} {args.precision} B={args.batch_size} S={args.max_seq_len} "
        f"V=8000, {args.threads} intra-op threads, TF {tf.__version__}")
  print_table(result)
  if args.json_out:
    with open(args.json_out, "a", encoding="utf-8") as f:  # local-only: a record line
      f.write(json.dumps({"cpu": cpu, **vars(args), **result}) + "\n")
  return 0


if __name__ == "__main__":
  define_flags()
  app.run(main)
