"""Every op kind of the op library, compiled with the default schedule and with sampled sketches."""

import random

import pytest

from autosched.search_space.default import default_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import SMALL_CASES
from autosched.topi.workloads import case_inputs as inputs_for


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_default_schedule(name):
    args = SMALL_CASES[name]()
    s = default_schedule([args[-1]])
    assert_matches_numpy(s, args, "llvm-cpu", inputs=inputs_for(name, args, 0))


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_sketch_samples(name):
    args = SMALL_CASES[name]()
    policy = SketchPolicy([args[-1]], cores=2)
    rng = random.Random(name)
    for i in range(3):
        s, decisions = policy.sample(rng)
        assert decisions == policy.sample(random.Random(0), decisions)[1]  # decisions rebuild it
        assert_matches_numpy(s, args, "llvm-cpu", inputs=inputs_for(name, args, i))
