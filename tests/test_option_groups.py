"""Option groups (roberta_tf/common/option_groups.py) declare each option pretraining and
fine-tuning share once; both configs are composed from them and both binaries' flags are made
from the configs' fields, with the flags' names, defaults, choices and required-ness unchanged.
"""

import dataclasses
import importlib
import inspect
import json
import os
import pickle
import re

import pytest
from absl import flags

from data_prep.shard_settings import ShardSettings
from roberta_tf.common import option_groups, options
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from roberta_tf.pretraining.train_config import TrainConfig
from tests.conftest import REPO
from tests.harness import call_module, run_script

PRECISION = ("enum", "float32", ("float32", "mixed_bfloat16", "mixed_float16"))
STRATEGY = ("enum", "auto", ("auto", "default", "mirrored", "multi_worker", "tpu"))
# Every flag of each binary, (kind, default[, choices]), as the binaries declared them before
# the option groups (train from TrainConfig's fields, finetune by hand). A new flag is added
# here on purpose; a changed default or choice list is a behaviour change.
TRAIN_FLAGS = {
    "adam_beta1": ("float", 0.9),
    "adam_beta2": ("float", 0.98),
    "adam_epsilon": ("float", 1e-06),
    "batch_size": ("integer", 256),
    "checkpoint_every": ("integer", 1000),
    "clip_norm": ("float", 0.0),
    "config": ("string", "small"),
    "cpu_replicas": ("integer", 1),
    "deterministic": ("bool", False),
    "dropout": ("float", -1.0),
    "dupe_factor": ("integer", 10),
    "eval_data": ("string", ""),
    "eval_every": ("integer", 0),
    "eval_steps": ("integer", 0),
    "grad_accum_steps": ("integer", 1),
    "init_from": ("string", ""),
    "input_lanes": ("integer", 8),  # added since: the training stream's lanes
    "jit_compile": ("bool", False),
    "keep_best": ("bool", False),  # added since: model_dir/best/, the lowest eval loss's
    "keep_checkpoints": ("integer", 3),
    "learning_rate": ("float", 0.0006),
    "log_every": ("integer", 100),
    "family": ("enum", "roberta", ("roberta", "modernbert")),  # added since: model families
    # mask_prob, 0 since: the family's rate (roberta 0.15, modernbert 0.3); --mask_rate since
    "mask_rate": ("float", 0.0),
    "mask_token_prob": ("float", 0.8),
    "masking": ("enum", "dynamic", ("dynamic", "static")),
    "max_bad_steps": ("integer", 20),
    "max_predictions_per_seq": ("integer", 0),
    "max_seq_len": ("integer", 512),
    "model_dir": ("string", None),
    "new_token_init": ("enum", "mean", ("mean", "normal")),  # added since: a grown vocabulary
    "overwrite": ("bool", False),
    "patience": ("integer", 0),  # added since: early stopping on the eval loss (evals)
    "peak_flops": ("float", 0.0),  # 0 since: measured (the one-CPU peak_flops_* went)
    "peer_timeout": ("integer", 600),
    # --pre_layer_norm, --use_bias, --gated_ffn (the budget-recipe options) and --type_embedding
    # went: a family config's fields, set by --model_option=FIELD=VALUE.
    "model_option": ("string", []),
    # auto added since: measured at start (training/precision_probe.py)
    "precision": ("enum", "float32", (*PRECISION[2], "auto")),
    "random_token_prob": ("float", 0.1),
    "seed": ("integer", 0),
    "shuffle_buffer": ("integer", 10000),
    "skip_corrupt_shards": ("bool", False),
    "strategy": STRATEGY,
    "tpu": ("string", ""),
    "train_data": ("string", None),
    "train_steps": ("integer", 1000),
    "train_minutes": ("float", 0.0),  # added since: the time budget
    # added since: warmup-stable-decay and its decay branches (docs/schedules.md)
    "schedule": ("enum", "linear", ("linear", "wsd")),
    "decay_steps": ("integer", 0),
    "decay_fraction": ("float", 0.0),
    "decay_shape": ("enum", "linear", ("linear", "1-sqrt")),
    "decay_floor": ("float", 0.0),
    "decay_from": ("string", ""),
    "optimizer": ("enum", "adamw", ("adamw", "stable_adamw")),  # added since: StableAdamW
    "warmup_steps": ("integer", 100),
    "weight_decay": ("float", 0.01),
    "whole_word_masking": ("bool", False),
}
FINETUNE_FLAGS = {
    "adam_beta1": ("float", 0.9),
    "adam_beta2": ("float", 0.98),
    "adam_epsilon": ("float", 1e-06),
    "batch_size": ("integer", 32),
    "batch_sizes": ("list", []),
    "batching": ("enum", "length_buckets", ("length_buckets", "random", "max_seq_len")),
    "clip_norm": ("float", 0.0),
    "config": ("string", "small"),
    "cpu_replicas": ("integer", 1),
    "data_dir": ("string", ""),
    "doc_stride": ("integer", 128),
    "dropout": ("float", -1.0),
    "early_stopping_patience": ("integer", 0),
    "epochs": ("integer", 10),
    "eval_batch_size": ("integer", 0),
    "eval_file": ("string", None),
    "export_dir": ("string", ""),
    "export_only": ("bool", False),
    "export_precision": ("enum", "float32", ("float32", "bfloat16", "auto")),
    "glue_diagnostic": ("string", ""),
    "glue_task": ("enum", "", ("", "cola", "sst2", "mrpc", "stsb", "qqp", "mnli", "qnli", "rte",
                               "wnli")),
    "grad_accum_steps": ("integer", 1),
    "init_from": ("string", ""),
    "label_all_pieces": ("bool", False),
    "label_field": ("string", "label"),
    "labels": ("list", []),
    "learning_rate": ("float", 1e-05),
    "learning_rates": ("list", []),
    "max_answer_len": ("integer", 30),
    "max_bad_steps": ("integer", 5),
    "max_query_len": ("integer", 64),
    "max_seq_len": ("integer", 0),
    "metric": ("string", ""),
    "model_dir": ("string", None),
    "n_best_size": ("integer", 20),
    "null_score_threshold": ("float", 0.0),
    "overwrite": ("bool", False),
    "peer_timeout": ("integer", 600),
    "pooling": ("enum", "mean", ("mean", "cls")),
    "precision": PRECISION,
    "predictions_dir": ("string", ""),
    "seed": ("integer", 0),
    "seeds": ("integer", 5),
    "similarity_scale": ("float", 20.0),
    "skip_bad_examples": ("bool", False),
    "squad_v2_null": ("enum", "classifier", ("classifier", "span_score")),
    "strategy": STRATEGY,
    "sts_file": ("string", ""),
    "symmetric_loss": ("bool", False),
    "task": ("enum", None, ("classification", "regression", "multiple_choice", "extractive_qa",
                            "token_classification", "embedding")),
    "test_file": ("string", ""),
    "text_fields": ("list", ["text"]),
    "train_file": ("string", None),
    "vocab_dir": ("string", ""),
    "warmup_ratio": ("float", 0.06),
    "weight_decay": ("float", 0.1),
}

