"""What a TPU needs, checked on this CPU (issue 43): static shapes from the input pipeline
through the train step, no Python in any input pipeline, and XLA-compiled steps that train like
the default one.

- Static shapes: the pretraining datasets the loop trains and evaluates on (the default run's,
  and ones with every option that adds ops: pair shards, whole-word static masking, skip mode,
  input pipeline 1 of 2) have a fully defined element_spec, and their batches have exactly that
  shape. The train step is traced once, and the objective inside it (under --jit_compile:
  inside the XLA cluster) sees fully defined shapes.
- Fine-tuning's training datasets (roberta_tf/finetuning/bucketing.py) are *not* fully defined
  in their element_spec, by design: the batch dimension is None because an epoch keeps its last,
  partial micro-batch (every example is trained on once per epoch), and the length dimension is
  None under `length_buckets` and `random` because each batch is padded to its own rung of the
  length ladder (`max_seq_len`: the length is static); multiple choice's option dimension is
  None too (dense rows of a ragged tensor), though every batch has the problem's option count.
  What is checked instead is what an XLA/TPU step needs from them: every batch is one of a
  bounded set of static shapes (at most one per rung plus the partial batch; 2 under
  `max_seq_len`), so the step compiles once per shape, never per batch.
- No Python: the serialized graph of each of those datasets (ops and the function library, so
  map/flat_map/interleave bodies too) holds no PyFunc / PyFuncStateless / EagerPyFunc op (what
  tf.py_function, tf.numpy_function and from_generator insert: they call back into the Python
  process that built the graph, so a remote TPU worker or the tf.data service cannot run them,
  and they serialize on the GIL). Negative controls prove the walk finds them, also nested
  inside a flat_map.
- XLA: the real pretraining path (PretrainingTask, build_train_step, inputs.build_datasets) with
  dropout 0 trains 10 steps to the same loss curve with `jit_compile=True` (each replica's forward
  + backward in XLA) and (marked slow: one more XLA compile) with the whole replica step
  XLA-compiled (also the all-reduce, clipping, the NaN guard and AdamW's apply: what
  TPUStrategy compiles) as with the default step, within 1e-3 relative at every step
  (measured: within 2.2e-7). With dropout > 0 they do not agree step for
  step: XLA lowers the stateless RNG that Keras' dropout uses to other bits than TF's CPU kernel
  for the same seed (tf.random.stateless_uniform([4], seed=[1, 2]) differs eagerly and under
  jit_compile), so the masks differ; the runs agree in distribution only.
"""

import collections
import functools
import os
from typing import NamedTuple

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep.shard_builder import build_shards
from data_prep.shard_settings import ShardSettings
from roberta_tf.common import framework_internals
from roberta_tf.data import dataset_info, pipeline
from roberta_tf.data.masking import MaskingConfig
from roberta_tf.data.vocab_info import VocabInfo
from roberta_tf.finetuning import bucketing, finetuned_dir, problem_data
from roberta_tf.finetuning import problems as problems_lib
from roberta_tf.finetuning.problem_info import ProblemInfo
from roberta_tf.finetuning.squad import read as squad_read
from roberta_tf.pretraining import inputs
from roberta_tf.pretraining.task import PretrainingTask, model_config_for
from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training.task import build_train_step
from roberta_tf.training.train_step import TrainStep
from tests import finetune_fixtures as fx
from tests.conftest import HF_TINY, TESTDATA
from tests.harness import tiny_config

S = 64
B = 8
# The ops tf.py_function (EagerPyFunc), tf.numpy_function (PyFunc, or PyFuncStateless with
# stateful=False) and Dataset.from_generator (PyFunc) put into a graph.
PYTHON_OPS = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})


# ---- helpers ----------------------------------------------------------------------------------
def dataset_ops(ds: tf.data.Dataset) -> collections.Counter:
  """Every op type in the dataset's serialized graph: its nodes and every function of its
  library (the bodies of map, flat_map, interleave, filter, scan, ... and what they call)."""
  graph = framework_internals.dataset_graph(ds)
  ops = collections.Counter(node.op for node in graph.node)
  for function in graph.library.function:
    ops.update(node.op for node in function.node_def)
  return ops


def python_ops(ds: tf.data.Dataset) -> dict:
  return {op: n for op, n in dataset_ops(ds).items() if op in PYTHON_OPS}


def undefined(spec: dict) -> dict:
  """{key: shape} of every component of a batch's element_spec whose shape is not fully
  defined."""
  return {k: s.shape for k, s in spec.items() if not s.shape.is_fully_defined()}


