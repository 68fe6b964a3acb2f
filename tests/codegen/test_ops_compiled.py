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


def test_dense_packs_its_weight_transposed() -> None:
    """dense reads W[j, k] along the vector axis j: the pack stores W.local[k, j], contiguous in j."""
    from autosched.topi.workloads import make_dense

    args = make_dense(24, 48, 20, bias=True, activation="relu")
    policy = SketchPolicy([args[-1]], lanes=16)
    rng = random.Random(0)
    for i in range(4):
        s, d = policy.sample(rng, {"dense/pack": True})
        assert d["dense/pack"] is True
        steps = [st for st in s.trace if st.primitive == "cache_read"]
        assert [(st.stage, st.args[2]) for st in steps] == [("W", (1, 0))]
        assert_matches_numpy(s, args, "llvm-cpu", seed=i)


def test_softmax_fused_in_one_row_loop() -> None:
    """Row max, materialized exps and their sum all computed inside the output's row loop."""
    from autosched.topi.workloads import make_softmax

    args = make_softmax((24, 40))
    policy = SketchPolicy([args[-1]], lanes=16)
    fused = {"softmax_exp/inline": False, "softmax_norm/location": 0, "softmax_norm/parallel_depth": 1}
    fused.update({f"softmax_{s}/location": 1 for s in ("maxelem", "exp", "expsum")})
    for i in range(4):
        s, d = policy.sample(random.Random(i), fused)
        assert all(d[k] == v for k, v in fused.items())
        assert_matches_numpy(s, args, "llvm-cpu", seed=i)


def test_whole_tensor_reductions_match_numpy() -> None:
    """Parallel partials (and lanes inside them) over one or several reduce axes, combined after."""
    from tests.unit.test_sketch import _whole_tensor_sums

    for args in _whole_tensor_sums():
        policy = SketchPolicy([args[-1]], cores=2, lanes=16)
        rng = random.Random(1)
        for i in range(6):
            s, d = policy.sample(rng, {f"{args[-1].name}/parallel_rfactor": True})
            assert d[f"{args[-1].name}/parallel_rfactor"] is True
            assert_matches_numpy(s, args, "llvm-cpu", seed=i)