# data_prep.build_shards' and roberta_tf.ablate's flags as declared by hand (absl) before their
# settings objects (ShardSettings; StudySettings and StudyPlan).
BUILD_SHARDS_FLAGS = {
    "beam_options": ("string", ""),
    "compression": ("enum", "none", ("none", "gzip")),
    "encoder": ("enum", "tf", ("tf", "hf")),
    "engine": ("enum", "local", ("local", "beam")),
    "group_bytes": ("integer", 8 << 20),
    "input": ("string", None),
    "max_line_bytes": ("integer", 1 << 20),
    "max_seq_len": ("integer", 512),
    "num_shards": ("integer", 16),
    "num_validation_shards": ("integer", 1),
    "output_dir": ("string", None),
    "overwrite": ("bool", False),
    "packing": ("enum", "full_sentences", ("full_sentences", "doc_sentences",
                                           "separate_documents", "segment_pair",
                                           "sentence_pair")),
    "progress": ("bool", True),
    "seed": ("integer", 0),
    "sort_buffer_mb": ("integer", 256),
    "text_field": ("string", "text"),
    "validation_fraction": ("float", 0.01),
    "vocab_dir": ("string", None),
}
# data_prep.train_tokenizer's, as declared by hand before VocabSettings.
TRAIN_TOKENIZER_FLAGS = {
    "add_tokens": ("integer", 0),
    "extend_from": ("string", ""),
    "format": ("enum", "vocab_json", ("vocab_json", "tokenizer_json")),
    "input": ("string", None),
    "min_frequency": ("integer", 2),
    "output_dir": ("string", None),
    "overwrite": ("bool", False),
    "progress": ("bool", True),
    "text_field": ("string", "text"),
    "vocab_size": ("integer", 50265),
}
_PROBLEM = os.path.join(REPO, "roberta_tf", "ablation", "data", "docs_sections")
ABLATE_FLAGS = {
    "arm": ("string", []),  # a multi-string flag
    "base_batch": ("integer", 32),
    "base_lr": ("float", 0.001),
    "config": ("string", "small"),
    "corpus": ("string", "stdlib"),
    "extra_arm": ("string", []),  # a multi-string flag
    "minimal_pairs": ("string", ""),
    "minutes": ("float", 5.0),
    "overwrite": ("bool", False),
    "paired": ("bool", False),
    "pairs_per_paradigm": ("integer", 0),
    "parallel": ("integer", 1),
    "records": ("string", ""),
    "seeds": ("list", ["0"]),
    "steps": ("integer", None),
    "study": ("enum", None, ("masking", "input_format", "batch_size", "recipe", "modern")),
    "task_dev": ("string", os.path.join(_PROBLEM, "dev.jsonl")),
    "task_epochs": ("integer", 3),
    "task_label_field": ("string", "label"),
    "task_learning_rate": ("float", 0.0001),
    "task_text_field": ("string", "text"),
    "task_train": ("string", os.path.join(_PROBLEM, "train.jsonl")),
    "train_flags": ("list", []),
    "vocab_size": ("integer", 8000),
    "warmup_fraction": ("float", 0.25),
    "work_dir": ("string", None),
}


