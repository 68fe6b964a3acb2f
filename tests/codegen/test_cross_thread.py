"""Cross-thread reduction: a reduction loop bound to threadIdx.x becomes partials and a shared tree.

Checked three ways: the rewritten loop IR run by the reference interpreter (its sequential
semantics), the OpenCL kernel on PoCL, and the CUDA source compiled by NVRTC for sm_80 and sm_90.
"""

import os
import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from autosched import te
from autosched.errors import LowerError
from autosched.hai.reference import run_loops
from autosched.hai.registry import get_adapter
from autosched.lower.ir import Barrier, For
from autosched.lower.pipeline import lower, run_gpu_passes
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.gpu_sketch import GPUSketchPolicy
from autosched.search_space.schedule import create_schedule
from autosched.te.reference import evaluate, random_inputs
from autosched.testing import assert_matches_numpy, tolerance
from autosched.topi.workloads import SMALL_CASES, case_inputs

from .test_cuda_compile import _why as _no_nvrtc
from .test_opencl import _why as _no_opencl

needs_opencl = pytest.mark.skipif(_no_opencl is not None, reason=_no_opencl or "")
needs_nvrtc = pytest.mark.skipif(_no_nvrtc is not None, reason=_no_nvrtc or "")

REDUCERS = {"sum": te.sum, "max": te.max, "min": te.min}


def row_reduce(kind: str, rows: int, cols: int, threads: int, at_block: bool = True):
    """``out[i] = reduce_j x[i, j]``, one row per block, ``j`` split with its inner part on threads."""
    x = te.placeholder((rows, cols), name="x")
    k = te.reduce_axis((0, cols), name="k")
    out = te.compute((rows,), lambda i: REDUCERS[kind](x[i, k], axis=k), name="out")
    s = create_schedule(out)
    _, ki = s[out].split(k, factor=threads)
    s[out].bind(ki, "threadIdx.x")
    if at_block:
        s[out].bind(out.op.axis[0], "blockIdx.x")
    return s, [x, out]


def _interpret(s, args):
    """Run the GPU-pass output sequentially and compare: the rewrite must keep the loop IR's meaning."""
    func = run_gpu_passes(lower(s, args, "k"))
    ins = random_inputs(args[:-1], seed=3)
    out = np.full(args[-1].shape, 7, args[-1].dtype)
    run_loops(func, [*ins, out])
    (want,) = evaluate([args[-1]], dict(zip(args[:-1], ins)))
    np.testing.assert_allclose(out, want, *tolerance("float32", want))
    return func


# (reducer, rows, cols, threads): powers of two, a non-power-of-two thread count, a split that does
# not divide, more threads than elements, one thread.
SHAPES = [
    ("sum", 3, 64, 16),
    ("max", 4, 40, 6),
    ("min", 2, 17, 5),
    ("sum", 2, 7, 8),
    ("max", 3, 9, 1),
    ("min", 5, 33, 32),
]


@pytest.mark.parametrize("kind,rows,cols,threads", SHAPES)
def test_rewrite_keeps_the_sequential_meaning(kind, rows, cols, threads):
    s, args = row_reduce(kind, rows, cols, threads)
    func = _interpret(s, args)
    reduce_on_threads = [
        x for x in walk_stmts(func.body) if isinstance(x, For) and x.thread_tag == "threadIdx.x"
    ]
    assert all(x.var.kind != "reduce" for x in reduce_on_threads)  # type: ignore[attr-defined]
    assert any(isinstance(x, Barrier) for x in walk_stmts(func.body))


@needs_opencl
@pytest.mark.parametrize("kind,rows,cols,threads", SHAPES)
def test_opencl_row_reductions(kind, rows, cols, threads):
    s, args = row_reduce(kind, rows, cols, threads)
    source = get_adapter("opencl").render(lower(s, args, "r", target="opencl")).source
    assert f"__local float out_red[{min(threads, cols)}];" in source  # a split clamps to the extent
    assert_matches_numpy(s, args, "opencl", seed=len(SHAPES))


@needs_nvrtc
@pytest.mark.parametrize("kind", sorted(REDUCERS))
def test_cuda_row_reductions_compile(kind):
    from autosched.hai.cuda import CUDAAdapter

    s, args = row_reduce(kind, 4, 40, 6)
    adapter = CUDAAdapter("cuda")
    func = lower(s, args, "r", target="cuda")
    assert "__syncthreads();" in adapter.render(func).source
    for arch in ("sm_80", "sm_90"):
        assert ".shared" in adapter.compile_ptx(func, arch)


@needs_opencl
def test_several_blocks_rows_per_block_and_a_scalar():
    """Rows in a serial loop inside the block (a tree per row), and a reduction to one value."""
    x = te.placeholder((6, 20), name="x")
    k = te.reduce_axis((0, 20), name="k")
    out = te.compute((6,), lambda i: te.max(x[i, k], axis=k), name="out")
    s = create_schedule(out)
    io, _ = s[out].split(out.op.axis[0], factor=4)  # 2 blocks of 4 rows, the last guarded
    _, ki = s[out].split(k, factor=8)
    s[out].bind(io, "blockIdx.x")
    s[out].bind(ki, "threadIdx.x")
    _interpret(s, [x, out])
    assert_matches_numpy(s, [x, out], "opencl", seed=5)

    y = te.placeholder((5, 7), name="y")
    r, c = te.reduce_axis((0, 5), name="r"), te.reduce_axis((0, 7), name="c")
    total = te.compute((), lambda: te.sum(y[r, c], axis=[r, c]), name="total")
    s = create_schedule(total)
    _, ci = s[total].split(s[total].fuse(r, c), factor=12)
    s[total].bind(ci, "threadIdx.x")
    _interpret(s, [y, total])
    assert_matches_numpy(s, [y, total], "opencl", seed=6)


