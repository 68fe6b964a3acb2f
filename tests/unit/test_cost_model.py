"""Cost model: features are deterministic and fixed-length; XGBoost ranks far better than chance."""

import functools
import json
import math
import random

import numpy as np
import pytest

from autosched.cost_model.features import (
    FEATURE_COUNT,
    FEATURE_NAMES,
    STORE_FEATURE_NAMES,
    STORE_FEATURES,
    candidate_features,
    extract_features,
    store_features,
)
from autosched.cost_model.random_model import RandomModel
from autosched.cost_model.xgb import XGBModel, ranking_score, relative_labels
from autosched.hai.base import ChipInfo
from autosched.lower.pipeline import lower
from autosched.search_space.sketch import SketchPolicy
from autosched.topi.workloads import make_conv2d, make_dense, make_matmul, make_softmax, make_unary

WORKLOADS = {
    "matmul": lambda: make_matmul(64, 64, 64),
    "conv2d": lambda: make_conv2d(1, 8, 14, 14, 16, 3, 3, 1, 1),
    "softmax": lambda: make_softmax((32, 64)),
    "dense": lambda: make_dense(16, 64, 32),
    "gelu": lambda: make_unary("gelu", (8, 64)),
}


def samples(tensors, n, seed=0):
    policy = SketchPolicy(tensors[-1:], cores=2, lanes=16)
    rng = random.Random(seed)
    return [(sch, d, lower(sch, tensors)) for sch, d in (policy.sample(rng) for _ in range(n))]


def fake_cost(decisions):
    """A synthetic speed landscape over sketch decisions: vector-width tiles and unroll 64 are best."""
    c = 1e-3
    for key, v in sorted(decisions.items()):
        if "/tile/" in key:
            c *= 1 + 0.4 * abs(math.log2(v[-1]) - (4 if key.endswith("/j") else 2))
        elif key.endswith("/unroll"):
            c *= {0: 1.5, 16: 1.2, 64: 1.0, 512: 1.3}[v]
        elif key.endswith("/parallel_depth"):
            c *= 1.0 if v == 1 else 1.15
    return c


def pairwise_accuracy(y, p):
    dt, dp = np.sign(y[:, None] - y[None, :]), np.sign(p[:, None] - p[None, :])
    pairs = dt != 0
    return float(((dt == dp) & pairs).sum() / pairs.sum())


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_features_fixed_length_finite_and_deterministic(name):
    tensors = WORKLOADS[name]()
    first = [candidate_features(f) for _, _, f in samples(tensors, 4)]
    again = [candidate_features(f) for _, _, f in samples(tensors, 4)]  # rebuilt from scratch
    for a, b in zip(first, again):
        assert a.shape == (FEATURE_COUNT,)
        assert np.isfinite(a).all()
        np.testing.assert_array_equal(a, b)
    assert len({x.tobytes() for x in first}) > 1  # different schedules, different vectors


def test_feature_names_and_store_rows():
    assert len(FEATURE_NAMES) == FEATURE_COUNT == 2 * STORE_FEATURES + 16
    assert len(set(FEATURE_NAMES)) == FEATURE_COUNT
    ((_, _, f),) = samples(make_matmul(64, 64, 64), 1)
    rows = store_features(f)
    assert rows.shape[1] == len(STORE_FEATURE_NAMES) and rows.shape[0] >= 2  # init, update, copy-out
    x = candidate_features(f)
    np.testing.assert_array_equal(x[STORE_FEATURES : 2 * STORE_FEATURES], rows.max(axis=0))
    X = extract_features([f, f])
    np.testing.assert_array_equal(X[0], X[1])


def test_features_see_the_schedule_and_the_chip():
    tensors = make_matmul(64, 64, 64)
    ((_, _, f),) = samples(tensors, 1)
    small = ChipInfo("a", "cpu", "a", cores=2, vector_bits=256, l1_bytes=32 << 10)
    big = ChipInfo("b", "cpu", "b", cores=16, vector_bits=512, l1_bytes=48 << 10)
    a, b = candidate_features(f, small), candidate_features(f, big)
    chip_cols = [i for i, n in enumerate(FEATURE_NAMES) if n.startswith("chip_")]
    assert not np.array_equal(a[chip_cols], b[chip_cols])
    idx = FEATURE_NAMES.index("mean_ops_f_mul")
    assert a[idx] > 0  # the multiply-adds of the matmul are counted
    assert a[FEATURE_NAMES.index("mean_par_loops")] >= 1  # the sketch always parallelizes


def test_relative_labels_within_a_workload():
    y = relative_labels([2.0, 1.0, 4.0, 1e10])
    np.testing.assert_allclose(y, [0.5, 1.0, 0.25, 0.0])
    assert relative_labels([1e10, 1e10]).max() == 0


@functools.cache
def synthetic_dataset(n=300):
    X, y = [], []
    for _, d, f in samples(make_matmul(64, 64, 64), n, seed=3):
        X.append(candidate_features(f))
        y.append(fake_cost(d))
    return np.array(X), np.array(y)


@pytest.mark.parametrize("objective", ["reg", "rank", "auto"])
def test_model_ranks_held_out_candidates_far_better_than_chance(objective):
    X, costs = synthetic_dataset()
    model = XGBModel(objective, seed=0)
    model.update("matmul", X[:200], costs[:200])
    speed = relative_labels(costs[200:])
    acc = pairwise_accuracy(speed, model.predict(X[200:]))
    assert acc > 0.75, acc  # chance is 0.5
    if objective == "auto":
        assert set(model.selection) == {"reg", "rank"} and model.objective in ("reg", "rank")
    blind = pairwise_accuracy(speed, RandomModel(seed=0).predict(X[200:]))
    assert acc > blind + 0.15


def test_ranking_score_bounds():
    y = np.array([1.0, 0.5, 0.25, 0.1, 0.05])
    g = np.zeros(5, dtype=int)
    assert ranking_score(y, y, g) == pytest.approx(1.0)
    assert ranking_score(y, -y, g) < 0.25


def test_save_load_json_round_trip(tmp_path):
    X, costs = synthetic_dataset(60)
    model = XGBModel("reg", seed=0)
    model.update("matmul", X, costs)
    path = tmp_path / "model.json"
    model.save(path)
    json.loads(path.read_text())  # XGBoost's JSON format, not a pickle
    back = XGBModel.load(path)
    assert back.objective == "reg"
    np.testing.assert_allclose(back.predict(X), model.predict(X), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\.json"):
        model.save(tmp_path / "model.pkl")


def test_load_refuses_another_feature_layout(tmp_path):
    X, costs = synthetic_dataset(30)
    model = XGBModel("reg", seed=0)
    model.update("matmul", X, costs)
    model.booster.set_attr(autosched_features="7")
    model.booster.save_model(str(tmp_path / "old.json"))
    with pytest.raises(ValueError, match="trained on 7 features"):
        XGBModel.load(tmp_path / "old.json")


def test_untrained_model_and_bad_rows():
    model = XGBModel(seed=0)
    assert not model.trained
    assert model.predict(np.zeros((3, FEATURE_COUNT))).tolist() == [0, 0, 0]
    model.update("w", np.zeros((2, FEATURE_COUNT)), [1e10, 1e10])  # only failures: nothing to learn
    assert not model.trained
    with pytest.raises(ValueError, match="features a row"):
        model.add("w", np.zeros((2, 5)), [1.0, 2.0])
    with pytest.raises(ValueError, match="objective"):
        XGBModel("listwise")
