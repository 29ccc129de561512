"""--schedule=wsd (issue 62): warmup, the peak held, a decay of a set length and shape to a
floor, by update count or over a time budget's last share; --schedule=linear stays RoBERTa's."""

import numpy as np
import pytest
import tensorflow as tf

from roberta_tf.pretraining.train_config import TrainConfig
from roberta_tf.training.schedule import BudgetSchedule, WarmupLinearDecay, WarmupStableDecay


def _reference(step, peak, warmup, total, decay, shape, floor):
  """The WSD rate at `step` in float64, from the definition."""
  if step < warmup:
    return peak * step / warmup
  if step < total - decay:
    return peak
  done = min((step - (total - decay)) / decay, 1.0)
  return peak * floor + (peak - peak * floor) * (1 - (done if shape == "linear" else np.sqrt(done)))


@pytest.mark.parametrize("shape,floor", [("linear", 0.0), ("1-sqrt", 0.001), ("1-sqrt", 0.0)])
def test_wsd_follows_its_definition(shape, floor):
  schedule = WarmupStableDecay(1e-3, warmup_steps=10, total_steps=100, decay_steps=30,
                               shape=shape, decay_floor=floor)
  steps = np.arange(0, 110)
  ours = [float(schedule(s)) for s in steps]
  ref = [_reference(s, 1e-3, 10, 100, 30, shape, floor) for s in steps]
  np.testing.assert_allclose(ours, ref, rtol=1e-6, atol=1e-10)  # float32 of the peak
  assert ours[69] == ours[11] == np.float32(1e-3)  # held until the decay starts (70)
  assert ours[100] == ours[109] == np.float32(1e-3) * np.float32(floor)  # the floor, exactly


def test_the_rate_depends_on_the_length_only_through_the_decay_start():
  """A run of 1000 updates whose stable phase reached 60, and the run planned as 60 + 20."""
  long_run = WarmupStableDecay(1e-3, 10, 1000, 0)  # no decay: the peak to the end
  planned = WarmupStableDecay(1e-3, 10, 80, 20, shape="1-sqrt")
  assert [float(long_run(s)) for s in range(60)] == [float(planned(s)) for s in range(60)]
  assert float(long_run(999)) == np.float32(1e-3)
  with pytest.raises(ValueError, match="warmup_steps 10 \\+ decay_steps 80"):
    WarmupStableDecay(1e-3, 10, 80, 80)


def test_a_budget_decays_over_its_last_share():
  schedule = BudgetSchedule(1e-3, warmup_fraction=0.2, decay_fraction=0.4, shape="1-sqrt")
  rates = []
  for f in (0.1, 0.2, 0.59, 0.6, 0.7, 1.0):
    schedule.fraction.assign(f)
    rates.append(float(schedule(tf.constant(7))))  # the update count is ignored
  np.testing.assert_allclose(rates, [5e-4, 1e-3, 1e-3, 1e-3, 1e-3 * (1 - 0.5), 0.0], atol=1e-9)


def _cfg(**values):
  return TrainConfig.from_dict({"train_data": "d", "model_dir": "m", "train_steps": 100,
                                "warmup_steps": 10, **values})


def test_the_config_builds_the_schedule_of_its_flags():
  linear = _cfg().learning_rate_schedule()  # the default: RoBERTa's, as before
  assert type(linear) is WarmupLinearDecay and linear.get_config() == WarmupLinearDecay(
      6e-4, 10, 100).get_config()
  wsd = _cfg(schedule="wsd", decay_fraction=0.25, decay_shape="1-sqrt").learning_rate_schedule()
  assert (wsd.decay_steps, wsd.decay_start, wsd.shape) == (25, 75, "1-sqrt")
  budget = _cfg(schedule="wsd", decay_steps=30, train_minutes=5.0).learning_rate_schedule()
  assert (budget.warmup_fraction, budget.decay_fraction) == (0.1, 0.3)
  assert _cfg(train_minutes=5.0).learning_rate_schedule().decay_fraction is None


@pytest.mark.parametrize("values,message", [
    (dict(decay_steps=20), "--decay_steps set the decay of --schedule=wsd"),
    (dict(schedule="wsd", decay_steps=5, decay_fraction=0.1), "give one"),
    (dict(schedule="wsd", decay_steps=95), "--warmup_steps=10 \\+ the decay's 95 updates"),
    (dict(schedule="wsd", decay_from="m0/ckpt-5"), "--decay_from branches a decay of"),
    (dict(schedule="wsd", decay_fraction=0.95, train_minutes=1.0), "must be at most 1"),
])
def test_inconsistent_decay_flags_are_refused(values, message):
  with pytest.raises(ValueError, match=message):
    _cfg(**values).validate()
