"""The peer's text-embedding fine-tuning for the benchmarks: sentence-transformers' own trainer.

The model is the one roberta_tf.finetune --task=embedding trains, built from a
`convert_checkpoint --to_hf` folder as sentence-transformers builds one from any HF encoder:
`Transformer(hf_dir, max_seq_length=L)` + `Pooling(mean)` (over every real token, <s> and </s>
included) + `Normalize()`. It is trained by `SentenceTransformerTrainer` with
`MultipleNegativesRankingLoss(scale=20)` (cosine similarity of each anchor with every positive,
and hard negative, of the batch; cross-entropy of its own) on a `datasets.Dataset` of the same
rows, with roberta_tf.finetune's recipe (benchmarks/finetuning/hf_finetune.Recipe) as training
arguments: AdamW (torch's) beta2 0.98, epsilon 1e-6, weight decay on every parameter but biases and
LayerNorm (the Trainer's rule: ours, matrices only, is the same set), linear warmup over
round(6%) of the updates then linear decay to 0, no gradient clipping (max_grad_norm 0), dropout
0.1 (the folder's config), random batches (the default BATCH_SAMPLER; the last one partial, as
ours), fp32 on the CPU, `seed` for the order and dropout.

After every epoch a callback scores the dev set (its time is left out of the training time),
and keeps the weights of the best epoch by nDCG@10; that epoch's model is scored on the test set
at the end. Scoring is roberta_tf's (finetuning/embedding/embed_scores.py: ranking by cosine,
pytrec_eval's nDCG@10, MRR@10, Recall@100) on vectors from `SentenceTransformer.encode`, so both
sides of a benchmark are scored by the same code on the same texts (embed_data.read_beir's).

torch, transformers, sentence-transformers and datasets come from requirements-bench.txt.
"""

from __future__ import annotations

import time

from benchmarks.finetuning import hf_finetune
from roberta_tf.finetuning.embedding import embed_data, embed_scores