def _surface(flag_values):
  """A binary's own flags (less cli's --verbose): {name: [kind, default(, choices)]}, the names
  of the required ones (absl's required-flag validator; a bound is no requirement) and each
  flag's help as --helpfull prints it (absl's own syntactic help, such as "(a positive
  integer)", left out)."""
  from roberta_tf.common import cli  # pylint: disable=import-outside-toplevel
  kinds = {"ArgumentParser": "string", "IntegerParser": "integer", "FloatParser": "float",
           "BooleanParser": "bool", "ListParser": "list", "EnumParser": "enum"}
  table, required, helps = {}, [], {}
  for name in flag_values:
    flag = flag_values[name]
    if name != flag.name or name in cli.binary_flags():
      continue
    row = [kinds[type(flag.parser).__name__], flag.default]
    if getattr(flag.parser, "enum_values", None):
      row.append(list(flag.parser.enum_values))
    table[flag.name] = row
    helps[flag.name] = flag.help
    if any(v.message.endswith("must have a value other than None.") for v in flag.validators):
      required.append(flag.name)
  return {"flags": table, "required": sorted(required), "help": helps}


# A fresh process: importing the binary (its --help) must not import TensorFlow.
_DUMP = inspect.getsource(_surface) + r"""
import json, sys
import MODULE as binary
print(json.dumps({**_surface(binary.FLAGS), "tensorflow": "tensorflow" in sys.modules}))
"""


def _flags_of(module):
  result = run_script(_DUMP.replace("MODULE", module), timeout=120)
  assert result.returncode == 0, result.stderr[-3000:]
  return json.loads(result.stdout)


def _rows(table):
  return {name: tuple(tuple(v) if isinstance(v, list) and i == 2 else v
                      for i, v in enumerate(row)) for name, row in table.items()}


@pytest.mark.parametrize("module, expected, required", [
    ("roberta_tf.train", TRAIN_FLAGS, ["model_dir", "train_data"]),
    ("roberta_tf.finetune", FINETUNE_FLAGS, []),
])
def test_flag_names_defaults_and_choices_are_unchanged(module, expected, required):
  dump = _flags_of(module)
  assert _rows(dump["flags"]) == expected
  assert dump["required"] == required
  assert not dump["tensorflow"], f"importing {module} (its --help) imports TensorFlow"


# In this process (build_shards imports TensorFlow; required: flags with a validator).
@pytest.mark.parametrize("module, expected, required", [
    ("data_prep.build_shards", BUILD_SHARDS_FLAGS, []),
    ("data_prep.train_tokenizer", TRAIN_TOKENIZER_FLAGS, []),
    # The lower bounds of --pairs_per_paradigm and --parallel are checks of StudySettings and
    # StudyPlan now (check_options), no absl validators.
    ("roberta_tf.ablate", ABLATE_FLAGS, ["study", "work_dir"]),
])
def test_prep_and_ablation_flags_are_unchanged(module, expected, required):
  surface = _surface(importlib.import_module(module).FLAGS)
  assert _rows(surface["flags"]) == expected
  assert surface["required"] == required


