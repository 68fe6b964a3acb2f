"""Vector loops whose lanes test padding: a whole-vector main part, the border as before.

Workloads whose padding lies along the vector axis (a stencil's borders, a padded stride-2 conv1d)
and one whose padding does not (NHWC max pooling, vectorized over channels): random sketch samples
must match the numpy reference, and the main part of each partitioned loop must be one vector body.
"""

from __future__ import annotations

import random

import pytest

from autosched import build, te
from autosched.codegen.c_like import OPENCL, render_c_like
from autosched.codegen.llvm_vector import why_not_vectorizable
from autosched.lower.ir import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt
from autosched.lower.pipeline import lower
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi import conv1d
from autosched.topi.transform import lowest, pad

from .test_c_like_vector import needs_opencl, rows_times_vector


def max_pool_nhwc(N: int = 1, H: int = 16, W: int = 16, C: int = 32) -> list[te.Tensor]:
    """3x3 stride-2 max pooling with padding 1 over NHWC: the window's padding is uniform over C."""
    A = te.placeholder((N, H, W, C), "float32", name="A")
    P = pad(A, (0, 1, 1, 0), (0, 1, 1, 0), pad_value=lowest("float32"))
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    out = te.compute(
        (N, (H - 1) // 2 + 1, (W - 1) // 2 + 1, C),
        lambda n, y, x, c: te.max(P[n, y * 2 + ry, x * 2 + rx, c], axis=[ry, rx]),
        name="pool",
    )
    return [A, out]


def stencil(H: int = 32, W: int = 48) -> list[te.Tensor]:
    """Five-point stencil; the border keeps its value."""
    A = te.placeholder((H, W), "float32", name="A")

    def body(i, j):
        inside = te.all(i >= 1, i < H - 1, j >= 1, j < W - 1)
        around = A[i - 1, j] + A[i + 1, j] + A[i, j - 1] + A[i, j + 1]
        return te.if_then_else(inside, A[i, j] * 0.5 + 0.125 * around, A[i, j])

    return [A, te.compute((H, W), body, name="stencil")]


def conv1d_stride2() -> list[te.Tensor]:
    X = te.placeholder((1, 8, 64), "float32", name="X")
    Wt = te.placeholder((16, 8, 3), "float32", name="Wt")
    return [X, Wt, conv1d(X, Wt, stride=2, padding=1)]


WORKLOADS = {"max_pool_nhwc": max_pool_nhwc, "stencil": stencil, "conv1d_stride2": conv1d_stride2}


def lane_by_lane(func: PrimFunc) -> list[tuple[For, str]]:
    """Vector loops codegen would emit lane by lane outside a partition's fallback branch."""
    found: list[tuple[For, str]] = []

    def go(s: Stmt, in_fallback: bool) -> None:
        if isinstance(s, IfThenElse):
            go(s.then, in_fallback)
            if s.otherwise is not None:
                go(s.otherwise, True)
            return
        if isinstance(s, For) and s.kind == "vectorized" and s.extent > 1:
            reason = why_not_vectorizable(s)
            if reason and not in_fallback:
                found.append((s, reason))
        if isinstance(s, (For, Allocate)):
            go(s.body, in_fallback)
        elif isinstance(s, Seq):
            for x in s.stmts:
                go(x, in_fallback)

    go(func.body, False)
    return found


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_random_sketch_samples_match_numpy(name: str) -> None:
    args = WORKLOADS[name]()
    policy = SketchPolicy([args[-1]], lanes=16)
    rng = random.Random(7)
    for seed in range(6):
        sch, decisions = policy.sample(rng)
        assert not lane_by_lane(lower(sch, args)), decisions
        assert_matches_numpy(sch, args, seed=seed)


def test_stencil_row_vector_is_peeled_to_its_interior() -> None:
    """A vector as wide as the row: lanes 1..46 are one unconditional vector loop, lanes 0 and 47
    keep the border test."""
    args = stencil()
    sch, _ = SketchPolicy([args[-1]], lanes=16).sample(random.Random(0), {"stencil/vector": 48})
    func = lower(sch, args)
    vector_loops = [s for s in walk_stmts(func.body) if isinstance(s, For) and s.kind == "vectorized"]
    assert [v.extent for v in vector_loops] == [1, 46, 1]
    assert why_not_vectorizable(vector_loops[1]) is None
    assert_matches_numpy(sch, args, seed=3)


def test_stencil_short_vectors_are_guarded() -> None:
    """Vectors of 16 lanes: a run-time guard picks the vector body away from the borders."""
    args = stencil()
    sch, _ = SketchPolicy([args[-1]], lanes=16).sample(random.Random(0), {"stencil/vector": 16})
    func = lower(sch, args)
    guards = [s for s in walk_stmts(func.body) if isinstance(s, IfThenElse)]
    assert len(guards) == 1
    main, fallback = guards[0].then, guards[0].otherwise
    assert isinstance(main, For) and why_not_vectorizable(main) is None
    assert isinstance(fallback, For) and why_not_vectorizable(fallback) is not None
    assert_matches_numpy(sch, args, seed=4)


def test_pool_window_can_be_unrolled_around_the_vector_body() -> None:
    args = max_pool_nhwc()
    given = {"pool/vector": 16, "pool/unroll_window": True}
    sch, decisions = SketchPolicy([args[-1]], lanes=16).sample(random.Random(0), given)
    assert decisions["pool/unroll_window"] is True
    loops = {s.var.name: s.kind for s in walk_stmts(lower(sch, args).body) if isinstance(s, For)}
    assert loops["ry"] == loops["rx"] == "unrolled"
    assert_matches_numpy(sch, args, seed=5)


def test_condition_not_monotone_in_the_lanes_is_left_alone() -> None:
    """``j % 2 == 0`` holds on every other lane: no guard on the ends can decide it."""
    A = te.placeholder((64,), "float32", name="A")
    B = te.compute((64,), lambda j: te.if_then_else(j % 2 == 0, A[j], 0.0), name="B")
    sch, _ = SketchPolicy([B], lanes=16).sample(random.Random(0), {"B/vector": 16})
    func = lower(sch, [A, B])
    assert not any(isinstance(s, IfThenElse) for s in walk_stmts(func.body))
    assert_matches_numpy(sch, [A, B], seed=6)


@needs_opencl
def test_guarded_split_runs_whole_vectors_in_vector_types_on_opencl() -> None:
    """4 lanes over 10 columns: the split's guard ``jo*4 + j < 10`` is a condition on the lanes, so
    the vectors that fit are vstore4s and the last, partial one the scalar loop."""
    s, args = rows_times_vector(2, 10, 4)
    source = render_c_like(lower(s, args, "v"), OPENCL).source
    assert "vstore4(" in source and "#pragma unroll" in source
    assert_matches_numpy(s, args, "opencl", seed=10)


def test_strided_lanes_load_their_span_once_and_stay_in_bounds() -> None:
    """``A[2*j]`` over 16 lanes of a 31-element A: one load of exactly the 31 elements, then every
    second one (a load of 32 would read past the end)."""
    A = te.placeholder((31,), "float32", name="A")
    B = te.compute((16,), lambda j: A[j * 2] + 1.0, name="B")
    sch, _ = SketchPolicy([B], lanes=16).sample(random.Random(0), {"B/vector": 16})
    source = build(sch, [A, B]).source()
    assert "load <31 x float>" in source and "shufflevector" in source
    assert_matches_numpy(sch, [A, B], seed=8)