def shapes(structure) -> list:
  return [tuple(x.shape) for x in tf.nest.flatten(structure)]


# ---- data -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def shards(tmp_path_factory):
  """The small corpus as S=64 shards, 2 train shards + 1 validation shard, for the default
  packing (FULL-SENTENCES) and a pair packing (the NSP ablation's extra fields)."""
  root = tmp_path_factory.mktemp("tpu_shards")
  out = {}
  for packing in ("full_sentences", "segment_pair"):
    out[packing] = str(root / packing)
    build_shards(ShardSettings(
        input=os.path.join(TESTDATA, "python_docs_small.jsonl.gz"), vocab_dir=HF_TINY,
        output_dir=out[packing], max_seq_len=S, packing=packing, num_shards=2,
        validation_fraction=0.1, seed=0, encoder="hf", overwrite=True, progress=False))
  return out


@pytest.fixture(scope="module")
def pretraining_datasets(shards) -> dict:
  """{name: dataset}: the train and eval datasets as inputs.build_datasets builds them. The
  default run's pair, and one pair in which every option that adds ops is on at once (building
  a dataset costs ~1 CPU s): pair shards (the NSP fields), whole-word static masking, skip mode
  with its counter, and input pipeline 1 of 2 (training: the filter keeping its replica's
  batches of the stream; eval: the one validation file split by record)."""
  vocab = VocabInfo.from_dir(HF_TINY)  # its word starts allow whole-word masking
  model_config = tiny_config(max_positions=S + 2)
  common = dict(per_replica_batch_size=B, max_seq_len=S, vocab=vocab, seed=1)
  data = shards["full_sentences"]
  out = {"full_sentences/train": pipeline.build_dataset(
             data, "train", training=True, shuffle_buffer=16, model_config=model_config,
             **common),
         "full_sentences/eval": pipeline.build_dataset(
             data, "validation", training=False, model_config=model_config, **common)}
  data = shards["segment_pair"]
  common.update(model_config=model_config.replace(type_vocab_size=2, next_sentence_head=True),
                input_context=tf.distribute.InputContext(
                    num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2))
  out["segment_pair/train/all_options"] = pipeline.build_dataset(
      data, "train", training=True, shuffle_buffer=16,
      masking=MaskingConfig(whole_word=True, static=True), skip_corrupt_shards=True,
      skipped_shards=tf.Variable(0, dtype=tf.int64), **common)
  out["segment_pair/eval/pipeline_1_of_2"] = pipeline.build_dataset(
      data, "validation", training=False, **common)
  return out


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
  """batching -> {name: fine-tuning Problem}: single texts and pairs over several ladder rungs,
  a RACE-style multiple-choice problem and SQuAD v2, with the fixture vocabulary's tokenizer,
  each built whole with that batching."""
  root = tmp_path_factory.mktemp("tpu_finetuning")
  tokenizer = finetuned_dir.load_tokenizer(HF_TINY)
  rows = fx.sentiment_rows(40, seed=0)
  for i, row in enumerate(rows):  # lengths across several rungs of the ladder (16, 32, 48, 64)
    row["sentence"] += " and so on" * (i % 9)
  examples = problem_data.read_text_examples(fx.write_table(str(root / "t.tsv"), rows),
                                             ("sentence", "sentence2"), "label")
  choices = problem_data.read_choice_examples(fx.write_race(str(root / "race.jsonl"), 3, seed=2))
  qa, _ = squad_read.read_squad(fx.write_squad(str(root / "squad.json"), 4, seed=5,
                                               version_2=True))

  @functools.cache
  def build(batching):
    out = {}
    for name, fields in (("single", ("sentence",)), ("pair", ("sentence", "sentence2"))):
      info = ProblemInfo("classification", S, labels=("neg", "pos"), text_fields=fields)
      out[name] = problems_lib.SequenceProblem(info, tokenizer, examples, examples[:8],
                                               batching=batching)
    out["multiple_choice"] = problems_lib.MultipleChoiceProblem(
        ProblemInfo("multiple_choice", S, num_choices=4), tokenizer, choices, choices,
        batching=batching)
    out["extractive_qa"] = problems_lib.ExtractiveQAProblem(
        ProblemInfo("extractive_qa", S, max_query_len=16, doc_stride=16, version_2=True,
                    answer_classifier=True), tokenizer, qa, qa, batching=batching)
    return out
  return build


def finetuning_datasets(problems, batching: str) -> dict:
  """{name: dataset}: each problem's training epoch (micro-batches of 4 of updates of 8, as
  FineTuningEvents.batches asks with --grad_accum_steps=2) and its dev set, under `batching`."""
  out = {}
  for name, problem in problems(batching).items():
    out[f"{name}/train"] = problem.train_dataset(4, seed=3, update_size=8)
    out[f"{name}/eval"] = problem.eval_dataset(4)
  return out


