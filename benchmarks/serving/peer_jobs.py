r"""One-off preparation steps of benchmarks/serving/vs_peers.py, each in its own process (the
driver imports neither TF nor torch):

    python -m benchmarks.serving.peer_jobs base_model '{"vocab_dir": V, "model_dir": M}'
    python -m benchmarks.serving.peer_jobs onnx '{"hf_dir": H, "fp32": F, "int8": Q}'

base_model: a `base` RobertaPretrainer (L12 H768 A12 F3072, max_seq_len 512, the vocabulary's
  size; random weights: speed does not depend on them) saved as a model dir with V's vocab files.
onnx: the HF folder H's RobertaForMaskedLM exported to ONNX as optimum's exporter does it
  (torch.onnx.export, TorchScript exporter, opset 17, inputs input_ids + attention_mask with
  dynamic batch and sequence axes, output `logits` [B, S, V]) to F, then onnxruntime's dynamic
  quantization of F (int8 weights, QInt8; activations quantized at run time) to Q.
"""

from __future__ import annotations

import json
import os
import sys


def base_model(vocab_dir: str, model_dir: str) -> None:
  from roberta_tf import models  # pylint: disable=import-outside-toplevel
  from roberta_tf.tokenization.vocab_files import copy_vocab_files  # pylint: disable=import-outside-toplevel
  with open(os.path.join(vocab_dir, "vocab.json"), encoding="utf-8") as f:
    vocab_size = len(json.load(f))
  config = models.preset("base", vocab_size=vocab_size, max_seq_len=512)
  models.save(model_dir, models.build_pretrainer(config))
  copy_vocab_files(vocab_dir, model_dir)
  print(f"{model_dir}: base L{config.num_layers} H{config.hidden_size} V{config.vocab_size}")


def onnx(hf_dir: str, fp32: str, int8: str) -> None:
  import torch  # pylint: disable=import-outside-toplevel
  import transformers  # pylint: disable=import-outside-toplevel
  from onnxruntime.quantization import QuantType, quantize_dynamic  # pylint: disable=import-outside-toplevel
  model = transformers.AutoModelForMaskedLM.from_pretrained(hf_dir).eval()
  model.config.return_dict = False  # a tuple out: the TorchScript exporter's need
  ids = torch.ones((2, 16), dtype=torch.int64)
  axes = {0: "batch", 1: "sequence"}
  with torch.inference_mode():
    torch.onnx.export(model, (ids, torch.ones_like(ids)), fp32 + ".tmp",
                      input_names=["input_ids", "attention_mask"], output_names=["logits"],
                      dynamic_axes={"input_ids": axes, "attention_mask": axes, "logits": axes},
                      opset_version=17, do_constant_folding=True, dynamo=False)
  os.replace(fp32 + ".tmp", fp32)
  quantize_dynamic(fp32, int8 + ".tmp", weight_type=QuantType.QInt8)
  os.replace(int8 + ".tmp", int8)
  mb = lambda p: os.path.getsize(p) / 2**20
  print(f"{fp32}: {mb(fp32):.0f} MB; {int8}: {mb(int8):.0f} MB")


JOBS = {"base_model": base_model, "onnx": onnx}


def main(argv: list[str]) -> int:
  if len(argv) != 3 or argv[1] not in JOBS:
    print(__doc__, file=sys.stderr)
    return 2
  JOBS[argv[1]](**json.loads(argv[2]))
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
