"""RoBERTa pretraining and fine-tuning in TensorFlow 2 / Keras 3.

Importing the package, or any of its modules, changes nothing in the process: no environment
variable, no file descriptor, no import hook (tests/test_import_side_effects.py). Quieting
TensorFlow's start-up is the binaries' business: common/cli.py's `run` installs
common/quiet_start.py in a binary's own process before its `main` imports TensorFlow.
"""
