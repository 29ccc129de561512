"""The problem heads on their own (`ClassificationHead`, `SpanHead`): the harness's layer checks, at
tiny dimensions."""

import numpy as np
import pytest

from roberta_tf.finetuning.heads import ClassificationHead, SpanHead
from tests.layer_testing import run_layer_test

B, S, H = 2, 6, 16


def _tokens(seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(B, S, H)).astype(np.float32)
  mask = (np.arange(S)[None, :] < np.array([6, 4])[:, None]).astype(np.int32)
  return x, mask


@pytest.mark.parametrize("num_outputs", [3, 1])  # classes; 1: regression, multiple choice
def test_classification_head_contract(num_outputs):
  # dense and out_proj, kernel + bias each (dropout has no weights).
  x, _ = _tokens()
  run_layer_test(ClassificationHead, {"num_outputs": num_outputs}, (x[:, 0],),
                 expected_output_shape=(B, num_outputs), expected_num_trainable_weights=4)


def test_span_head_contract():
  # qa_outputs' kernel + bias; built before its first call, as FinetuneModel builds it.
  x, mask = _tokens()
  _, (start, end) = run_layer_test(
      SpanHead, {}, {"x": x, "padding_mask": mask}, expected_output_shape=((B, S), (B, S)),
      expected_num_trainable_weights=2, build_shapes=((None, None, H),))
  pads = mask == 0
  assert (start[pads] <= -1e8).all() and (end[pads] <= -1e8).all()
  assert (np.abs(start[~pads]) < 10).all() and (np.abs(end[~pads]) < 10).all()


def test_span_head_builds_on_its_first_call():
  # build's argument names match call's (x_shape, padding_mask_shape), so Keras 3 can build
  # the two-input head from its first call.
  x, mask = _tokens()
  start, end = SpanHead()(x, padding_mask=mask)
  assert start.shape == end.shape == (B, S)
