"""models/flops.py: a training step's FLOPs from what the layers compute, one hand count per
architecture option, and the MFU a gated training run logs against its hand count.

The hand counts use L 2, H 8, A 2, F 32, V 50, S 10 tokens, P 3 prediction slots, 4 sequences,
in multiply-adds (MACs; 2 FLOPs each), then x 3 for forward + backward.
"""

import os

import pytest

from roberta_tf import models
from roberta_tf.models import flops
from tests.harness import call_module

SMALL = dict(num_layers=2, hidden_size=8, num_heads=2, intermediate_size=32, vocab_size=50,
             max_positions=12, type_vocab_size=0)
COUNT = dict(seq_len=10, predictions_per_seq=3, sequences=4)

# Post-LN RoBERTa, per layer, per token: Q, K, V, output 4 x 8 x 8 = 256; FFN in 8 x 32 = 256,
# out 32 x 8 = 256: 768 MACs, x 2 FLOPs x 10 tokens = 15,360. Attention: QK^T 10 x 10 x 8 = 800
# and PV 800 MACs: 3,200 FLOPs. Per layer 18,560; 2 layers 37,120. MLM head per slot: dense
# 8 x 8 = 64 + tied decoder 8 x 50 = 400 = 464 MACs, x 2 x 3 slots = 2,784. A sequence's forward:
# 39,904; the step: 3 x 4 x 39,904.
POST_LN = 3 * 4 * 39_904
# Gated (GEGLU): the gate is a second 8 x 32 input projection: + 256 MACs per token per layer,
# + 2 x 10 x 256 x 2 layers = 10,240 FLOPs a forward: 50,144.
GATED = 3 * 4 * 50_144


def test_post_layer_norm_against_the_hand_count():
  config = models.RobertaConfig(**SMALL)
  assert flops.train_step_flops(config.flop_terms(), **COUNT) == POST_LN == 478_848
  # NSP ablation: the pooler 8 x 8 and classifier 8 x 2 once per sequence: 2 x 80 FLOPs more.
  nsp = config.replace(next_sentence_head=True, type_vocab_size=2)
  assert flops.train_step_flops(nsp.flop_terms(), **COUNT) == 3 * 4 * (39_904 + 160)


def test_pre_layer_norm_adds_no_matmul():
  """Pre-LN moves the LayerNorms and adds a final one: elementwise, not counted, so the count is
  post-LN's (the module docstring says why norms are not counted)."""
  config = models.RobertaConfig(**SMALL, pre_layer_norm=True)
  assert flops.train_step_flops(config.flop_terms(), **COUNT) == POST_LN


def test_gated_feed_forward_against_the_hand_count():
  config = models.RobertaConfig(**SMALL, gated_ffn=True)
  assert flops.train_step_flops(config.flop_terms(), **COUNT) == GATED == 601_728


def test_no_bias_changes_no_matmul():
  """Biases are adds, not multiply-adds: use_bias=false (with gated_ffn=true here) counts
  gated's."""
  config = models.RobertaConfig(**SMALL, use_bias=False, gated_ffn=True)
  assert flops.train_step_flops(config.flop_terms(), **COUNT) == GATED


def test_windowed_attention_against_the_hand_count():
  """A family with a global layer and two windowed ones (window 4: keys within 2 positions, as
  ModernBERT's local layers), fused QKV and a GEGLU of width 16, given as a family gives them.

  Projections per token: QKV 8 x 24 = 192, output 64, GEGLU in 8 x 32 = 256, out 16 x 8 = 128:
  640 MACs, 12,800 FLOPs per layer. Global attention: 3,200 FLOPs as above. Windowed: query 0
  meets keys 0-2 (3), query 1 keys 0-3 (4), queries 2-7 five each (30), query 8 four, query 9
  three: 44 pairs (not 10 x min(10, 4 + 1) = 50), x 8 x 2 matmuls x 2 = 1,408 FLOPs. Layers:
  16,000 + 2 x 14,208 = 44,416; head 2,784 as above; forward 47,200."""
  assert flops.attention_pairs(10, 4) == 44
  assert flops.attention_pairs(10, None) == flops.attention_pairs(10, 18) == 100
  assert flops.attention_pairs(3, 128) == 9  # a window wider than the sequence is global
  work = flops.ModelWork(
      layers=(flops.LayerWork(640, 8), flops.LayerWork(640, 8, window=4),
              flops.LayerWork(640, 8, window=4)), head_macs=464)
  assert flops.train_step_flops(work, **COUNT) == 3 * 4 * 47_200


