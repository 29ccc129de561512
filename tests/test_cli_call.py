"""common/cli.py's `call`: a binary's main in this process, as `python -m` would run it; and the
harness's two ways to run a binary, chosen by the test."""

import pytest
from absl import flags

from roberta_tf.common import cli
from tests import harness


def test_a_flag_error_is_exit_1_and_one_line():
  code, error = cli.call("roberta_tf.evaluate", ["--no_such_flag=1"])
  assert code == 1 and error.startswith("error: ") and "no_such_flag" in error


def test_binaries_sharing_flag_names_keep_their_own_and_flags_start_from_defaults(tmp_path):
  global_flags = set(flags.FLAGS)
  missing = tmp_path / "nowhere"
  code, error = cli.call("roberta_tf.evaluate", [f"--model_dir={missing}",
                                                 f"--eval_data={missing}"])
  assert code == 1 and str(missing) in error
  # export defines --model_dir too, in its own FlagValues: no clash with evaluate's.
  code, error = cli.call("roberta_tf.export", [f"--model_dir={missing}",
                                               f"--export_dir={tmp_path / 'out'}"])
  assert code == 1 and str(missing) in error
  # Back to evaluate, without --model_dir: the last call's value does not leak in.
  code, error = cli.call("roberta_tf.evaluate", [f"--model_dir={missing}"])
  assert code == 1 and "--eval_data" in error and str(missing) not in error
  # absl's global FLAGS are not touched: no binary's flag was defined or parsed there.
  assert set(flags.FLAGS) == global_flags and "model_dir" not in flags.FLAGS


def test_the_harness_runs_a_binary_in_process_and_in_a_process_alike(tmp_path):
  args = ("roberta_tf.evaluate", f"--model_dir={tmp_path / 'nowhere'}",
          f"--eval_data={tmp_path / 'nowhere'}")
  inside, outside = harness.call_module(*args), harness.run_module(*args)
  assert inside.returncode == outside.returncode == 1
  assert inside.stderr.strip() == outside.stderr.strip()
  assert inside.stderr.count("\n") == 1 and inside.stdout == outside.stdout


@pytest.mark.parametrize("args", [("--help",), ("--helpshort",), ("--cpu_replicas=2",),
                                  ("--strategy=mirrored",), ("--deterministic",),
                                  ("--verbosity=1",), (b"\xff",)])
def test_what_needs_a_process_is_refused_in_process_naming_run_module(args):
  with pytest.raises(ValueError, match="run_module"):
    harness.call_module("roberta_tf.train", *args)


@pytest.mark.parametrize("kwargs", [{"timeout": 5}, {"env": {}}, {"text": False},
                                    {"file_size_limit": 1000}])
def test_process_keywords_are_refused_in_process_naming_run_module(kwargs):
  with pytest.raises(TypeError, match=f"{next(iter(kwargs))}=.*run_module"):
    harness.call_module("roberta_tf.train", "--train_steps=1", **kwargs)