# Every binary's flags as they were declared before all of them came from options.option()
# (tests/testdata/flag_surfaces.json, written from the code at that commit): names, kinds,
# defaults, choices, required-ness and help. A change there is a change of the command line:
# make it on purpose, in the file too.
BINARIES = ("data_prep.build_shards", "data_prep.train_tokenizer", "roberta_tf.ablate",
            "roberta_tf.average_checkpoints", "roberta_tf.convert_checkpoint", "roberta_tf.embed",
            "roberta_tf.evaluate", "roberta_tf.export", "roberta_tf.fill_mask",
            "roberta_tf.finetune", "roberta_tf.finetuning.docs_sections", "roberta_tf.inspect_data",
            "roberta_tf.quickstart", "roberta_tf.tag", "roberta_tf.train")
SURFACES = os.path.join(REPO, "tests", "testdata", "flag_surfaces.json")


def _pinned_surface(module):
  """_surface of binary `module` (imported here) as JSON holds it, this checkout's path as
  <repo> (ablate's defaults name files in it)."""
  text = json.dumps(_surface(importlib.import_module(module).FLAGS), sort_keys=True)
  return json.loads(text.replace(json.dumps(REPO)[1:-1], "<repo>"))


def test_every_binary_is_pinned_and_declares_no_flag_by_hand():
  """Every module that runs `cli.run(main, FLAGS)` is a pinned binary, and its flags come from
  options.define_flags: flags.DEFINE_* is options.py's (and cli.py's --verbose) only."""
  binaries, by_hand = set(), []
  for package in ("roberta_tf", "data_prep"):
    for root, _, names in os.walk(os.path.join(REPO, package)):
      for name in sorted(n for n in names if n.endswith(".py")):
        path = os.path.join(root, name)
        with open(path, encoding="utf-8") as f:
          text = f.read()
        module = os.path.relpath(path, REPO)[:-3].replace(os.sep, ".")
        if module in ("roberta_tf.common.options", "roberta_tf.common.cli"):
          continue  # the mechanism, and cli's --verbose
        if "cli.run(main, FLAGS)" in text:
          binaries.add(module)
        if re.search(r"flags\.(DEFINE_\w+|mark_flags?_as_required)\(", text):
          by_hand.append(module)
  assert binaries == set(BINARIES)
  assert not by_hand, by_hand


@pytest.mark.parametrize("module", BINARIES)
def test_every_binary_keeps_its_flags(module):
  with open(SURFACES, encoding="utf-8") as f:
    pinned = json.load(f)[module]
  surface = _pinned_surface(module)
  assert surface["flags"] == pinned["flags"]
  assert surface["required"] == pinned["required"]
  assert surface["help"] == pinned["help"]


@dataclasses.dataclass(frozen=True)
class _Kinds:
  """One option of each check kind."""
  out: str = options.option(help="Required: no default.", path=True)
  mode: str = options.option("a", "A choice.", choices=("a", "b"))
  steps: int = options.option(1, "A range.", check=options.POSITIVE)
  inputs: str = options.option("", "Comma-separated paths.", path=True)
  limit: int | None = options.option(None, "Unset: None, not checked.", check=options.POSITIVE)


@pytest.mark.parametrize("values, message", [
    (dict(out=""), r"^--out is required$"),
    (dict(mode="c"), r"^--mode='c': expected one of a, b$"),
    (dict(steps=0), r"^--steps must be > 0, got 0$"),
    (dict(limit=0), r"^--limit must be > 0, got 0$"),
    (dict(out="nope://x"), r"^--out=nope://x: "),
    (dict(inputs="a.txt, nope://b"), r"^--inputs=nope://b: "),
    (dict(out="gs:/b/x"), r"^--out=gs:/b/x: a URL takes two slashes"),
])
def test_each_check_kind_says_one_line_naming_the_flag(values, message):
  """The mechanism runs each option's checks (from_flags, validate()): one message format per
  kind, naming the flag."""
  options.check_options(_Kinds(out="o"))  # the defaults pass; an unset optional is unchecked
  with pytest.raises(ValueError, match=message):
    options.check_options(_Kinds(**{"out": "o", **values}))
  options.check_options(_Kinds(out=""), required=False)  # a mode that does without it


