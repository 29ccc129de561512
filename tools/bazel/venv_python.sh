#!/bin/sh
# The Python interpreter of every py_binary/py_test: the workspace's .venv (the README's setup
# makes it; its site-packages are the third-party dependencies). Bazel runs this script from
# the runfiles tree, where it is a symlink to tools/bazel/venv_python.sh in the workspace, so
# the workspace is found relative to the resolved script: no machine-specific path anywhere.
# ROBERTA_TF_VENV names another venv (.ci/run passes its .venv-ci with --test_env).
workspace=$(dirname "$(dirname "$(dirname "$(readlink -f "$0")")")")
python="${ROBERTA_TF_VENV:-$workspace/.venv}/bin/python"
if [ ! -x "$python" ]; then
  echo "tools/bazel/venv_python.sh: $python not found: create the venv first" \
       "(python3.11 -m venv .venv && .venv/bin/pip install -r requirements-dev.txt)" >&2
  exit 1
fi
exec "$python" "$@"
