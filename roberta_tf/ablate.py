"""Reproduce the paper's ablations at small scale on your corpus (see roberta_tf/ablation).

  python -m roberta_tf.ablate --study=masking --work_dir=runs/ablate_masking
  python -m roberta_tf.ablate --study=input_format --work_dir=runs/ablate_input_format
  python -m roberta_tf.ablate --study=batch_size --corpus=my_corpus.jsonl --work_dir=DIR

Every arm of a study pretrains with the same token budget and seeds on the same corpus (shards
of its packing: input_format's arms differ in that, at equal real tokens per update), is
evaluated on one shared fixed-mask held-out set, and is fine-tuned on a small downstream problem
(docs-sections by default; --task_* for your own). Writes DIR/results.md (the table),
DIR/results.json and DIR/<study>.png (held-out perplexity against tokens seen). Rerunning the
same command continues an interrupted study (finished runs are kept). --work_dir and the
--task_* files may be URLs (gs://, ...: roberta_tf/common/files.py) on a file system every step's
process sees (each step is a process of its own: not ram://, which lives in one process).
"""

import os

from absl import app, flags

from roberta_tf.ablation.settings import StudySettings
from roberta_tf.common import cli, directory_lock, files, options

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# What every arm's commands take (--config, --warmup_fraction, --vocab_size, --train_flags,
# --task_*, --minimal_pairs, --pairs_per_paradigm): one flag per StudySettings field.
options.define_flags(StudySettings, FLAGS)
flags.DEFINE_enum("study", None, ["masking", "input_format", "batch_size", "recipe"],
                  "The ablation: masking (Table 1), input_format (Table 2: SEGMENT-PAIR / "
                  "SENTENCE-PAIR with NSP, FULL-SENTENCES, DOC-SENTENCES), batch_size (Table 3), "
                  "recipe (the budget recipe's choices one at a time, at equal wall clock: "
                  "--minutes).", flag_values=FLAGS)
flags.DEFINE_integer("parallel", 1, "Arm x seed runs at once (each arm then trains beside "
                     "another; ~2x the wall time of each run on 2 cores, about half the total).",
                     lower_bound=1, flag_values=FLAGS)
flags.DEFINE_float("minutes", 5.0, "--study=recipe: each arm's wall-clock budget in minutes "
                   "(train --train_minutes).", flag_values=FLAGS)
flags.DEFINE_string("corpus", "stdlib", "Pretraining corpus: files, globs, directories or "
                    "'stdlib' (the running Python's documentation, the embedded default).",
                    flag_values=FLAGS)
flags.DEFINE_string("work_dir", None, "Where vocab, shards, runs and results go (reused: "
                    "finished runs are kept).", flag_values=FLAGS)
flags.DEFINE_multi_string("arm", [], "Run only this arm of the study (its name in results.md; "
                          "repeat the flag for several; default: every arm).", flag_values=FLAGS)
flags.DEFINE_list("seeds", ["0"], "Seeds: every arm runs once per seed; the table shows mean "
                  "± half the range over them (one seed keeps each default study within "
                  "~30 min on 2 CPU cores; rerunning with more seeds adds their runs).",
                  flag_values=FLAGS)
flags.DEFINE_integer("steps", None, "Optimizer updates of the base arm (the token budget is "
                     "base_batch x steps for every arm). Default: 400 (masking, input_format), "
                     "1024 (batch_size).", flag_values=FLAGS)
flags.DEFINE_integer("base_batch", 32, "Batch of the base arm (default 32; input_format: 16, "
                     "its shorter-sequence arms scale it up; batch_size: 8, scaled 1x, 8x, "
                     "32x).", flag_values=FLAGS)
flags.DEFINE_float("base_lr", 1e-3, "Peak LR of the base arm (batch_size default 1e-4, the "
                   "paper's for its smallest batch; scaled x7 and x10 with the batch).",
                   flag_values=FLAGS)
flags.DEFINE_bool("overwrite", False, "Start the study over: delete what an earlier study wrote "
                  "in --work_dir (its settings, corpus subset, vocab, shards, runs, results).",
                  flag_values=FLAGS)
flags.mark_flags_as_required(["study", "work_dir"], flag_values=FLAGS)


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  settings = options.from_flags(StudySettings, FLAGS)
  for name in ("work_dir", "task_train", "task_dev", "minimal_pairs", "corpus"):
    if FLAGS[name].value:  # an unknown URL scheme: one line naming the flag
      files.check(FLAGS[name].value, f"--{name}")
  from roberta_tf.ablation import runner, studies  # pylint: disable=import-outside-toplevel
  for name in ("steps", "base_batch"):
    if FLAGS[name].value is not None and FLAGS[name].value < 1:
      raise app.UsageError(f"--{name}={FLAGS[name].value}: must be >= 1")
  if FLAGS.base_lr <= 0:
    raise app.UsageError(f"--base_lr={FLAGS.base_lr}: must be > 0")
  options.check_options(settings)  # --vocab_size, --task_epochs, --warmup_fraction, ...
  try:
    seeds = [int(s) for s in FLAGS.seeds]
  except ValueError as e:
    raise app.UsageError(f"--seeds={','.join(FLAGS.seeds)}: not a list of integers") from e
  if not seeds:
    raise app.UsageError("--seeds is empty")
  base_batch, base_lr, steps = FLAGS.base_batch, FLAGS.base_lr, FLAGS.steps or 400
  if FLAGS.study == "input_format":
    # 400 updates at batch 16 get the small model off the unigram plateau; 200 updates at 32
    # did not, nor did 400 at 12 for one arm, so batch 16 it is: 32 min here for the four arms
    # (the sentence-pair arm reads ~5x the sequences, padded to 128 slots).
    base_batch = base_batch if FLAGS["base_batch"].present else 16
  if FLAGS.study == "batch_size":  # the paper's base row (bsz 256, lr 1e-4), scaled down
    base_batch = base_batch if FLAGS["base_batch"].present else 8
    base_lr = base_lr if FLAGS["base_lr"].present else 1e-4
    steps = FLAGS.steps or 1024
  # Errors (StudyError, RunnerError, CorpusError: they name the flag, file or command) are one
  # line from cli.
  study = studies.select(studies.build(FLAGS.study, steps, base_batch, base_lr,
                                      minutes=FLAGS.minutes), FLAGS.arm)
  for path in (settings.task_train, settings.task_dev):
    if not files.isfile(path):
      raise ValueError(f"downstream problem file {path} does not exist "
                       "(--task_train/--task_dev)")
  # Absolute, as the printed commands give it (a URL stays as given).
  work_dir = (files.normalize(FLAGS.work_dir) if files.is_url(FLAGS.work_dir)
              else os.path.abspath(FLAGS.work_dir))  # local-only: a local path
  # One study a work dir: a second command there is refused (the first is unaffected).
  with directory_lock.DirectoryLock(work_dir, "--work_dir", holder="ablation"):
    runner.run_study(FLAGS.study, study, FLAGS.corpus, work_dir, seeds, settings,
                     overwrite=FLAGS.overwrite, parallel=FLAGS.parallel)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