@pytest.mark.parametrize("module, argv, line", [
    # path: a URL no file system here handles, also as one item of a comma list
    ("roberta_tf.export", ["--model_dir=nope://m", "--export_dir=e"], r"--model_dir=nope://m: "),
    ("data_prep.train_tokenizer", ["--input=a.txt,nope://b", "--output_dir=o"],
     r"--input=nope://b: "),
    # range (an absl lower_bound before)
    ("roberta_tf.embed", ["--saved_model=s", "--batch_size=0", "a text"],
     r"--batch_size must be > 0, got 0$"),
    ("data_prep.build_shards", ["--input=c", "--vocab_dir=v", "--output_dir=o",
                                "--num_shards=0"], r"--num_shards must be > 0, got 0$"),
    ("roberta_tf.inspect_data", ["--data=d", "--num_batches=0"],
     r"--num_batches must be > 0, got 0$"),
    # choice: an enum flag, refused by absl's parser before main
    ("roberta_tf.export", ["--model_dir=m", "--export_dir=e", "--precision=x"],
     r"flag --precision=x: value should be one of <float32\|bfloat16\|auto>"),
    # required
    ("roberta_tf.inspect_data", [], r"--data is required$"),
    ("roberta_tf.convert_checkpoint", ["--hf_dir=h"], r"--model_dir is required$"),
])
def test_a_bad_flag_is_one_error_line_naming_it(module, argv, line):
  result = call_module(module, *argv)
  errors = [x for x in result.stderr.splitlines() if x.startswith("error:")]
  assert result.returncode == 1 and len(errors) == 1, result.stderr
  assert re.match(r"^error: " + line, errors[0]), errors[0]


def test_build_shards_flags_are_shard_settings_fields_less_its_settings():
  """One declaration: build_shards' flags are ShardSettings' fields but its options.setting()s,
  which from_flags leaves at their defaults; the object pickles (Beam's DoFns carry it)."""
  values = flags.FlagValues()
  options.define_flags(ShardSettings, values, required=False)
  assert set(values) == {f.name for f in options.flag_fields(ShardSettings)} == set(
      BUILD_SHARDS_FLAGS)
  assert {f.name for f in dataclasses.fields(ShardSettings)} - set(values) == {
      "batch_sentences", "shuffle_blocks", "sort_bytes"}
  values(["build_shards", "--input=c", "--num_shards=3", "--sort_buffer_mb=2"])
  with pytest.raises(ValueError, match=r"^--vocab_dir is required$"):
    options.from_flags(ShardSettings, values)
  settings = options.from_flags(ShardSettings, values, required=False)
  assert (settings.input, settings.vocab_dir, settings.num_shards) == ("c", "", 3)
  assert (settings.batch_sentences, settings.sort_buffer_bytes) == (4096, 2 << 20)
  assert settings.splits == ("train", "validation") and settings.shard_count("validation") == 1
  assert pickle.loads(pickle.dumps(settings)) == settings


def _groups_of(config_cls):
  """{group field name: (the group class it holds, its omitted options)} of a config class."""
  return {f.name: (f.metadata["nested"], f.metadata["omit"])
          for f in dataclasses.fields(config_cls) if "nested" in f.metadata}


def test_shared_options_are_declared_once_in_a_group():
  """Each config holds every group as a nested field (the group or a subclass of it), and no
  field of its own bears a group option's name; a subclass only redeclares group options."""
  for config in (TrainConfig, FinetuneConfig):
    groups = _groups_of(config)
    assert set(groups) == set(option_groups.GROUPS), (config, groups)
    for name, (cls, _) in groups.items():
      assert issubclass(cls, option_groups.GROUPS[name]), (config, name, cls)
      assert {f.name for f in dataclasses.fields(cls)} == {
          f.name for f in dataclasses.fields(option_groups.GROUPS[name])}
    own = {f.name for f in dataclasses.fields(config)} - set(groups)
    assert not own & set(_GROUP_OPTIONS), (config, own & set(_GROUP_OPTIONS))
  train = {f.name: f for _, f in options.option_fields(TrainConfig)}
  finetune = {f.name: f for _, f in options.option_fields(FinetuneConfig)}
  shared = set(train) & set(finetune)
  assert len(shared) >= 19 and shared <= set(_GROUP_OPTIONS), sorted(shared)
  # One list of precisions and strategies (strategy.py imports STRATEGIES).
  for fields in (train, finetune):
    assert fields["strategy"].metadata["choices"] is option_groups.STRATEGIES
  assert finetune["precision"].metadata["choices"] is option_groups.PRECISIONS
  assert train["precision"].metadata["choices"] == (*option_groups.PRECISIONS, "auto")
  with open(os.path.join(REPO, "roberta_tf", "training", "strategy.py"), encoding="utf-8") as f:
    assert "from roberta_tf.common.option_groups import STRATEGIES" in f.read()