@pytest.mark.parametrize("batching", bucketing.BATCHINGS)
def test_finetuning_batches_take_a_bounded_set_of_static_shapes(problems, batching):
  """See the module docstring: None batch (the last partial micro-batch) and, with buckets,
  None length in the spec; a bounded set of concrete shapes per epoch."""
  ladder = bucketing.length_ladder(S)
  for name, ds in finetuning_datasets(problems, batching).items():
    spec = ds.element_spec
    inputs_spec = spec[0] if name.endswith("/train") else spec
    ids = inputs_spec["input_ids"].shape
    choices = name.startswith("multiple_choice")
    assert ids.rank == (3 if choices else 2), name
    if batching == bucketing.MAX_SEQ_LEN:
      assert ids[-1] == S, name
    if name.endswith("/train"):  # labels: [batch] only
      assert all(s.shape.rank == 1 for s in tf.nest.flatten(spec[1])), name
    seen = collections.Counter()
    batches = list(ds)
    for k, batch in enumerate(batches):
      got = shapes(batch)
      assert all(d is not None for shape in got for d in shape), name
      rows = {shape[0] for shape in got}
      assert len(rows) == 1, (name, got)  # inputs and labels agree on the batch size
      if k < len(batches) - 1 and name.endswith("/train"):
        assert rows == {4}, (name, k, got)  # only an epoch's last micro-batch is partial
      if choices:  # None in the spec too (ragged rows made dense), 4 options in every batch
        assert got[0][1] == 4, (name, got)
      if name.endswith("/train"):  # dev batches: padded to their longest (traced once)
        length = batch[0]["input_ids"].shape[-1]
        want = [S] if batching == bucketing.MAX_SEQ_LEN else ladder
        assert length in want, (name, length)
      seen[tuple(got)] += 1
    if name.endswith("/train"):
      bound = 2 if batching == bucketing.MAX_SEQ_LEN else len(ladder) + 1
      assert len(seen) <= bound, (name, sorted(seen))


# ---- (b) no Python in the input pipeline ------------------------------------------------------
def test_no_python_op_in_any_pretraining_pipeline(pretraining_datasets):
  for name, ds in pretraining_datasets.items():
    ops = dataset_ops(ds)
    assert "ParseExampleV2" in ops and "TFRecordDataset" in ops, name  # the walk saw the reader
    assert not python_ops(ds), (name, python_ops(ds))


@pytest.mark.parametrize("batching", bucketing.BATCHINGS)
def test_no_python_op_in_any_finetuning_pipeline(problems, batching):
  for name, ds in finetuning_datasets(problems, batching).items():
    assert "PaddedBatchDatasetV2" in dataset_ops(ds), name
    assert not python_ops(ds), (name, python_ops(ds))


def test_the_python_op_check_finds_python_anywhere_in_a_pipeline():
  """Negative controls: the check fails on each way of putting Python into tf.data."""
  plus_one = lambda x: x + 1
  numbers = tf.data.Dataset.range(3)
  controls = {
      "py_function map": numbers.map(lambda x: tf.py_function(plus_one, [x], tf.int64)),
      "numpy_function map": numbers.map(lambda x: tf.numpy_function(plus_one, [x], tf.int64)),
      "stateless numpy_function": numbers.map(
          lambda x: tf.numpy_function(plus_one, [x], tf.int64, stateful=False)),
      "from_generator": tf.data.Dataset.from_generator(
          lambda: iter([1, 2]), output_signature=tf.TensorSpec([], tf.int32)),
      # Nested: a map inside flat_map's body, then ordinary stages after it.
      "nested in flat_map": numbers.flat_map(lambda x: tf.data.Dataset.from_tensors(x).map(
          lambda y: tf.py_function(plus_one, [y], tf.int64))).batch(2).prefetch(1),
  }
  for name, ds in controls.items():
    assert python_ops(ds), name
  assert set(python_ops(controls["py_function map"])) == {"EagerPyFunc"}
  assert set(python_ops(controls["stateless numpy_function"])) == {"PyFuncStateless"}
  assert not python_ops(numbers.map(plus_one))  # a plain map traces to graph ops


# ---- (a) + (c): the train step, default and XLA -----------------------------------------------
STEPS = 10


class StepRun(NamedTuple):
  losses: list          # the loss of each of the 10 steps
  traced: list          # {key: shape} of the batch the objective saw, once per trace
  train_step: TrainStep


