"""Every op kind of the op library, compiled with the default schedule and with sampled sketches."""

import random

import numpy as np
import pytest

from autosched.search_space.default import default_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.te.reference import random_inputs
from autosched.testing import assert_matches_numpy, split_args
from autosched.topi.workloads import SMALL_CASES


def inputs_for(name, args, seed):
    ins, _ = split_args(args)
    arrays = random_inputs(ins, seed=seed, int_high=14)
    if name == "batch_norm":
        arrays[-1] = np.abs(arrays[-1]) + 0.1  # a variance is positive
    return arrays


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
