"""The generated CUDA of every op kind compiles with NVRTC for sm_80 and sm_90 (no GPU needed)."""

import random

import pytest

from autosched.lower.pipeline import lower
from autosched.search_space.gpu_sketch import GPUSketchPolicy, default_gpu_schedule
from autosched.topi.workloads import SMALL_CASES


def _nvrtc_or_skip():
    try:
        from autosched.hai.cuda import nvrtc_compile

        nvrtc_compile('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }', "sm_80")
    except Exception as e:  # cupy or the NVRTC library missing
        return f"cupy/NVRTC unavailable: {e}"
    return None


_why = _nvrtc_or_skip()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


@pytest.mark.parametrize("name", sorted(SMALL_CASES))
def test_cuda_compiles(name):
    from autosched.hai.cuda import CUDAAdapter

    adapter = CUDAAdapter("cuda -arch=sm_90")
    args = SMALL_CASES[name]()
    schedules = [default_gpu_schedule([args[-1]])]
    schedules += [GPUSketchPolicy([args[-1]]).sample(random.Random(i))[0] for i in range(2)]
    for s in schedules:
        func = lower(s, args, name, target="cuda")
        for arch in ("sm_80", "sm_90"):
            ptx = adapter.compile_ptx(func, arch)
            assert ".entry" in ptx and f".target {arch}" in ptx


def test_shared_memory_and_barriers_in_cuda():
    from autosched.hai.cuda import CUDAAdapter

    args = SMALL_CASES["matmul"]()
    policy = GPUSketchPolicy([args[-1]], max_threads=64)
    s, _ = policy.sample(random.Random(0), {"matmul.local/shared": True})
    adapter = CUDAAdapter("cuda -arch=sm_80")
    source = adapter.render(lower(s, args, "mm", target="cuda")).source
    assert "__shared__ float" in source and "__syncthreads();" in source
    assert ".shared" in adapter.compile_ptx(lower(s, args, "mm", target="cuda"))


def test_refused_code_is_a_compile_error():
    from autosched.errors import CompileError
    from autosched.hai.cuda import nvrtc_compile

    with pytest.raises(CompileError, match="undefined"):
        nvrtc_compile('extern "C" __global__ void k(float* a) { a[0] = nope; }', "sm_90")


def test_no_gpu_is_a_clear_target_error():
    from autosched.errors import TargetError
    from autosched.hai.cuda import CUDAAdapter, gpu_count

    if gpu_count():
        pytest.skip("a GPU is present")
    args = SMALL_CASES["matmul"]()
    with pytest.raises(TargetError, match="needs a CUDA GPU"):
        CUDAAdapter("cuda").compile(lower(default_gpu_schedule([args[-1]]), args, "mm", target="cuda"))