def test_a_config_overrides_a_group_default_and_help():
  train, finetune = _train(), FinetuneConfig.from_dict(_EMPTY_FINETUNE)
  assert (train.optimizer.learning_rate, finetune.optimizer.learning_rate) == (6e-4, 1e-5)
  assert (train.optimizer.weight_decay, finetune.optimizer.weight_decay) == (0.01, 0.1)
  assert (train.loop.max_bad_steps, finetune.loop.max_bad_steps) == (20, 5)
  assert (train.optimizer.adam_beta2, finetune.optimizer.adam_beta2) == (0.98, 0.98)
  assert (train.data.max_seq_len, finetune.data.max_seq_len) == (512, 0)
  help_of = {c: {f.name: f.metadata["help"] for _, f in options.option_fields(c)}
             for c in (TrainConfig, FinetuneConfig)}
  assert help_of[TrainConfig]["adam_epsilon"] == help_of[FinetuneConfig]["adam_epsilon"]
  assert help_of[TrainConfig]["learning_rate"] != help_of[FinetuneConfig]["learning_rate"]


def _finetune_flags(argv):
  values = flags.FlagValues()
  options.define_flags(FinetuneConfig, values, required=False)
  values(["finetune", *argv])
  return options.from_flags(FinetuneConfig, values, required=False)  # as finetune's main


def test_ablate_plan_takes_repeated_arms_and_its_study_defaults():
  from roberta_tf.ablation.settings import StudyPlan  # pylint: disable=import-outside-toplevel
  values = flags.FlagValues()
  options.define_flags(StudyPlan, values)
  values(["ablate", "--study=batch_size", "--work_dir=w", "--arm=a", "--arm=b c", "--seeds=0,2",
          "--base_lr=0.5"])
  plan = options.from_flags(StudyPlan, values)
  assert plan.arm == ("a", "b c") and plan.seeds == (0, 2) and plan.steps is None
  given = {n for n in ("steps", "base_batch", "base_lr") if values[n].present}
  resolved = plan.resolved(given)  # batch_size's base row, less what the command gave
  assert (resolved.steps, resolved.base_batch, resolved.base_lr) == (1024, 8, 0.5)
  masking = dataclasses.replace(plan, study="masking", steps=7).resolved(set())
  assert (masking.steps, masking.base_batch, masking.base_lr) == (7, 32, 0.5)


# What finetune's flags give with none set (required=False: an unset required flag is "").
_EMPTY_FINETUNE = dict(task="", model_dir="", train_file="", eval_file="")


def test_finetune_list_flags_parse_as_before():
  cfg = _finetune_flags(["--learning_rates=1e-5,2e-5", "--batch_sizes=16,32",
                         "--text_fields=sentence1,sentence2", "--labels=no,yes"])
  assert cfg.learning_rates == (1e-5, 2e-5) and cfg.batch_sizes == (16, 32)
  assert cfg.text_fields == ("sentence1", "sentence2") and cfg.labels == ("no", "yes")
  assert (cfg.task, cfg.model.model_dir, cfg.train_file, cfg.eval_file) == ("", "", "", "")
  default = _finetune_flags([])
  assert default == FinetuneConfig.from_dict(_EMPTY_FINETUNE)
  assert default.text_fields == ("text",) and default.labels == ()
  assert default.learning_rate_sweep == (1e-5,)
  with pytest.raises(ValueError, match=r"--learning_rates=1e-5,x: not a list of numbers"):
    _finetune_flags(["--learning_rates=1e-5,x"])
  with pytest.raises(ValueError, match=r"--batch_sizes=16,3.5: not a list of integers"):
    _finetune_flags(["--batch_sizes=16,3.5"])
  with pytest.raises(flags.IllegalFlagValueError):
    _finetune_flags(["--precision=float16"])


def _train(**overrides):
  return TrainConfig.from_dict({"model_dir": "m", "train_data": "d", **overrides})


def _finetune(**overrides):
  values = dict(task="classification", model_dir="out", train_file="t", eval_file="e",
                vocab_dir="v")
  return FinetuneConfig.from_dict({**values, **overrides})


@pytest.mark.parametrize("overrides, message", [
    (dict(clip_norm=-1.0), r"^--clip_norm must be >= 0, got -1.0$"),
    (dict(max_bad_steps=0), r"^--max_bad_steps must be > 0, got 0$"),
    (dict(grad_accum_steps=0), r"^--grad_accum_steps must be > 0, got 0$"),
    (dict(precision="fp16"), r"^--precision='fp16': expected one of float32, mixed_bfloat16, "),
    (dict(strategy="x"), r"^--strategy='x': expected one of auto, default, mirrored, "),
])
def test_group_checks_apply_to_both_configs(overrides, message):
  with pytest.raises(ValueError, match=message):
    _train(**overrides).validate()
  with pytest.raises(ValueError, match=message):
    _finetune(**overrides).validate()


