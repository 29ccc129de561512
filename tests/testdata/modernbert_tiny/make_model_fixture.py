"""Makes this folder's model fixture with transformers (torch): run from the repository root,
`python tests/testdata/modernbert_tiny/make_model_fixture.py` (needs torch + transformers; the
tests that read the fixture do not).

Writes config.json and model.safetensors (a random tiny ModernBertForMaskedLM, save_pretrained)
and expected.npz: HF eager float32 outputs on
- a padded batch of random ids (lengths 40, 27, 13 with [CLS] ... [SEP], [PAD] after), whose
  texts span several local windows: `batch_*`, logits and last_hidden_state at every real
  position (row-major order of attention_mask == 1);
- one sequence of 8,100 tokens: `long_input_ids`, logits and last_hidden_state at
  `long_positions` (a sample), and at every position the logits' logsumexp and the projections
  logits @ r_v and last_hidden_state @ r_h on fixed random vectors (`long_*_checks`).
task_heads.npz: random heads (head.dense, head.norm, classifier; 3 labels, QA's 2) of
ModernBertForSequenceClassification (with "cls" and with "mean" pooling: the same weights) and
ModernBertForTokenClassification on this model's encoder, and their logits on the padded batch
(`seq_logits_cls`, `seq_logits_mean` [3, 3]; `token_logits` at the real positions); then
(drawn after those, so they stay as they were) ModernBertForMultipleChoice's (`choice/`, the
batch's 3 rows as the 3 options of one example: `choice_logits_cls`, `choice_logits_mean`
[1, 3]) and ModernBertForQuestionAnswering's (`qa/`: `qa_start_logits`, `qa_end_logits` at the
real positions); tests assemble the HF folders from them and model.safetensors' `model.*`
tensors. `python .../make_model_fixture.py --task_heads` rewrites task_heads.npz only, on the
committed model.safetensors and expected.npz's batch.
The init std is 0.2 (not 0.02) and the LayerNorm weights and the decoder bias are perturbed,
so that each mistake of modernbert.md section 4 moves the logits by far more than 1e-4.
Measured on the padded batch (max |logit diff| at real positions; correct: 1.5e-6): interleaved
RoPE 1.09, swapped global/local theta 0.42, one theta everywhere 0.24, window < instead of <=
0.75, no window 1.13, GeGLU halves swapped 3.46, tanh GELU 9.2e-4, a LayerNorm (gamma 1) on
layer 0's attention input 0.15, no MLM head transform 7.75, no decoder bias 1.45.
"""

import os

import numpy as np
import torch
import sys

from transformers import (ModernBertConfig, ModernBertForMaskedLM, ModernBertForMultipleChoice,
                          ModernBertForQuestionAnswering, ModernBertForSequenceClassification,
                          ModernBertForTokenClassification)

HERE = os.path.dirname(os.path.abspath(__file__))
VOCAB, UNK, CLS, SEP, PAD, MASK = 1024, 1019, 1020, 1021, 1022, 1023
LENGTHS = (40, 27, 13)
LONG = 8100


def build_model():
  torch.manual_seed(0)
  config = ModernBertConfig(
      vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=5,
      num_attention_heads=2, max_position_embeddings=8192, initializer_range=0.2,
      pad_token_id=PAD, bos_token_id=CLS, cls_token_id=CLS, eos_token_id=SEP,
      sep_token_id=SEP, global_attn_every_n_layers=3, local_attention=16,
      global_rope_theta=160000.0, local_rope_theta=10000.0, classifier_pooling="mean",
      attn_implementation="eager")
  model = ModernBertForMaskedLM(config).eval()
  with torch.no_grad():
    for name, p in model.named_parameters():
      if name.endswith("norm.weight"):
        p.copy_(1.0 + 0.2 * torch.randn_like(p))
      elif name == "decoder.bias":
        p.copy_(0.5 * torch.randn_like(p))
  return model


def random_ids(rng, n):
  return rng.integers(0, UNK, n)


def run(model, ids, mask):
  with torch.no_grad():
    inputs = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
    return model(**inputs).logits.numpy(), model.model(**inputs).last_hidden_state.numpy()


