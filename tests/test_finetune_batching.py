"""Fine-tuning batches without wasted padding (roberta_tf/finetuning/bucketing.py): the length
ladder, length-bucketed epochs (a permutation; few shapes; the same updates however split into
micro-batches), and the same training and dev metrics as batches padded to max_seq_len."""

import numpy as np
import pytest

from roberta_tf.finetuning import bucketing, finetuned_dir, problem_loading, sweep_runner
from roberta_tf.finetuning.finetune_config import FinetuneConfig
from tests import finetune_fixtures as fx


def test_length_ladder():
  assert bucketing.length_ladder(512) == [16, 32, 48, 64, 96, 128, 192, 256, 384, 512]
  assert bucketing.length_ladder(48) == [16, 32, 48]
  assert bucketing.length_ladder(100) == [16, 32, 48, 64, 96, 100]
  assert bucketing.length_ladder(8) == [8]


def test_length_bucket_order_is_a_seeded_permutation_of_whole_updates():
  rng = np.random.default_rng(0)
  lengths = rng.integers(3, 500, size=1000)
  ladder = bucketing.length_ladder(512)
  order = bucketing.train_order(lengths, 32, seed=7, batching="length_buckets", ladder=ladder)
  assert sorted(order) == list(range(1000))
  np.testing.assert_array_equal(order, bucketing.train_order(lengths, 32, 7, "length_buckets",
                                                             ladder))
  assert not np.array_equal(order, bucketing.train_order(lengths, 32, 8, "length_buckets",
                                                         ladder))
  bucket = np.searchsorted(ladder, lengths)
  mixed = sum(len(set(bucket[order[i:i + 32]])) > 1 for i in range(0, 992, 32))
  assert mixed <= len(ladder)  # only an update at a bucket's edge holds two buckets
  padded = sum(ladder[bucket[order[i:i + 32]].max()] * 32 for i in range(0, 1000, 32))
  random = bucketing.train_order(lengths, 32, 7, "random", ladder)
  padded_random = sum(ladder[bucket[random[i:i + 32]].max()] * 32 for i in range(0, 1000, 32))
  assert padded < 0.7 * padded_random  # far fewer pad tokens than random batches
  # random and max_seq_len: the same permutation (they differ only in padding)
  np.testing.assert_array_equal(random, bucketing.train_order(lengths, 32, 7, "max_seq_len",
                                                              ladder))


@pytest.fixture(scope="module")
def data(tmp_path_factory, hf_tiny_dir):
  root = tmp_path_factory.mktemp("batching")
  paths = {"pretrained": fx.pretrained_model_dir(hf_tiny_dir, str(root / "pretrained"))}
  for split, n, seed in (("train", 96, 0), ("dev", 32, 1)):
    rows = fx.sentiment_rows(n, seed)
    for i, row in enumerate(rows):  # lengths across several rungs of the ladder
      row["sentence"] = row["sentence"] + " and so on" * (i % 7)
    paths[split] = fx.write_table(str(root / f"{split}.tsv"), rows)
  return paths


def _config(data, out, **overrides):
  values = dict(task="classification", model_dir=str(out), train_file=data["train"],
                eval_file=data["dev"], init_from=data["pretrained"], max_seq_len=64,
                batch_size=16, epochs=2, learning_rate=2e-3, text_fields=("sentence",),
                seeds=1, dropout=0.0)
  values.update(overrides)
  return FinetuneConfig.from_dict(values)


def test_batches_have_few_shapes_and_micro_batches_split_the_same_updates(data, hf_tiny_dir):
  cfg = _config(data, "unused", batching="length_buckets")
  problem = problem_loading.load_problem(cfg, finetuned_dir.load_tokenizer(hf_tiny_dir))
  ladder = bucketing.length_ladder(64)
  whole = list(problem.train_dataset(16, seed=3))
  shapes = {tuple(inputs["input_ids"].shape) for inputs, _ in whole}
  assert {s[1] for s in shapes} <= set(ladder) and len(shapes) <= len(ladder) + 1
  for inputs, _ in whole:  # a batch is padded to the rung of its longest example
    longest = int(inputs["padding_mask"].numpy().sum(1).max())
    assert inputs["input_ids"].shape[1] == ladder[np.searchsorted(ladder, longest)]
  micro = list(problem.train_dataset(4, seed=3, update_size=16))
  for k, (inputs, labels) in enumerate(whole):
    parts = micro[4 * k:4 * k + 4]
    np.testing.assert_array_equal(labels.numpy(), np.concatenate([p[1].numpy() for p in parts]))
    got = [row[row != problem.pad_id] for p in parts for row in p[0]["input_ids"].numpy()]
    want = [row[row != problem.pad_id] for row in inputs["input_ids"].numpy()]
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@pytest.mark.slow
def test_padding_to_the_ladder_trains_and_scores_like_padding_to_max_seq_len(data, tmp_path):
  """The same batches padded to their rung (random) or to max_seq_len: the same train losses
  and dev metrics to 1e-5 (dropout 0: a dropout mask's draw depends on the padded shape)."""
  results = {b: sweep_runner.run_sweep(_config(data, tmp_path / b, batching=b))
             for b in ("random", "max_seq_len")}
  got, want = (results[b]["runs"][0]["history"] for b in ("random", "max_seq_len"))
  np.testing.assert_allclose([h["train_loss"] for h in got], [h["train_loss"] for h in want],
                             rtol=1e-5)
  for g, w in zip(got, want, strict=True):
    assert g["dev"] == pytest.approx(w["dev"], abs=1e-5)


@pytest.mark.slow
def test_dev_metrics_of_one_model_do_not_depend_on_the_padding(data, tmp_path, hf_tiny_dir):
  cfg = _config(data, tmp_path / "lb", epochs=1)
  sweep_runner.run_sweep(cfg)
  model, _, _ = finetuned_dir.load(cfg.model.model_dir)
  tokenizer = finetuned_dir.load_tokenizer(hf_tiny_dir)
  scores = {}
  for batching in ("length_buckets", "max_seq_len"):
    problem = problem_loading.load_problem(_config(data, "unused", batching=batching), tokenizer)
    batches = list(problem.eval_dataset(8))
    widths = {b["input_ids"].shape[1] for b in batches}
    assert widths == {64} if batching == "max_seq_len" else max(widths) < 64
    scores[batching] = problem.evaluate(
        [{k: v.numpy() for k, v in model(b, training=False).items()} for b in batches]).metrics
  assert scores["length_buckets"] == pytest.approx(scores["max_seq_len"], abs=1e-5)
