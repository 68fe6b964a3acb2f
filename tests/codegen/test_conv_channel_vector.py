"""Convolutions vectorized over output channels (the sketch's ``vector_axis`` = ``ff``) or over
their last axis: random sketch samples of each kind match the numpy reference."""

from __future__ import annotations

import random

import pytest

from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import make_conv1d, make_conv2d, make_conv2d_transpose, make_conv3d

CASES = {
    "conv2d": lambda: make_conv2d(C=8, H=10, W=10, K=32, stride=1),
    "conv2d_stride2": lambda: make_conv2d(C=4, H=12, W=12, K=16, stride=2),
    "conv1d_stride2": lambda: make_conv1d(C=8, W=64, K=16, stride=2),
    "conv3d": lambda: make_conv3d(C=2, D=4, H=4, W=4, K=16),
    "conv2d_transpose": lambda: make_conv2d_transpose(C=4, H=5, W=5, K=16),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("axis", ["ff", None])
def test_sketch_samples_match_numpy(name: str, axis: str | None) -> None:
    args = CASES[name]()
    out = args[-1]
    given = {f"{out.name}.local/vector_axis": axis} if axis else {}
    policy, rng = SketchPolicy([out], lanes=16), random.Random(4)
    for seed in range(3):
        sch, decisions = policy.sample(rng, given)
        if axis:
            assert decisions.get(f"{out.name}.local/vector_axis") == axis, decisions
        assert_matches_numpy(sch, args, seed=seed)
