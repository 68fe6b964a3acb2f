"""Vector types in C-like code: OpenCL vloadN/vstoreN where provably equal, else the scalar loop."""

import pytest

from autosched import te
from autosched.codegen.c_like import CUDA, OPENCL, render_c_like
from autosched.hai.registry import get_adapter
from autosched.lower.ir import Buffer, For, Load, PrimFunc, Store
from autosched.lower.pipeline import lower
from autosched.search_space.schedule import create_schedule
from autosched.te.expr import IterVar, binary, const
from autosched.testing import assert_matches_numpy
from tests.unit.test_schedule_primitives import matmul

from .test_cuda_compile import _why as _no_nvrtc
from .test_opencl import _why as _no_opencl

needs_opencl = pytest.mark.skipif(_no_opencl is not None, reason=_no_opencl or "")


def rows_times_vector(rows: int, cols: int, lanes: int, guard: bool = False):
    """``C[i, j] = exp(A[i, j]) * B[j] + A[i, 0] * 2``: contiguous loads, a scalar, a math call."""
    A = te.placeholder((rows, cols), name="A")
    B = te.placeholder((cols,), name="B")
    C = te.compute((rows, cols), lambda i, j: te.exp(A[i, j]) * B[j] + A[i, 0] * 2.0, name="C")
    s = create_schedule(C)
    jo, ji = s[C].split(C.op.axis[1], factor=lanes)
    s[C].vectorize(ji)
    s[C].bind(C.op.axis[0], "blockIdx.x")
    s[C].bind(jo, "threadIdx.x")
    return s, [A, B, C]


def _source(s, args, dialect=OPENCL):
    return render_c_like(lower(s, args, "v"), dialect).source


@needs_opencl
@pytest.mark.parametrize("lanes", [2, 4, 8, 16])
def test_vector_lanes(lanes):
    s, args = rows_times_vector(3, 32, lanes)
    source = _source(s, args)
    assert f"vstore{lanes}(" in source and f"vload{lanes}(0, B + " in source
    assert_matches_numpy(s, args, "opencl", seed=lanes)


@needs_opencl
@pytest.mark.parametrize("lanes,cols", [(3, 12), (32, 64)])
def test_scalar_when_lanes_do_not_fit(lanes, cols):
    """Three lanes, 32 lanes: the scalar loop, still right. (A guarded split, 4 lanes over 10
    columns, runs its whole vectors in vector types: tests/codegen/test_partition.py.)"""
    s, args = rows_times_vector(2, cols, lanes)
    source = _source(s, args)
    assert "vstore" not in source and "#pragma unroll" in source
    assert_matches_numpy(s, args, "opencl", seed=cols)


@needs_opencl
def test_strided_and_accumulating_accesses():
    """Matmul with its columns in lanes: C accumulates in place (same index: vector), A[i, k] is a
    scalar, B[k, j] contiguous; a transposed read (stride N) keeps the loop scalar."""
    M, N, K = 4, 16, 6
    A, B, C = matmul(M, N, K)
    k = C.op.reduce_axis[0]
    s = create_schedule(C)
    jo, ji = s[C].split(C.op.axis[1], factor=4)
    s[C].reorder(C.op.axis[0], jo, k, ji)
    s[C].vectorize(ji)
    s[C].bind(C.op.axis[0], "blockIdx.x")
    s[C].bind(jo, "threadIdx.x")
    source = _source(s, [A, B, C])
    assert "vstore4(" in source and "vload4(0, C + " in source
    assert_matches_numpy(s, [A, B, C], "opencl", seed=1)

    T = te.compute((N, M), lambda j, i: A[i, j % K] + 1.0, name="T")
    s = create_schedule(T)
    io, ii = s[T].split(T.op.axis[1], factor=4)
    s[T].vectorize(ii)
    source = _source(s, [A, T])
    assert "vstore" not in source
    assert_matches_numpy(s, [A, T], "opencl", seed=2)


def test_lane_reading_another_lanes_element_stays_scalar():
    """``C[v] = C[v + 1] + 1`` reads what the next lane writes: in order it is not a vector copy."""
    C = Buffer("C", (5,), "float32")
    v = IterVar("v", "int32", 4)
    load = Load(C, (binary("+", v, const(1)),), "float32")
    func = PrimFunc("shift", (C,), For(v, 4, "vectorized", Store(C, (v,), binary("+", load, const(1.0)))))
    assert "vstore" not in render_c_like(func, OPENCL).source


def test_cuda_keeps_the_scalar_loop():
    """No alignment is provable from the IR for float4 in CUDA: the scalar loop, unrolled."""
    s, args = rows_times_vector(3, 32, 4)
    source = _source(s, args, CUDA)
    assert "float4" not in source and "#pragma unroll" in source
    if _no_nvrtc is None:
        from autosched.hai.cuda import CUDAAdapter

        for arch in ("sm_80", "sm_90"):
            assert ".entry" in CUDAAdapter("cuda").compile_ptx(lower(s, args, "v", target="cuda"), arch)


@needs_opencl
def test_vector_store_into_a_private_tile():
    """A local (private) accumulator tile filled with vstore, inside the thread that owns it."""
    M, N, K = 4, 8, 5
    A, B, C = matmul(M, N, K)
    s = create_schedule(C)
    CL = s.cache_write(C.name, "local")
    i, j = C.op.axis
    s[C].bind(i, "blockIdx.x")
    s[CL].compute_at(s[C], i)
    ci, cj = s[CL].op.axis
    s[CL].reorder(s[CL].op.reduce_axis[0], ci, cj)
    s[CL].vectorize(cj)
    source = get_adapter("opencl").render(lower(s, [A, B, C], "mm", target="opencl")).source
    assert "vstore8(" in source
    assert_matches_numpy(s, [A, B, C], "opencl", seed=3)
