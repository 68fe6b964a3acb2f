"""Hypothesis draws random legal schedules; every one must match the numpy reference.

A drawn schedule is a random sequence of primitives (splits that may not divide, reorders, fuses,
annotations, compute_at/inline, cache_write, rfactor). Steps that are illegal raise ScheduleError
and are skipped, so what remains is a legal schedule: it must lower and compute the right answer.
"""

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autosched.errors import ScheduleError
from autosched.lower.pipeline import lower
from autosched.search_space.schedule import Schedule, create_schedule
from autosched.te.tensor import ComputeOp
from autosched.testing import assert_matches_numpy
from tests.unit.test_schedule_primitives import conv_padded, dense_relu, matmul, softmax

EXAMPLES = int(os.environ.get("AUTOSCHED_HYPOTHESIS_EXAMPLES", "20"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)


def _try(fn, *args, **kwargs):
    try:
        return fn(*args, **kwargs)
    except ScheduleError:
        return None


def random_schedule(outputs, rng: random.Random) -> Schedule:
    s = create_schedule(outputs)
    for stage in list(s.stages):
        op = stage.op
        if isinstance(op, ComputeOp) and op.reduce_axis and rng.random() < 0.3:
            if rng.random() < 0.5:
                _try(s.cache_write, stage.name, "local")
            else:
                k = op.reduce_axis[-1]
                parts = _try(stage.split, k, factor=rng.randint(1, k.extent + 2))
                if parts:
                    _try(s.rfactor, stage.name, rng.choice(parts), rng.randint(0, len(op.axis)))
    for stage in list(s.stages):
        if not stage.is_compute:
            continue
        for _ in range(rng.randint(0, 3)):
            leaf = rng.choice(stage.leaves)
            _try(stage.split, leaf, factor=rng.randint(1, leaf.extent + 2))
        if rng.random() < 0.5:
            order = list(stage.leaves)
            rng.shuffle(order)
            _try(stage.reorder, *order)
        if rng.random() < 0.3 and len(stage.leaves) > 1:
            i = rng.randrange(len(stage.leaves) - 1)
            _try(stage.fuse, stage.leaves[i], stage.leaves[i + 1])
        if rng.random() < 0.4:
            _try(stage.parallel, rng.choice(stage.leaves))
        if rng.random() < 0.5:
            _try(stage.vectorize, stage.leaves[-1] if rng.random() < 0.7 else rng.choice(stage.leaves))
        if rng.random() < 0.3:
            small = [a for a in stage.leaves if a.extent <= 16]
            if small:
                _try(stage.unroll, rng.choice(small))
        if rng.random() < 0.2:
            _try(stage.pragma, stage.leaves[0], "auto_unroll_max_step", rng.choice([4, 16, 64]))
    for stage in list(s.stages):
        if not stage.is_compute or stage.is_output or rng.random() < 0.4:
            continue
        if rng.random() < 0.5:
            _try(stage.compute_inline)
        else:
            readers = [c for c in s.stages if stage in s.reads(c) and c.attach[0] != "inline"]
            if readers:
                parent = rng.choice(readers)
                _try(stage.compute_at, parent, rng.choice(parent.leaves))
    return s


WORKLOADS = {
    "matmul": lambda: matmul(9, 14, 11),
    "conv2d": lambda: conv_padded()[0],
    "softmax": lambda: softmax(4, 13)[0],
    "dense_bias_relu": lambda: dense_relu(7, 10, 6)[0],
}


def _check(name: str, seed: int) -> None:
    args = WORKLOADS[name]()
    s = random_schedule([args[-1]], random.Random(seed))
    try:
        lower(s, args)
    except ScheduleError:
        return  # an illegal combination (e.g. compute_at outside a reader's scope), refused clearly
    assert_matches_numpy(s, args, "llvm-cpu", seed=seed % 7)


@pytest.mark.parametrize("name", sorted(WORKLOADS))
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_random_schedules(name, seed):
    _check(name, seed)
