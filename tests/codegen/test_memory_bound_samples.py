"""Sketch samples of the memory-bound kinds, with their one-pass placements, compiled (parallel bodies
with noalias buffers) and compared with numpy on random inputs."""

from __future__ import annotations

import random

import pytest

from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import make_avg_pool2d, make_layer_norm, make_max_pool2d, make_softmax
from tests.codegen.test_partition import max_pool_nhwc

CASES = {
    "layer_norm": lambda: make_layer_norm((24, 96), axis=-1),
    "layer_norm_3d": lambda: make_layer_norm((3, 8, 40), axis=-2),
    "softmax": lambda: make_softmax((20, 72)),
    "max_pool_nhwc": lambda: max_pool_nhwc(1, 15, 14, 32),
    "max_pool_nchw": lambda: make_max_pool2d(1, 4, 13, 12, kernel=3, stride=2, padding=1),
    "avg_pool_nchw": lambda: make_avg_pool2d(1, 4, 13, 12, kernel=3, stride=2, padding=1),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_sketch_samples_match_numpy(name: str) -> None:
    args = CASES[name]()
    policy = SketchPolicy([args[-1]], cores=2, lanes=16)
    rng = random.Random(name)
    placed = 0
    for seed in range(10):
        sch, d = policy.sample(rng)
        placed += any(k.endswith("/location") and v >= 1 for k, v in d.items())
        assert_matches_numpy(sch, list(args), seed=seed)
    if name.startswith(("layer_norm", "softmax")):
        assert placed >= 1  # some samples run the reductions in the output's loops