# Bad schedules: a clear LowerError naming the loop, never racy code.
def test_inside_a_spatial_thread_loop_is_refused():
    x = te.placeholder((4, 16), name="x")
    k = te.reduce_axis((0, 16), name="k")
    out = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="out")
    s = create_schedule(out)
    s[out].bind(out.op.axis[0], "threadIdx.y")
    s[out].bind(k, "threadIdx.x")
    with pytest.raises(LowerError, match=r"over 'k'.*inside loop 'i'.*threadIdx.y"):
        get_adapter("opencl").render(lower(s, [x, out], "r", target="opencl"))


def test_spatial_loop_inside_the_reduction_is_refused():
    x = te.placeholder((4, 16), name="x")
    k = te.reduce_axis((0, 16), name="k")
    out = te.compute((4,), lambda i: te.sum(x[i, k], axis=k), name="out")
    s = create_schedule(out)
    s[out].reorder(k, out.op.axis[0])
    s[out].bind(k, "threadIdx.x")
    with pytest.raises(LowerError, match="found loop 'i'"):
        run_gpu_passes(lower(s, [x, out], "r"))


def test_two_thread_bound_reduction_loops_are_refused():
    x = te.placeholder((4, 16), name="x")
    r, k = te.reduce_axis((0, 4), name="r"), te.reduce_axis((0, 16), name="k")
    out = te.compute((), lambda: te.sum(x[r, k], axis=[r, k]), name="out")
    s = create_schedule(out)
    s[out].bind(r, "threadIdx.y")
    s[out].bind(k, "threadIdx.x")
    with pytest.raises(LowerError, match="'r', 'k' are all bound to threads"):
        run_gpu_passes(lower(s, [x, out], "r"))


def test_unsupported_reducer_is_refused():
    absmax = te.comm_reducer(lambda a, b: te.if_then_else(a > b, a, b), lambda t: 0.0, name="absmax")
    x = te.placeholder((4, 16), name="x")
    k = te.reduce_axis((0, 16), name="k")
    out = te.compute((4,), lambda i: absmax(x[i, k], axis=k), name="out")
    s = create_schedule(out)
    s[out].bind(k, "threadIdx.x")
    with pytest.raises(LowerError, match="only sum, product, min and max"):
        run_gpu_passes(lower(s, [x, out], "r"))


# The sketch's decision, forced on, over the reductions without reuse.
CASES = [
    "reduce_sum",
    "reduce_mean",
    "softmax",
    "layer_norm_2d",
    "max_pool2d",
    "avg_pool2d",
    "attention_causal",
]


def _forced(policy, rng, extra=None):
    d = policy.sample(rng)[1]
    d = {k: (True if k.endswith("/cross_thread") else v) for k, v in d.items()}
    return policy.sample(rng, {**d, **(extra or {})})


@needs_opencl
@pytest.mark.parametrize("name", CASES)
def test_sketch_cross_thread_on_opencl(name):
    args = SMALL_CASES[name]()
    policy = GPUSketchPolicy([args[-1]], max_threads=64)
    rng = random.Random(name)
    for i, location in enumerate((0, 1)):
        s, d = _forced(policy, rng, {k: location for k in d_keys(policy, "/location")})
        assert any(v is True for k, v in d.items() if k.endswith("/cross_thread"))
        assert d == policy.sample(random.Random(0), d)[1]  # decisions rebuild it
        assert_matches_numpy(s, args, "opencl", inputs=case_inputs(name, args, i))


def d_keys(policy, suffix):
    return [k for k in policy.sample(random.Random(0))[1] if k.endswith(suffix)]


@needs_nvrtc
@pytest.mark.parametrize("name", ["softmax", "layer_norm_2d", "max_pool2d"])
def test_sketch_cross_thread_cuda_compiles(name):
    from autosched.hai.cuda import CUDAAdapter

    args = SMALL_CASES[name]()
    s, _ = _forced(GPUSketchPolicy([args[-1]], max_threads=256), random.Random(name))
    adapter = CUDAAdapter("cuda")
    func = lower(s, args, name, target="cuda")
    for arch in ("sm_80", "sm_90"):
        assert ".shared" in adapter.compile_ptx(func, arch)


@needs_opencl
@settings(
    max_examples=int(os.environ.get("AUTOSCHED_HYPOTHESIS_EXAMPLES", "8")),
    deadline=None,
    derandomize=bool(os.environ.get("CI")),
    suppress_health_check=[HealthCheck.too_slow],
)
@given(name=hs.sampled_from(CASES), seed=hs.integers(0, 2**16), threads=hs.sampled_from([16, 64]))
def test_random_gpu_sketches_with_cross_thread(name, seed, threads):
    """Random GPU sketches, where each reduction without reuse draws cross_thread like any decision."""
    args = SMALL_CASES[name]()
    s, d = GPUSketchPolicy([args[-1]], max_threads=threads).sample(random.Random(seed))
    assert any(k.endswith("/cross_thread") for k in d)
    assert_matches_numpy(s, args, "opencl", inputs=case_inputs(name, args, seed % 3))
