"""common/cli.py's `call`: a binary's main in this process, as `python -m` would run it."""

import pytest

from roberta_tf.common import cli
from tests import harness


def test_a_flag_error_is_exit_1_and_one_line():
  code, error = cli.call("roberta_tf.evaluate", ["--no_such_flag=1"])
  assert code == 1 and error.startswith("error: ") and "no_such_flag" in error


def test_binaries_sharing_flag_names_take_turns_and_flags_start_from_defaults(tmp_path):
  missing = tmp_path / "nowhere"
  code, error = cli.call("roberta_tf.evaluate", [f"--model_dir={missing}",
                                                 f"--eval_data={missing}"])
  assert code == 1 and str(missing) in error
  # export defines --model_dir too: the evaluate flags are parked, export's are defined.
  code, error = cli.call("roberta_tf.export", [f"--model_dir={missing}",
                                               f"--export_dir={tmp_path / 'out'}"])
  assert code == 1 and str(missing) in error
  # Back to evaluate, without --model_dir: the last call's value does not leak in.
  code, error = cli.call("roberta_tf.evaluate", [f"--model_dir={missing}"])
  assert code == 1 and "--eval_data" in error and str(missing) not in error


def test_the_harness_runs_a_binary_in_process_and_in_a_process_alike(tmp_path):
  args = ("roberta_tf.evaluate", f"--model_dir={tmp_path / 'nowhere'}",
          f"--eval_data={tmp_path / 'nowhere'}")
  inside, outside = harness.run_module(*args), harness.run_module(*args, in_process=False)
  assert inside.returncode == outside.returncode == 1
  assert inside.stderr.strip() == outside.stderr.strip()
  assert inside.stderr.count("\n") == 1 and inside.stdout == outside.stdout


@pytest.mark.parametrize("args", [("--help",), ("--cpu_replicas=2",), ("--deterministic",)])
def test_process_wide_flags_get_a_process_of_their_own(args):
  assert not harness._in_process("roberta_tf.train", args, {}, None)  # pylint: disable=protected-access
  assert harness._in_process("roberta_tf.train", ("--train_steps=1",), {"timeout": 5}, None)  # pylint: disable=protected-access
  assert not harness._in_process("roberta_tf.train", (), {"env": {}}, None)  # pylint: disable=protected-access
