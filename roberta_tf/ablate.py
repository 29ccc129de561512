"""Reproduce the paper's ablations at small scale on your corpus (see roberta_tf/ablation).

  python -m roberta_tf.ablate --study=masking --work_dir=runs/ablate_masking
  python -m roberta_tf.ablate --study=input_format --work_dir=runs/ablate_input_format
  python -m roberta_tf.ablate --study=batch_size --corpus=my_corpus.jsonl --work_dir=DIR
  python -m roberta_tf.ablate --study=modern --minutes=12 --paired --seeds=0,1,2 \
      --extra_arm='mine: --family=modernbert --config=tiny' --work_dir=DIR

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

from absl import app

from roberta_tf.ablation.settings import StudyPlan, StudySettings
from roberta_tf.common import cli, directory_lock, files, options
from roberta_tf.serving import frozen_weights

FLAGS = cli.binary_flags()  # this binary's flags (common/cli.py)
# --study, --steps, --seeds, --arm, ... (StudyPlan) and what every arm's commands take
# (--config, --warmup_fraction, --vocab_size, --train_flags, --task_*, --minimal_pairs, ...:
# StudySettings): one flag per field.
options.define_flags(StudyPlan, FLAGS)
options.define_flags(StudySettings, FLAGS)


def main(argv):
  frozen_weights.refuse_in_training()  # every arm trains: refuse now, not in its first step
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  # Each option's checks run here (--steps, --seeds, --vocab_size, the paths' URLs, ...).
  settings = options.from_flags(StudySettings, FLAGS)
  plan = options.from_flags(StudyPlan, FLAGS)
  from roberta_tf.ablation import runner, studies  # pylint: disable=import-outside-toplevel
  plan = plan.resolved({name for name in ("steps", "base_batch", "base_lr")
                        if FLAGS[name].present})
  # Errors (StudyError, RunnerError, CorpusError: they name the flag, file or command) are one
  # line from cli.
  study = studies.select(studies.build(plan.study, plan.steps, plan.base_batch, plan.base_lr,
                                       minutes=plan.minutes, extra_arms=plan.extra_arm),
                         list(plan.arm))
  for path in (settings.task_train, settings.task_dev):
    if not files.isfile(path):
      raise ValueError(f"downstream problem file {path} does not exist "
                       "(--task_train/--task_dev)")
  # Absolute, as the printed commands give it (a URL stays as given).
  work_dir = (files.normalize(plan.work_dir) if files.is_url(plan.work_dir)
              else os.path.abspath(plan.work_dir))  # local-only: a local path
  # One study a work dir: a second command there is refused (the first is unaffected).
  with directory_lock.DirectoryLock(work_dir, "--work_dir", holder="ablation"):
    runner.run_study(plan.study, study, plan.corpus, work_dir, list(plan.seeds), settings,
                     overwrite=plan.overwrite, parallel=plan.parallel, paired=plan.paired,
                     records=plan.records)
  return 0


def console_main():
  cli.run(main, FLAGS)


if __name__ == "__main__":
  console_main()