def test_each_config_keeps_its_own_checks():
  _finetune(max_seq_len=0, batch_size=0, batch_sizes=(16,)).validate()
  with pytest.raises(ValueError, match=r"--max_seq_len must be 0 \(the model's\) or >= 8, got 4"):
    _finetune(max_seq_len=4).validate()
  with pytest.raises(ValueError, match=r"^--max_seq_len must be >= 8, got 0$"):
    _train(max_seq_len=0).validate()
  for make in (lambda: _train(peer_timeout=0), lambda: _finetune(peer_timeout=0)):
    with pytest.raises(ValueError, match=r"^--peer_timeout must be > 0, got 0$"):
      make().validate()
  with pytest.raises(ValueError, match=r"^--glue_task='x': expected one of cola, sst2, "):
    _finetune(glue_task="x").validate()
  with pytest.raises(ValueError, match=r"^--task='x': expected one of classification, "):
    _finetune(task="x").validate()
  with pytest.raises(ValueError, match=r"^--task is required$"):
    _finetune(task="").validate()
  with pytest.raises(ValueError, match=r"^--model_dir is required$"):
    _train(model_dir="").validate()
  with pytest.raises(ValueError, match=r"^--warmup_ratio must be in \[0, 1\), got 1.0$"):
    _finetune(warmup_ratio=1.0).validate()
  with pytest.raises(ValueError, match=r"must be multiples of --grad_accum_steps=3$"):
    _finetune(grad_accum_steps=3).validate()
  with pytest.raises(ValueError, match=r"^--warmup_steps=200 must be in \[0, --train_steps=100\]$"):
    _train(warmup_steps=200, train_steps=100).validate()


# (cfg.optimizer is the group itself; its --optimizer option is cfg.optimizer.optimizer.)
_GROUP_OPTIONS = {f.name: group for group, cls in option_groups.GROUPS.items()
                  for f in dataclasses.fields(cls) if f.name not in option_groups.GROUPS}
# A read of a group option on a config: cfg.clip_norm, self.cfg.seed (not cfg.x = ...), also
# of a config read back from a model dir (trained, before).
_FLAT_READ = re.compile(r"\b(\w*cfg|train_config|finetune_config|trained|before)\.(" + "|".join(
    sorted(_GROUP_OPTIONS, key=len, reverse=True)) + r")\b(?!\s*(=[^=]|\+=|-=))")


def test_code_reads_group_options_through_their_group():
  """cfg.optimizer.clip_norm, cfg.model.model_dir, ...: the configs have no flat field of a
  group option (a flat read fails at run time; this finds it in code a test does not run)."""
  flat = []
  for root, _, names in os.walk(os.path.join(REPO, "roberta_tf")):
    for name in sorted(n for n in names if n.endswith(".py")):
      path = os.path.join(root, name)
      if name == "option_groups.py":
        continue
      with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
          flat += [f"{os.path.relpath(path, REPO)}:{number}: {m.group(0)}"
                   for m in _FLAT_READ.finditer(line)]
  assert not flat, "\n".join(flat)


def test_a_group_option_redeclared_with_another_type_is_refused():
  @dataclasses.dataclass(frozen=True)
  class WrongRuntime(option_groups.RuntimeOptions):
    seed: str = options.redeclare(option_groups.RuntimeOptions, "seed")

  with pytest.raises(TypeError, match=r"WrongRuntime.seed is annotated str; RuntimeOptions "
                                      r"declares int"):
    options.nested(WrongRuntime)
  with pytest.raises(ValueError, match=r"omit=\['tpus'\]: not options of RuntimeOptions"):
    options.nested(option_groups.RuntimeOptions, omit=("tpus",))
  with pytest.raises(TypeError, match=r"no such attribute \['helps'\]"):
    options.redeclare(option_groups.RuntimeOptions, "seed", helps="x")


