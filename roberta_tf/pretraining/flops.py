"""FLOPs of one MLM training step, for MFU (model FLOPs utilization).

Counted as matmul FLOPs (2 per multiply-add), forward x 3 for forward + backward:

  encoder, per token:   2 * L * (4 H^2 + 2 H F)        (Q, K, V, output; FFN in and out)
  attention, per token: 2 * L * 2 * S * H              (scores QK^T and the weighted sum)
  MLM head, per masked slot: 2 * (H^2 + H V)           (transform dense and tied decoder)

  step FLOPs = 3 * sequences * (S * (encoder + attention) + P * head)

with S the padded length and P the prediction slots per sequence (the head computes all P
slots, used or not). Embedding lookups, LayerNorm, softmax and GELU are not counted (they are
not matmuls; < 2% at these sizes). MFU = step FLOPs / step time / peak FLOP/s.
"""


def train_step_flops(*, num_layers: int, hidden_size: int, intermediate_size: int,
                     vocab_size: int, seq_len: int, predictions_per_seq: int,
                     sequences: int) -> float:
  h, f, s = hidden_size, intermediate_size, seq_len
  per_token = 2 * num_layers * (4 * h * h + 2 * h * f) + 2 * num_layers * 2 * s * h
  head = 2 * (h * h + h * vocab_size)
  return 3.0 * sequences * (s * per_token + predictions_per_seq * head)
