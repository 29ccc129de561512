"""The one SavedModel writer every export uses: atomic, and loadable by every SavedModel loader.

`save_atomically(module, export_dir)` saves the signatures of `module.signatures()` so that the
TF2 loader (`tf.saved_model.load`) and the session-based one (TF Serving's `SavedModelBundle`,
`saved_model_cli run`, `tf.compat.v1.saved_model.loader.load`) restore the same weights.

Why not `tf.saved_model.save(module)` on the module itself: a Keras 3 variable tracked through a
`tf.Module` is exported twice (keras-team/keras#20095). `keras.Variable` wraps a `tf.Variable`;
its `_export_to_saved_model_graph` exports the wrapped variable and then maps the Keras variable
to a *new* `tf.Variable` copied from it. The checkpoint's restore op writes that copy (the
object-graph node), while the traced signatures read the wrapped variable, which is no node at
all: the session loader never initializes it ("Could not find variable ..."). The TF2 loader
binds captures by node id, so it read the right values and hid the problem.

So the saved root holds only what the signatures use, as `keras.export.ExportArchive` does: the
functions, the `tf.Variable`s they capture (each once: the session loader's restore op writes
exactly them) and the module's resources (lookup tables, assets). Keras models stay outside the
saved object graph; nothing but the signatures is meant to be read from an export.
"""

from __future__ import annotations

import tensorflow as tf

from roberta_tf.common import atomic_write, files
from roberta_tf.tokenization import vocab_files

_KEPT = (tf.saved_model.experimental.TrackableResource, tf.saved_model.Asset)
# Files beside the graph that no loader reads (the SavedModel convention): every export keeps
# there the vocab.json + merges.txt (or tokenizer.json) its tokenizer was built from, so its
# vocabulary is known by content (fill_mask --held_out checks it against the shards').
EXTRA_DIR = "assets.extra"


def vocabulary_files(vocab_dir: str) -> dict[str, str]:
  """{path in the export: source} of `vocab_dir`'s vocabulary files, for `save_atomically`."""
  return {f"{EXTRA_DIR}/{name}": files.join(vocab_dir, name)
          for name in vocab_files.vocabulary_files(vocab_dir)}


def _captured_variables(functions) -> list[tf.Variable]:
  """The tf.Variables the functions' concrete traces read, each once, in first-use order."""
  seen, out = set(), []
  for fn in functions:
    for variable in fn.get_concrete_function().variables:
      if variable.ref() not in seen:
        seen.add(variable.ref())
        out.append(variable)
  return out


def _resources(module: tf.Module) -> list:
  """The lookup tables and assets reachable from `module` (what functions capture besides
  variables: they must be tracked for their handles to exist in the saved graph)."""
  return [obj for obj in tf.train.TrackableView(module).descendants()
          if isinstance(obj, _KEPT)]


def export_root(module: tf.Module) -> tuple[tf.Module, dict]:
  """(root to save, signatures) for `module`: see the module docstring.

  Args:
    module: a tf.Module whose `signatures()` returns {signature name: tf.function with an
      input_signature}; `serving_default` may alias another entry.
  Returns:
    root: a fresh tf.Module holding the functions (as attributes of the same names), the
      variables they read (`signature_variables`) and the resources (`resources`).
    signatures: the dict to pass to `tf.saved_model.save`.
  """
  signatures = module.signatures()
  root = tf.Module(name=module.name)
  unique = {}
  for name, fn in signatures.items():
    if name != "serving_default":
      unique[name] = fn
      setattr(root, name, fn)
  root.signature_variables = _captured_variables(unique.values())
  root.resources = _resources(module)
  return root, signatures


def save_atomically(module: tf.Module, export_dir: str,
                    extra_files: dict[str, str] | None = None) -> str:
  """Saves `module`'s signatures (see `export_root`) under a temporary name, renamed over
  `export_dir` when done. `extra_files` ({path in export_dir: source path}) are copied in
  before the rename (`vocabulary_files`).

  An interrupted save never leaves a directory that looks like a SavedModel. `export_dir` may
  be a URL (gs://, ram://, ...): the SavedModel is written locally and uploaded when complete
  (saved_model.pb last: atomic_write.atomic_dir). Returns the normalized `export_dir` (a URL
  stays a URL).
  """
  export_dir = files.normalize(export_dir)
  root, signatures = export_root(module)
  with atomic_write.atomic_dir(export_dir) as tmp:
    tf.saved_model.save(root, tmp, signatures=signatures)
    for name, src in (extra_files or {}).items():
      files.makedirs(files.dirname(files.join(tmp, name)))
      files.copy(src, files.join(tmp, name))  # `src` may be a URL
  return export_dir
