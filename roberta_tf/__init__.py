"""RoBERTa pretraining and fine-tuning in TensorFlow 2 / Keras 3.

Importing the package quiets TensorFlow's start-up (common/quiet_start.py: TF_CPP_MIN_LOG_LEVEL=3
unless set, TF's import-time lines filtered) before any of its modules can import TensorFlow;
TF_CPP_MIN_LOG_LEVEL=0 or ROBERTA_TF_VERBOSE=1 keeps everything TensorFlow prints.
"""

from roberta_tf.common import quiet_start

quiet_start.install()