@pytest.mark.parametrize("options", [{}, {"pre_layer_norm": True}, {"gated_ffn": True},
                                     {"use_bias": False, "gated_ffn": True}])
def test_the_terms_are_the_built_models_kernels(options):
  """projection_macs is the size of the Dense kernels a built layer holds (each H x out kernel
  does H x out multiply-adds per token), and head_macs the MLM head's dense kernel plus the
  tied decoder: a projection added to the layer without a term fails here."""
  config = models.RobertaConfig(**SMALL, **options)
  model = models.RobertaPretrainer(config)
  work = config.flop_terms()
  for i in range(config.num_layers):
    layer = model.encoder.get_layer(f"transformer_layer_{i}")
    kernels = [w for w in layer.weights if w.path.endswith("/kernel")]
    assert sum(int(w.shape[0]) * int(w.shape[1]) for w in kernels) == (
        work.layers[i].projection_macs)
  assert model.mlm_head.intermediate_dense.kernel.shape.num_elements() + (
      config.vocab_size * config.hidden_size) == work.head_macs


def test_non_gated_count_is_the_one_recorded_figures_used():
  """base, 512 tokens: the count every recorded MFU used (2L(4H^2 + 2HF) + 4LSH per token, the
  head per slot), unchanged for non-gated models; gated, 28% more (the old count, the same for
  both, was 22% low: 23% of the encoder's FLOPs)."""
  config = models.preset("base")
  h, f, layers, s, p = 768, 3072, 12, 512, 77
  old = 3.0 * 8 * (s * (2 * layers * (4 * h * h + 2 * h * f) + 4 * layers * s * h)
                   + p * 2 * (h * h + h * config.vocab_size))
  count = dict(seq_len=s, predictions_per_seq=p, sequences=8)
  assert flops.train_step_flops(config.flop_terms(), **count) == old
  gated = flops.train_step_flops(config.replace(gated_ffn=True).flop_terms(), **count)
  assert 1 - old / gated == pytest.approx(0.22, abs=0.005)


@pytest.mark.slow  # see pyproject.toml's markers
@pytest.mark.timeout(300)
def test_mfu_of_a_gated_run_is_the_hand_count_over_step_time(train_shards, tmp_path):
  """A 2-step tiny run with --model_option=gated_ffn=true and --peak_flops=1e9: the MFU it
  logs is the hand count's step FLOPs x steps per second / the peak, steps per second being
  the run's own examples_per_sec / batch size (the same window, logged beside it)."""
  model_dir = str(tmp_path / "run")
  run = call_module("roberta_tf.train", "--flagfile=flags/tiny.flags",
                    "--model_option=gated_ffn=true",
                    f"--train_data={train_shards}", f"--model_dir={model_dir}",
                    "--max_seq_len=64", "--batch_size=4", "--max_predictions_per_seq=10",
                    "--train_steps=2", "--warmup_steps=1", "--log_every=2",
                    "--checkpoint_every=2", "--peak_flops=1e9")
  assert run.returncode == 0, run.stderr[-3000:]
  # tiny, gated, per token per layer: Q, K, V, output 4 x 128^2 = 65,536; gate and input
  # 2 x 128 x 512 = 131,072; output 512 x 128 = 65,536: 262,144 MACs, x 2 x 64 tokens x 2
  # layers = 67,108,864 FLOPs; attention 4 x 64^2 x 128 x 2 layers = 4,194,304; the head
  # 10 slots x 2 x (128^2 + 128 x 8000) = 20,807,680. Forward 92,110,848; x 3 x 4 sequences.
  step_flops = 3 * 4 * 92_110_848
  assert flops.train_step_flops(models.read_config(model_dir).flop_terms(), seq_len=64,
                                predictions_per_seq=10, sequences=4) == step_flops
  train = _train_scalars(model_dir)
  steps_per_second = train["perf/examples_per_sec"] / 4
  assert train["perf/mfu"] == pytest.approx(step_flops * steps_per_second / 1e9, rel=1e-5)


def _train_scalars(model_dir: str) -> dict[str, float]:
  """{tag: value} of the train run's event files at step 2 (TensorBoard's own reader)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from tensorboard.backend.event_processing import event_accumulator  # pylint: disable=g-import-not-at-top
  acc = event_accumulator.EventAccumulator(os.path.join(model_dir, "train"),
                                           size_guidance={"tensors": 0})
  acc.Reload()
  return {tag: float(tf.make_ndarray(e.tensor_proto)) for tag in ("perf/mfu",
                                                                   "perf/examples_per_sec")
          for e in acc.Tensors(tag) if e.step == 2}