def main():
  model = build_model()
  model.save_pretrained(HERE)
  rng = np.random.default_rng(0)
  width = max(LENGTHS)
  ids = np.full((len(LENGTHS), width), PAD, np.int64)
  mask = np.zeros_like(ids)
  for row, n in enumerate(LENGTHS):
    ids[row, :n] = np.concatenate([[CLS], random_ids(rng, n - 2), [SEP]])
    mask[row, :n] = 1
  logits, hidden = run(model, ids, mask)
  real = mask.astype(bool)
  long_ids = np.concatenate([[CLS], random_ids(rng, LONG - 2), [SEP]])[None]
  long_logits, long_hidden = run(model, long_ids, np.ones_like(long_ids))
  long_logits, long_hidden = long_logits[0], long_hidden[0]
  positions = np.unique(np.concatenate([[0, 1, 7, 8, 9, LONG - 1],
                                        rng.integers(0, LONG, 18)]))
  checks = np.random.default_rng(1)
  r_v = checks.standard_normal(VOCAB).astype(np.float32)
  r_h = checks.standard_normal(32).astype(np.float32)
  top = long_logits.max(-1, keepdims=True)
  logsumexp = (top[:, 0] + np.log(np.exp(long_logits - top).sum(-1)))
  np.savez_compressed(
      os.path.join(HERE, "expected.npz"),
      batch_input_ids=ids.astype(np.int32), batch_attention_mask=mask.astype(np.int32),
      batch_logits=logits[real].astype(np.float32),
      batch_last_hidden_state=hidden[real].astype(np.float32),
      long_input_ids=long_ids[0].astype(np.int16), long_positions=positions.astype(np.int32),
      long_logits=long_logits[positions].astype(np.float32),
      long_last_hidden_state=long_hidden[positions].astype(np.float32),
      long_logsumexp=logsumexp.astype(np.float32), check_vocab=r_v, check_hidden=r_h,
      long_logit_checks=(long_logits @ r_v).astype(np.float32),
      long_hidden_checks=(long_hidden @ r_h).astype(np.float32))
  task_heads(model, ids, mask)
  print("wrote", sorted(os.listdir(HERE)), "logit range", float(np.abs(logits[real]).max()))


def task_heads(mlm, ids, mask):
  """Writes task_heads.npz (see the module docstring)."""
  torch.manual_seed(1)
  encoder = {k: v for k, v in mlm.state_dict().items() if k.startswith("model.")}
  heads, out = {}, {}
  inputs = {"input_ids": torch.tensor(ids), "attention_mask": torch.tensor(mask)}
  for kind, cls in (("seq", ModernBertForSequenceClassification),
                    ("token", ModernBertForTokenClassification),
                    ("choice", ModernBertForMultipleChoice),
                    ("qa", ModernBertForQuestionAnswering)):
    values = {k: v for k, v in mlm.config.to_dict().items() if k not in ("id2label", "label2id")}
    labels = 2 if kind == "qa" else 3  # QA: start and end
    model = cls(ModernBertConfig.from_dict({**values, "num_labels": labels})).eval()
    model.load_state_dict(encoder, strict=False)
    with torch.no_grad():
      for name, p in model.named_parameters():
        if name.startswith("model."):
          continue
        p.copy_((1.0 if name.endswith("norm.weight") else 0.0) + 0.3 * torch.randn_like(p))
        heads[f"{kind}/{name}"] = p.numpy().copy()
      if kind == "token":
        out["token_logits"] = model(**inputs).logits.numpy()[mask.astype(bool)]
        continue
      if kind == "qa":
        both = model(**inputs)
        out["qa_start_logits"] = both.start_logits.numpy()[mask.astype(bool)]
        out["qa_end_logits"] = both.end_logits.numpy()[mask.astype(bool)]
        continue
      for pooling in ("cls", "mean"):
        model.config.classifier_pooling = pooling
        if kind == "choice":
          grouped = {k: v[None] for k, v in inputs.items()}  # [1 example, 3 options, S]
          out[f"choice_logits_{pooling}"] = model(**grouped).logits.numpy()
        else:
          out[f"seq_logits_{pooling}"] = model(**inputs).logits.numpy()
  np.savez_compressed(os.path.join(HERE, "task_heads.npz"), **heads, **out)


def rewrite_task_heads():
  """task_heads.npz again, on the committed model and batch."""
  model = ModernBertForMaskedLM.from_pretrained(HERE, attn_implementation="eager").eval()
  batch = np.load(os.path.join(HERE, "expected.npz"))
  task_heads(model, batch["batch_input_ids"].astype(np.int64),
             batch["batch_attention_mask"].astype(np.int64))
  print("wrote task_heads.npz")


if __name__ == "__main__":
  if sys.argv[1:] == ["--task_heads"]:
    rewrite_task_heads()
  else:
    main()
