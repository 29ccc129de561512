"""common/cli.py's `call`: a binary's main in this process, as `python -m` would run it; and the
harness's two ways to run a binary, chosen by the test."""

import json
import os

import pytest
from absl import flags

from roberta_tf.common import cli, error_text, quiet_start
from tests import harness
from tests.conftest import REPO


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


@pytest.mark.parametrize("module, args, line", [
    ("roberta_tf.export", ["--model_dir=m", "--export_dir=RAM://exp"],
     "error: --export_dir=RAM://exp: a URL's scheme is lower-case: write ram://exp"),
    ("roberta_tf.train", ["--model_dir=ram:/m", "--train_data=d"],
     "error: --model_dir=ram:/m: a URL takes two slashes after its scheme: write ram://m (for a "
     "local folder named 'ram:', ./ram:/m)"),
    ("roberta_tf.train", ["--model_dir=ram:/", "--train_data=d"],
     "error: --model_dir=ram:/: no path after the scheme: write ram://<directory>"),
])
def test_a_mistyped_url_is_one_line_naming_the_flag_and_nothing_is_written(module, args, line):
  result = harness.call_module(module, *args)
  assert result.returncode == 1 and result.stderr == line + "\n", result.stderr
  assert not os.path.exists(os.path.join(REPO, "ram:"))  # no local folder named after it


def test_the_quiet_start_knows_every_line_the_installed_tensorflow_prints_on_import():
  """common/quiet_start.py filters TensorFlow's import-time lines by a pattern written for one
  TF version: this fails when the installed TF is another version or prints a line the pattern
  does not know (read TF's start-up lines again and update quiet_start)."""
  code = ("import json; from roberta_tf.common import quiet_start; lines = []\n"
          "with quiet_start.captured_stderr(lines):\n  import tensorflow as tf\n"
          "print(json.dumps([tf.__version__, lines]))")
  # ROBERTA_TF_VERBOSE=1: the hook stays out, the lines are TF's own.
  result = harness.run_script(code, env=harness.module_env(ROBERTA_TF_VERBOSE="1"))
  assert result.returncode == 0, result.stderr
  version, lines = json.loads(result.stdout)
  assert version.startswith(quiet_start.TF_VERSION + "."), version
  assert [line for line in lines if not quiet_start.IMPORT_CHATTER.search(line)] == []


def test_a_failed_graph_op_is_its_own_message_not_graph_execution_error():
  """TF's "Graph execution error:" wraps an op's message after the stack where the op was
  defined (its text as TF 2.21 gives it, from fill_mask ranking past a position table); the one
  line is the op's message."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  message = ("Graph execution error:\n\nDetected at node GatherV2 defined at (most recent call "
             'last):\n  File "x.py", line 7, in <module>\n\n  File "x.py", line 5, in f\n\n'
             "indices[0] = 7 is not in [0, 5)\n\t [[{{node GatherV2}}]] [Op:__inference_f_8]")
  error = tf.errors.InvalidArgumentError(None, None, message)
  assert error_text.one_line(error) == "indices[0] = 7 is not in [0, 5)"
