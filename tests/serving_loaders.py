"""An export run through its real consumers, all in ONE fresh process per test module.

TF Serving restores a SavedModel with the C++ `SavedModelBundle`: a TF1 session that runs the
export's restore op, then the signature's graph. `tf.compat.v1.saved_model.loader.load` and
`saved_model_cli run` (TensorFlow's own CLI) take the same path, so they stand in for it here;
`tf.saved_model.load` is the TF2 loader (what keras and Python clients use). `loader_runs` runs
both loaders on every export it is given in one interpreter that imports neither
tensorflow_text nor roberta_tf (an export needs core TF ops only: both loaders refuse a graph
with an op that is not registered, "Op type not registered"), so a test
module pays for one interpreter start and TensorFlow import, not one per loader and export.
"""

import json
import os

import numpy as np

from tests.harness import console_script, module_env, run_command, run_script

# CPU only, TF quiet; served as README's "Serving" says (oneDNN keeps the weights packed:
# serving/frozen_weights.py), so every comparison with the exporting process's answers (which
# re-pack per call, tests/conftest.py) also checks that the packed weights give the same answers.
_ENV = module_env(CUDA_VISIBLE_DEVICES="", TF_ONEDNN_ASSUME_FROZEN_WEIGHTS="1")

# Argv: {export dir: [[key, signature, {input: nested list}], ...]}, output .npz[, export dirs
# the TF1 loader skips]. For each export, each call through tf.saved_model.load ("tf2:") and
# through a TF1 Session of its own ("tf1:"); loading fails on an op core TensorFlow does not
# register. Keys: "<loader>:<export index>:<key>/<output>".
_LOADERS = r"""
import json, sys
import numpy as np
import tensorflow as tf

runs, out_path, loaders = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3].split(",")
tf2_only = set(json.loads(sys.argv[4])) if len(sys.argv) > 4 else set()
out = {}
def keep(prefix, outputs):
  for k, v in outputs.items():
    out[f"{prefix}/{k}"] = v.astype("S") if v.dtype == object else v  # npz: no pickled objects
for i, (path, calls) in enumerate(runs.items()):
  loaded = tf.saved_model.load(path) if "tf2" in loaders else None
  for key, name, inputs in calls if loaded else ():
    outputs = loaded.signatures[name](**{k: tf.constant(v) for k, v in inputs.items()})
    keep(f"tf2:{i}:{key}", {k: v.numpy() for k, v in outputs.items()})
  if "tf1" not in loaders or path in tf2_only:
    continue
  with tf.compat.v1.Session(graph=tf.Graph()) as sess:
    meta = tf.compat.v1.saved_model.loader.load(sess, ["serve"], path)
    for key, name, inputs in calls:
      signature = meta.signature_def[name]
      feed = {signature.inputs[k].name: v for k, v in inputs.items()}
      keep(f"tf1:{i}:{key}", sess.run({k: t.name for k, t in signature.outputs.items()}, feed))
np.savez(out_path, **out)
print("modules:", sorted(m for m in sys.modules
                         if m.split(".")[0] in ("roberta_tf", "tensorflow_text")))
"""


def loader_runs(runs: dict, out_path: str, loaders: tuple = ("tf2", "tf1"), tf2_only=(),
                timeout: float = 300) -> dict:
  """Each export's calls through the TF2 and the TF1 loader, in one fresh process.

  Args:
    runs: {export dir: [(key, signature, {input: nested list}), ...]}; `key` names the call
      (a signature may be called with several inputs).
    out_path: where the child writes its .npz.
    loaders: the loaders to run ("tf1" alone when the test process loads with the TF2 one:
      each signature's first call costs seconds of graph optimization a loader).
    tf2_only: export dirs of `runs` the TF1 loader skips (their "tf1" dicts are empty).
    timeout: seconds for the child.
  Returns:
    {loader: {export dir: {"<key>/<output>": array}}} (strings as bytes) for each of
    `loaders`.
  """
  proc = run_script(_LOADERS, json.dumps(runs), out_path, ",".join(loaders),
                    json.dumps(list(tf2_only)), env=_ENV, timeout=timeout)
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "modules: []" in proc.stdout, proc.stdout
  got = dict(np.load(out_path))
  return {loader: {path: {k.split(":", 2)[2]: v for k, v in got.items()
                          if k.startswith(f"{loader}:{i}:")}
                   for i, path in enumerate(runs)}
          for loader in loaders}


def _cli() -> list[str]:
  script = console_script("saved_model_cli")  # the console script TensorFlow's wheel installs
  assert os.path.isfile(script), f"{script} is missing: is tensorflow installed in this venv?"
  return [script]


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


def outputs_of(loaded: dict, key: str) -> dict:
  """{output: array} of one call's outputs in a loader_runs(...)[loader][export dir] dict."""
  return {k.split("/", 1)[1]: v for k, v in loaded.items() if k.split("/", 1)[0] == key}