def build_model(hf_dir: str, max_seq_len: int, dropout: float):
  """Transformer + mean Pooling + Normalize from a --to_hf folder."""
  from sentence_transformers import SentenceTransformer  # pylint: disable=import-outside-toplevel
  from sentence_transformers.sentence_transformer import (  # pylint: disable=import-outside-toplevel
    modules,
  )
  transformer = modules.Transformer(
      hf_dir, max_seq_length=max_seq_len,
      config_kwargs={"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout})
  pooling = modules.Pooling(transformer.get_embedding_dimension(), pooling_mode="mean")
  return SentenceTransformer(modules=[transformer, pooling, modules.Normalize()], device="cpu")


def score(model, retrieval: embed_data.RetrievalSet, batch_size: int) -> dict:
  """nDCG@10, MRR@10 and Recall@100 of the model on a BEIR-style set (roberta_tf's scoring)."""
  encode = lambda texts: model.encode(texts, batch_size=batch_size, convert_to_numpy=True,
                                      show_progress_bar=False)
  run = embed_scores.ranking(encode(retrieval.queries), encode(retrieval.docs),
                             retrieval.query_ids, retrieval.doc_ids)
  return embed_scores.retrieval_scores(retrieval.qrels, run)


def _epoch_callback(model, dev: embed_data.RetrievalSet, batch_size: int):
  """A TrainerCallback timing each epoch's training, then scoring dev and keeping the best
  epoch's weights (`.epochs`, `.best_state`, `.best_epoch`)."""
  from transformers import TrainerCallback  # pylint: disable=import-outside-toplevel

  class EpochEnd(TrainerCallback):
    def __init__(self):
      self.epochs, self.best_state, self.best_epoch, self.start = [], None, 0, 0.0

    def on_epoch_begin(self, args, state, control, **kwargs):
      self.start = time.perf_counter()

    def on_epoch_end(self, args, state, control, **kwargs):
      train_seconds = time.perf_counter() - self.start
      start = time.perf_counter()
      metrics = score(model, dev, batch_size)
      model.train()
      epoch = len(self.epochs) + 1
      self.epochs.append({"epoch": epoch, "step": state.global_step, "dev": metrics,
                          "train_seconds": train_seconds,
                          "eval_seconds": time.perf_counter() - start})
      if self.best_state is None or metrics["ndcg_at_10"] > self.epochs[
          self.best_epoch - 1]["dev"]["ndcg_at_10"]:
        self.best_epoch = epoch
        self.best_state = {k: v.detach().clone() for k, v in model.state_dict().items()}

  return EpochEnd()


def _arguments(out_dir: str, recipe: hf_finetune.Recipe, seed: int, total_steps: int):
  from sentence_transformers import (  # pylint: disable=import-outside-toplevel
    SentenceTransformerTrainingArguments,
  )
  return SentenceTransformerTrainingArguments(
      output_dir=out_dir, num_train_epochs=recipe.epochs,
      per_device_train_batch_size=recipe.batch_size, learning_rate=recipe.learning_rate,
      lr_scheduler_type="linear",
      # ours: int(round(ratio * updates)) warmup updates (finetuning/task.py)
      warmup_steps=int(round(recipe.warmup_ratio * total_steps)),
      weight_decay=recipe.weight_decay, adam_beta1=0.9, adam_beta2=recipe.adam_beta2,
      adam_epsilon=recipe.adam_epsilon, max_grad_norm=0.0, seed=seed, data_seed=seed,
      use_cpu=True, save_strategy="no", eval_strategy="no", logging_strategy="epoch",
      report_to=[], disable_tqdm=True, dataloader_drop_last=False)


def finetune(hf_dir: str, train: list[tuple[str, ...]], dev: embed_data.RetrievalSet,
             test: embed_data.RetrievalSet, recipe: hf_finetune.Recipe, seed: int,
             out_dir: str, scale: float = 20.0, threads: int = 0) -> dict:
  """One sentence-transformers run.

  Args:
    train: rows of (anchor, positive[, negative]) texts.
    dev, test: BEIR-style sets (embed_data.read_beir).
    out_dir: the Trainer's output_dir (nothing is saved there but its logs).
  Returns:
    {"epochs": [{"epoch", "step", "dev", "train_seconds", "eval_seconds"}], "best_epoch",
     "best": its dev metrics, "best_test": its test metrics, "train_seconds" (the epochs'
     training, no evaluation), "steps", "log_history" (the Trainer's, with the epoch losses)}.
  """
  import datasets  # pylint: disable=import-outside-toplevel
  import torch  # pylint: disable=import-outside-toplevel
  from sentence_transformers import SentenceTransformerTrainer  # pylint: disable=import-outside-toplevel
  from sentence_transformers.sentence_transformer import (  # pylint: disable=import-outside-toplevel
    losses,
  )
  if threads:
    torch.set_num_threads(threads)
  torch.manual_seed(seed)
  model = build_model(hf_dir, recipe.max_seq_len, recipe.dropout)
  columns = ("anchor", "positive", "negative")[:len(train[0])]
  dataset = datasets.Dataset.from_dict({c: [row[i] for row in train]
                                        for i, c in enumerate(columns)})
  total_steps = recipe.epochs * -(-len(train) // recipe.batch_size)
  callback = _epoch_callback(model, dev, recipe.batch_size)
  trainer = SentenceTransformerTrainer(
      model=model, args=_arguments(out_dir, recipe, seed, total_steps), train_dataset=dataset,
      loss=losses.MultipleNegativesRankingLoss(model, scale=scale), callbacks=[callback])
  trainer.train()
  steps = trainer.state.global_step
  model.load_state_dict(callback.best_state)
  model.eval()
  best = callback.epochs[callback.best_epoch - 1]
  return {"epochs": callback.epochs, "best_epoch": callback.best_epoch, "best": best["dev"],
          "best_test": score(model, test, recipe.batch_size),
          "train_seconds": sum(e["train_seconds"] for e in callback.epochs), "steps": steps,
          "log_history": trainer.state.log_history}
