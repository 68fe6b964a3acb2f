"""CUDA runs: every op kind, default and sampled GPU schedules, on a real GPU (skipped without one)."""

import random

import numpy as np
import pytest

from autosched.search_space.gpu_sketch import GPUSketchPolicy, default_gpu_schedule
from autosched.te.reference import random_inputs
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import SMALL_CASES
from autosched.topi.workloads import case_inputs as inputs_for


def _gpus():
    try:
        from autosched.hai.cuda import gpu_count

        return gpu_count()
    except Exception:  # cupy missing
        return 0


pytestmark = [pytest.mark.gpu, pytest.mark.skipif(_gpus() == 0, reason="no CUDA GPU here")]


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_cuda_runs(name):
    args = SMALL_CASES[name]()
    assert_matches_numpy(default_gpu_schedule([args[-1]]), args, "cuda", inputs=inputs_for(name, args, 0))
    policy = GPUSketchPolicy([args[-1]], max_threads=256)
    rng = random.Random(name)
    for i in range(3):
        s, _ = policy.sample(rng)
        assert_matches_numpy(s, args, "cuda", inputs=inputs_for(name, args, i))


def test_cuda_info_and_timing():
    from autosched.build import build
    from autosched.hai.registry import get_adapter

    info = get_adapter("cuda").info()
    assert info.kind == "gpu" and info.max_threads_per_block >= 256 and info.shared_mem_bytes > 0
    args = SMALL_CASES["matmul"]()
    f = build(default_gpu_schedule([args[-1]]), args, "cuda")
    arrays = [*random_inputs(args[:2]), np.zeros(args[-1].shape, "float32")]
    times = f.time(*arrays, repeat=3)
    assert len(times) == 3 and all(t > 0 for t in times)
