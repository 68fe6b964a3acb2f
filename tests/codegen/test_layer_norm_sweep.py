"""Layer norm in float32 on data of large mean (1000 + N(0, 1)), where E[x^2] - E[x]^2 would lose
every digit: every sketch sample matches a float64 computation to ~1e-6 (sums of x minus its
block's first element, two-pass variance)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autosched import te
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy, run_schedule
from autosched.topi.norm import layer_norm


def _layer_norm(shape: tuple[int, ...], axis: int):
    x = te.placeholder(shape, name="x")
    inner = shape[axis % len(shape) :]
    g, b = te.placeholder(inner, name="g"), te.placeholder(inner, name="b")
    return [x, g, b, layer_norm(x, g, b, axis=axis)]


def _float64_truth(x: np.ndarray, g: np.ndarray, b: np.ndarray, axis: int) -> np.ndarray:
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype("float64")
    mean, var = x64.mean(axis=axes, keepdims=True), x64.var(axis=axes, keepdims=True)
    return (x64 - mean) / np.sqrt(var + 1e-5) * g + b


@pytest.mark.parametrize("shape,axis", [((8, 256), -1), ((2, 4, 64), 1), ((64,), 0)])
def test_large_mean_matches_float64(shape: tuple[int, ...], axis: int) -> None:
    args = _layer_norm(shape, axis)
    rng = np.random.default_rng(1)
    inner = args[1].shape
    x = (1000 + rng.standard_normal(shape)).astype("float32")
    g, b = rng.standard_normal(inner).astype("float32"), rng.standard_normal(inner).astype("float32")
    want = _float64_truth(x, g, b, axis)
    policy, pick = SketchPolicy([args[-1]], lanes=16), random.Random(2)
    for _ in range(4):
        sch, decisions = policy.sample(pick)
        (got,) = run_schedule(sch, args, [x, g, b])
        # Normalized values are O(1): a naive E[x^2] - E[x]^2 is off by O(1) here, this by ~1e-6.
        np.testing.assert_allclose(got, want, atol=2e-5, rtol=0, err_msg=str(decisions))


def test_random_samples_match_the_reference() -> None:
    args = _layer_norm((16, 128), -1)
    policy, pick = SketchPolicy([args[-1]], lanes=16), random.Random(3)
    for seed in range(4):
        sch, _ = policy.sample(pick)
        assert_matches_numpy(sch, args, seed=seed)