@pytest.fixture(scope="module")
def step_run(shards, tmp_path_factory):
  """run(arm) -> StepRun (cached): 10 steps on the same model (same seed), the same batches and
  dropout 0, through the pretraining run's own objects: PretrainingTask, build_train_step and
  inputs.build_datasets on the default strategy. Arms: "default", "jit_compile"
  (TrainConfig.jit_compile, i.e. train --jit_compile), "whole_step_xla" (the whole replica step,
  TrainStep._fused_step, XLA-compiled, as TPUStrategy compiles strategy.run's function). The
  model is the tests' tiny one cut to 1 layer of H64 (a --config JSON): XLA's CPU compile
  dominates this test's time and grows with the graph."""
  data = shards["full_sentences"]
  config_json = str(tmp_path_factory.mktemp("tpu_model") / "model.json")
  tiny_config(max_positions=S + 2, num_layers=1, hidden_size=64, num_heads=2,
              intermediate_size=128).save(config_json)
  runs = {}

  def run(arm: str) -> StepRun:
    if arm in runs:
      return runs[arm]
    cfg = TrainConfig.from_dict(dict(
        model_dir="", train_data=data, eval_data=data, config=config_json, max_seq_len=S,
        batch_size=B, train_steps=STEPS, warmup_steps=2, learning_rate=2e-3, clip_norm=1.0,
        dropout=0.0, seed=0, shuffle_buffer=16, jit_compile=arm == "jit_compile"))
    strategy = tf.distribute.get_strategy()
    keras.utils.set_random_seed(cfg.runtime.seed)  # as pretrain() does: the same initial weights
    model_config = model_config_for(cfg, dataset_info.read(data))
    train_step = build_train_step(PretrainingTask(cfg, strategy, model_config), strategy)
    traced, objective = [], train_step.objective

    def recording(model, batch):
      traced.append({k: v.shape for k, v in batch.items()})  # Python: runs once per trace
      return objective(model, batch)
    train_step.objective = recording
    if arm == "whole_step_xla":
      train_step._fused = tf.function(train_step._fused_step, jit_compile=True)  # pylint: disable=protected-access
    train_ds, _ = inputs.build_datasets(cfg, strategy, model_config, start=0)
    next_batch = iter(train_ds).__next__
    losses = [float(train_step(next_batch)[0]["loss"]) for _ in range(STEPS)]
    runs[arm] = StepRun(losses, traced, train_step)
    return runs[arm]
  return run


def assert_traced_once_on_static_shapes(run: StepRun, arm: str):
  assert run.train_step._fused.experimental_get_tracing_count() == 1, arm  # pylint: disable=protected-access
  assert len(run.traced) == 1, arm  # the objective was traced once, in the one step trace
  shapes_seen = run.traced[0]
  assert all(shape.is_fully_defined() for shape in shapes_seen.values()), (arm, shapes_seen)
  predictions = MaskingConfig().resolved_max_predictions(S)
  assert shapes_seen["input_ids"] == [B, S], arm
  assert shapes_seen["mask_ids"] == [B, predictions], arm


def assert_same_loss_curve(run: StepRun, default: StepRun, arm: str):
  want, got = np.array(default.losses), np.array(run.losses)
  assert np.all(np.isfinite(want)) and want[-1] < want[0] - 0.1, want  # it learns
  np.testing.assert_allclose(got, want, rtol=1e-3, err_msg=arm)  # at every step
  assert got[-1] == pytest.approx(want[-1], rel=1e-3), arm  # and the final loss


def test_the_train_step_is_traced_once_on_fully_defined_shapes(step_run):
  for arm in ("default", "jit_compile"):
    assert_traced_once_on_static_shapes(step_run(arm), arm)
  # Under --jit_compile the objective's trace above is the XLA cluster's: compiled once.
  assert step_run("jit_compile").train_step._compute.experimental_get_tracing_count() == 1  # pylint: disable=protected-access


def test_jit_compile_trains_to_the_default_steps_loss_curve(step_run):
  assert_same_loss_curve(step_run("jit_compile"), step_run("default"), "jit_compile")


@pytest.mark.slow  # another XLA compile: ~9 CPU s
def test_the_whole_replica_step_compiles_under_xla_and_trains_alike(step_run):
  """All of the step in XLA (forward, backward, all-reduce, clipping, the NaN guard's cond,
  AdamW's apply, the counters): no op without an XLA kernel, no dynamic shape in the step."""
  run = step_run("whole_step_xla")
  assert_traced_once_on_static_shapes(run, "whole_step_xla")
  assert_same_loss_curve(run, step_run("default"), "whole_step_xla")