def test_each_config_holds_its_groups_as_fields():
  """The groups are the configs' dataclass fields (frozen group instances), not views; a group
  option a binary does not offer keeps the group's default and is no name of its config."""
  train, finetune = _train(learning_rate=1e-3, tpu="t"), _finetune(weight_decay=0.2, seed=3)
  for group in option_groups.GROUPS.values():
    assert group.__dataclass_params__.frozen
  for config in (train, finetune):
    fields = {f.name: f for f in dataclasses.fields(config)}
    for name, group in option_groups.GROUPS.items():
      assert name in fields and isinstance(getattr(config, name), group), name
      assert not isinstance(inspect.getattr_static(type(config), name, None), property)
    with pytest.raises(dataclasses.FrozenInstanceError):
      config.optimizer.clip_norm = 1.0
  assert train.optimizer == option_groups.OptimizerOptions(learning_rate=1e-3)
  assert train.model == option_groups.ModelOptions(model_dir="m")
  assert finetune.optimizer.weight_decay == 0.2 and finetune.optimizer.learning_rate == 1e-5
  assert (train.runtime.tpu, finetune.runtime.seed) == ("t", 3)
  assert finetune.runtime.jit_compile is False and finetune.data.input_lanes == 8
  assert finetune.loop.checkpoint_every == 1000 and finetune.optimizer.warmup_steps == 100
  # The records and names stay flat, the flags': config.json's "training" keys, sweep.json's.
  assert set(train.to_dict()) == set(TRAIN_FLAGS)
  assert set(finetune.to_dict()) == set(FINETUNE_FLAGS) - {"export_only"}
  for make, name in ((_finetune, "tpu"), (_finetune, "input_lanes"), (_finetune, "log_every"),
                     (_train, "warmup_ratio"), (_train, "optimizer.clip_norm")):
    with pytest.raises(ValueError, match=rf"Config has no option {re.escape(name)}$"):
      make(**{name: 1})


def test_flat_names_route_to_their_groups():
  cfg = _train(clip_norm=1.0, seed=7, train_steps=500, max_seq_len=128)
  assert (cfg.optimizer.clip_norm, cfg.runtime.seed, cfg.train_steps) == (1.0, 7, 500)
  assert cfg.data == option_groups.DataOptions(max_seq_len=128)
  changed = cfg.replace(learning_rate=1e-4, precision="auto", mask_rate=0.2, checkpoint_every=5)
  assert (changed.optimizer.learning_rate, changed.optimizer.clip_norm) == (1e-4, 1.0)
  assert (changed.runtime.precision, changed.runtime.seed) == ("auto", 7)
  assert (changed.mask_rate, changed.loop.checkpoint_every, changed.data) == (0.2, 5, cfg.data)
  assert type(changed.runtime) is type(cfg.runtime)  # TrainRuntime: --precision=auto allowed
  changed.validate()
  assert cfg.optimizer.learning_rate == 6e-4  # a copy: the original is unchanged
  # A whole group by its field's name, with options of it on top.
  whole = cfg.replace(optimizer=option_groups.OptimizerOptions(weight_decay=0.5), clip_norm=2.0)
  assert (whole.optimizer.weight_decay, whole.optimizer.clip_norm) == (0.5, 2.0)
  # --optimizer, an option of the group of that name: a string is the option, not the group.
  stable = cfg.replace(optimizer="stable_adamw")
  assert (stable.optimizer.optimizer, stable.optimizer.clip_norm) == ("stable_adamw", 1.0)
  assert TrainConfig.from_dict(stable.to_dict()) == stable
  assert TrainConfig.from_dict(cfg.to_dict()) == cfg
  finetune = _finetune(labels=("a", "b"), clip_norm=1.0)
  assert FinetuneConfig.from_dict(finetune.to_dict()).to_dict() == finetune.to_dict()
  with pytest.raises(ValueError, match=r"^FinetuneConfig has no option learning_rat, warmup_step$"):
    _finetune().replace(learning_rat=1.0, warmup_step=1)
  with pytest.raises(TypeError, match="model_dir"):
    TrainConfig.from_dict({"train_data": "d"})


def test_a_flat_training_record_from_before_the_nesting_still_reads(tmp_path):
  """config.json's "training" as every model dir has it (flat: the flags' names; the keys of
  TRAIN_FLAGS), with an option removed since: a resume reads it back, and writes it the same."""
  from roberta_tf.common import atomic_write  # pylint: disable=import-outside-toplevel
  from roberta_tf.pretraining import model_dir_setup  # pylint: disable=import-outside-toplevel
  record = {name: row[1] for name, row in TRAIN_FLAGS.items()}
  record.update(model_dir=str(tmp_path), train_data="shards", learning_rate=3e-4, seed=5,
                max_seq_len=128, precision="mixed_bfloat16", log_every=10, input_lanes=4)
  atomic_write.write_json(os.path.join(tmp_path, "config.json"), {
      "model": {}, "training": {**record, "a_removed_option": 1}})
  cfg = model_dir_setup.recorded_training(str(tmp_path))
  assert (cfg.optimizer.learning_rate, cfg.runtime.seed, cfg.runtime.precision) == (
      3e-4, 5, "mixed_bfloat16")
  assert (cfg.data.max_seq_len, cfg.data.input_lanes, cfg.loop.log_every) == (128, 4, 10)
  assert cfg.to_dict() == record
  with pytest.raises(ValueError, match=r"has no option a_removed_option$"):
    TrainConfig.from_dict({**record, "a_removed_option": 1})
