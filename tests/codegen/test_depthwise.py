"""Random sketch samples of depthwise and grouped convs (stride 1 and 2, padded), with their pad
inlined or materialized, compile and match the numpy reference."""

from __future__ import annotations

import random

import pytest

from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import make_conv2d, make_depthwise_conv2d

CASES = {
    "depthwise": lambda: make_depthwise_conv2d(C=16, H=10, W=12, stride=1, padding=1),
    "depthwise_stride2": lambda: make_depthwise_conv2d(C=16, H=12, W=12, stride=2, padding=1),
    "depthwise_multiplier2": lambda: make_depthwise_conv2d(C=4, M=2, H=9, W=9, stride=2, padding=(1, 2)),
    "grouped_as_depthwise": lambda: make_conv2d(C=16, H=10, W=10, K=16, stride=2, padding=1, groups=16),
    "grouped": lambda: make_conv2d(C=8, H=8, W=8, K=16, padding=1, groups=2),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("inline", [True, False])
def test_sketch_samples_match_numpy(name: str, inline: bool) -> None:
    args = CASES[name]()
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(7)
    for seed in range(3):
        sch, decisions = policy.sample(rng, {"pad/inline": inline})
        assert decisions["pad/inline"] is inline
        assert_matches_numpy(sch, args, seed=seed)
