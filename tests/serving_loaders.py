"""An export run through the session-based loaders its consumers use, each in a fresh process.

TF Serving restores a SavedModel with the C++ `SavedModelBundle`: a TF1 session that runs the
export's restore op, then the signature's graph. `saved_model_cli run` (TensorFlow's own CLI) and
`tf.compat.v1.saved_model.loader.load` take the same path, so they stand in for it here. Neither
process imports tensorflow_text or roberta_tf: an export needs core TF ops only.
"""

import json
import os

import numpy as np

from tests.harness import console_script, module_command, module_env, run_command, run_script

# CPU only, TF quiet.
_ENV = module_env(CUDA_VISIBLE_DEVICES="")

# Argv: {export dir: {signature: {input: nested list}}}, output .npz. First checks that every op
# of each saved graph (functions included) is registered by core TensorFlow alone. Several
# exports load in one process (each in a Session of its own): one interpreter and TF import.
_TF1 = r"""
import json, sys
import numpy as np
import tensorflow as tf
from tensorflow.core.protobuf import saved_model_pb2
from tensorflow.python.framework import op_def_registry

runs, out_path = json.loads(sys.argv[1]), sys.argv[2]
out, unregistered = {}, set()
for i, (path, spec) in enumerate(runs.items()):
  saved = saved_model_pb2.SavedModel()
  with open(path + "/saved_model.pb", "rb") as f:
    saved.ParseFromString(f.read())
  graph = saved.meta_graphs[0].graph_def
  ops = {n.op for n in graph.node} | {n.op for f in graph.library.function for n in f.node_def}
  unregistered |= {op for op in ops if op_def_registry.get(op) is None}
  with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
    for name, inputs in spec.items():
      signature = meta.signature_def[name]
      feed = {signature.inputs[k].name: v for k, v in inputs.items()}
      fetch = {k: t.name for k, t in signature.outputs.items()}
      for k, v in sess.run(fetch, feed).items():
        out[f"{i}:{name}/{k}"] = v.astype("S") if v.dtype == object else v
print("unregistered ops:", sorted(unregistered))
np.savez(out_path, **out)
print("modules:", sorted(m for m in sys.modules
                         if m.split(".")[0] in ("roberta_tf", "tensorflow_text")))
"""


def _cli() -> list[str]:
  script = console_script("saved_model_cli")
  if os.path.isfile(script):  # the console script TensorFlow installs
    return [script]
  return module_command("tensorflow.python.tools.saved_model_cli")


def saved_model_cli_run(export_dir: str, signature: str, inputs: dict, outdir: str) -> dict:
  """`saved_model_cli run ... --input_exprs` on one signature; {output: array} (strings bytes).

  `inputs` maps input names to nested lists (no ';' inside strings: it separates inputs).
  """
  exprs = ";".join(f"{k}={json.dumps(v)}" for k, v in inputs.items())
  assert exprs.count(";") == len(inputs) - 1, "a ';' inside an input"
  cmd = _cli() + ["run", "--dir", export_dir, "--tag_set", "serve", "--signature_def",
                  signature, "--input_exprs", exprs, "--outdir", outdir]
  proc = run_command(cmd, env=_ENV)
  assert proc.returncode == 0, proc.stderr[-3000:]
  out = {}
  for name in os.listdir(outdir):
    value = np.load(os.path.join(outdir, name), allow_pickle=True)  # strings: object arrays
    out[name[: -len(".npy")]] = value.astype("S") if value.dtype == object else value
  return out


def tf1_session_run(export_dir: str, spec: dict, out_path: str) -> dict:
  """`tf.compat.v1.saved_model.loader.load` in a Session; runs each signature of `spec`
  ({signature: {input: nested list}}). Returns {"signature/output": array}."""
  return tf1_session_runs({export_dir: spec}, out_path)[export_dir]


def tf1_session_runs(runs: dict, out_path: str) -> dict:
  """`tf1_session_run` of several exports ({export dir: spec}) in one process. Returns
  {export dir: {"signature/output": array}}."""
  proc = run_script(_TF1, json.dumps(runs), out_path, env=_ENV)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "unregistered ops: []" in proc.stdout, proc.stdout
  assert "modules: []" in proc.stdout, proc.stdout
  got = dict(np.load(out_path))
  return {path: {k.split(":", 1)[1]: v for k, v in got.items() if k.startswith(f"{i}:")}
          for i, path in enumerate(runs)}


def assert_same(got: dict, want: dict, atol: float = 1e-5, prefix: str = "") -> None:
  """Same keys; floats within atol, everything else equal (strings as bytes)."""
  want = {prefix + k: v for k, v in want.items()}
  assert sorted(got) == sorted(want)
  for key, value in want.items():
    value = np.asarray(value)
    if value.dtype == object:
      value = value.astype("S")
    if value.dtype.kind in "fc":
      np.testing.assert_allclose(got[key], value, atol=atol, rtol=0, err_msg=key)
    else:
      np.testing.assert_array_equal(got[key], value, err_msg=key)
