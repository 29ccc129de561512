"""The task type names (TF-free, so that `roberta_tf.finetune --help` starts instantly)."""

CLASSIFICATION = "classification"
REGRESSION = "regression"
MULTIPLE_CHOICE = "multiple_choice"
EXTRACTIVE_QA = "extractive_qa"
TASK_TYPES = (CLASSIFICATION, REGRESSION, MULTIPLE_CHOICE, EXTRACTIVE_QA)
