"""Generated CUDA and OpenCL text for two canonical GPU schedules; refactors must not change it unless
on purpose (``pytest --update-golden``). Each is also run (OpenCL) or compiled (NVRTC) here, so a
golden file never pins wrong code."""

import pytest

from autosched import te
from autosched.codegen.c_like import CUDA, OPENCL, render_c_like
from autosched.lower.pipeline import lower, run_gpu_passes
from autosched.search_space.schedule import create_schedule
from autosched.testing import assert_matches_numpy

from .test_cuda_compile import _why as _no_nvrtc
from .test_opencl import _why as _no_opencl

DIALECTS = {"cu": CUDA, "cl": OPENCL}


def gpu_matmul(M=16, N=16, K=12):
    """SSSRRSRS by hand: 8x8 block tiles, 4x4 threads of 2x2 results each, A and B tiles fetched into
    shared memory by all threads at each step of k, the 2-wide result rows vectorized."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = create_schedule(C)
    CL = s[s.cache_write("C", "local")]
    i, j = C.op.axis
    bi, i2 = s[C].split(i, factor=8)
    ti, ii = s[C].split(i2, factor=2)
    bj, j2 = s[C].split(j, factor=8)
    tj, ji = s[C].split(j2, factor=2)
    s[C].reorder(bi, bj, ti, tj, ii, ji)
    s[C].bind(s[C].fuse(bi, bj), "blockIdx.x")
    t = s[C].fuse(ti, tj)
    s[C].bind(t, "threadIdx.x")
    CL.compute_at(s[C], t)
    ko, ki = CL.split(CL.op.reduce_axis[0], factor=4)
    ci, cj = CL.op.axis
    CL.reorder(ko, ki, ci, cj)
    CL.vectorize(cj)
    for name in ("A", "B"):
        shared = s[s.cache_read(name, "shared", [CL.name])]
        shared.compute_at(CL, ko)
        _, inner = shared.split(shared.fuse(*shared.op.axis), factor=16)
        shared.bind(inner, "threadIdx.x")
    return s, [A, B, C]


def gpu_softmax(M=3, N=40):
    """One block per row, 16 threads: the row max and the row sum are cross-thread reductions (40 is
    not a multiple of 16: guarded), then the threads write the row."""
    X = te.placeholder((M, N), name="X")
    k = te.reduce_axis((0, N), "k")
    mx = te.compute((M,), lambda i: te.max(X[i, k], axis=k), name="max")
    ex = te.compute((M, N), lambda i, j: te.exp(X[i, j] - mx[i]), name="exp")
    k2 = te.reduce_axis((0, N), "k2")
    sm = te.compute((M,), lambda i: te.sum(ex[i, k2], axis=k2), name="sum")
    out = te.compute((M, N), lambda i, j: ex[i, j] / sm[i], name="softmax")
    s = create_schedule(out)
    s[ex].compute_inline()
    i, j = out.op.axis
    s[out].bind(i, "blockIdx.x")
    _, ji = s[out].split(j, factor=16)
    s[out].bind(ji, "threadIdx.x")
    for red in (mx, sm):
        s[red].compute_at(s[out], i)
        _, ri = s[red].split(red.op.reduce_axis[0], factor=16)
        s[red].bind(ri, "threadIdx.x")
    return s, [X, out]


CASES = {"matmul_shared": gpu_matmul, "softmax_cross_thread": gpu_softmax}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("ext", sorted(DIALECTS))
def test_gpu_source(golden, case, ext):
    s, args = CASES[case]()
    golden(f"{case}.{ext}", render_c_like(run_gpu_passes(lower(s, args, case)), DIALECTS[ext]).source)


@pytest.mark.skipif(_no_opencl is not None, reason=_no_opencl or "")
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_schedules_run_on_opencl(case):
    s, args = CASES[case]()
    assert_matches_numpy(s, args, "opencl", seed=11)


@pytest.mark.skipif(_no_nvrtc is not None, reason=_no_nvrtc or "")
@pytest.mark.parametrize("case", sorted(CASES))
def test_golden_schedules_compile_with_nvrtc(case):
    from autosched.hai.cuda import CUDAAdapter

    s, args = CASES[case]()
    for arch in ("sm_80", "sm_90"):
        assert ".shared" in CUDAAdapter("cuda").compile_ptx(lower(s, args, case, target="cuda"), arch)
