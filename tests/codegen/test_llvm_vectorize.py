"""Vectorized and parallel loops: vector code where legal, a correct scalar loop where not."""

from __future__ import annotations

import os

import numpy as np
import pytest

from autosched.codegen.llvm import vector_chunks
from autosched.codegen.llvm_vector import why_not_vectorizable
from autosched.lower.ir import Allocate, Buffer, For, IfThenElse, PrimFunc, Store, seq
from autosched.te.expr import Var, binary, cast, const, select
from tests.codegen.ir_builders import buf, ld


@pytest.mark.parametrize("n", [16, 48, 28])
def test_load_kinds(cpu, run, rng, n):
    """Contiguous (one vector load), broadcast (scalar), strided and gathered (lane by lane); 48 and 28
    lanes run as native registers and a tail."""
    R = 3
    A, S, W, G = buf("A", (R, n)), buf("S", (R,)), buf("W", (2 * n + 1,)), buf("G", (50,))
    Idx, B = buf("Idx", (n,), "int32"), buf("B", (R, n))
    r, j = Var("r"), Var("j")
    value = ld(A, r, j) + ld(S, r) * ld(W, 2 * j + 1) + ld(G, ld(Idx, j)) + ld(G, (j * j) % 50)
    loop = For(j, n, "vectorized", Store(B, (r, j), value))
    assert why_not_vectorizable(loop) is None
    f = PrimFunc("loads", (A, S, W, G, Idx, B), For(r, R, "serial", loop))
    text, pieces = cpu.render(f), vector_chunks(n, cpu.vector_bits // 32)
    assert f"load <{pieces[0][1]} x float>" in text  # a power of two stays whole, 16 lanes on AVX2 too
    assert len(pieces) == 1 or f"<{n} x float>" not in text
    a, s, w, g = rng.normal(size=(R, n)), rng.normal(size=R), rng.normal(size=2 * n + 1), rng.normal(size=50)
    a, s, w, g = (x.astype("float32") for x in (a, s, w, g))
    idx, b = rng.integers(0, 50, n).astype("int32"), np.zeros((R, n), "float32")
    run(f, a, s, w, g, idx, b)
    jj = np.arange(n)
    expect = a + s[:, None] * w[2 * jj + 1] + g[idx] + g[(jj * jj) % 50]
    np.testing.assert_allclose(b, expect, rtol=1e-5)


@pytest.mark.parametrize("n", [8, 24, 40])
def test_store_kinds(run, rng, n):
    """A contiguous vector store, a strided scatter and a colliding scatter (the last lane wins, also
    across the pieces of a 24- or 40-lane loop)."""
    A, C, D, E = buf("A", (n,)), buf("C", (n,)), buf("D", (2 * n,)), buf("E", (n // 2,))
    j = Var("j")
    body = seq(Store(C, (j,), ld(A, j) * 2.0), Store(D, (2 * j,), ld(A, j)), Store(E, (j // 2,), ld(A, j)))
    f = PrimFunc("stores", (A, C, D, E), For(j, n, "vectorized", body))
    a = rng.normal(size=n).astype("float32")
    c, d, e = np.zeros(n, "float32"), np.zeros(2 * n, "float32"), np.zeros(n // 2, "float32")
    run(f, a, c, d, e)
    np.testing.assert_allclose(c, 2 * a)
    np.testing.assert_allclose(d[::2], a)
    np.testing.assert_allclose(e, a[1::2])


def test_odd_lane_count_and_int32(run, rng):
    n = 7
    A, B = buf("A", (n,), "int32"), buf("B", (n,), "int32")
    j = Var("j")
    loop = For(j, n, "vectorized", Store(B, (j,), ld(A, j) * 3 - j + select(j < 3, const(100), j // 2)))
    assert why_not_vectorizable(loop) is None
    a, b = rng.integers(-100, 100, n).astype("int32"), np.zeros(n, "int32")
    run(PrimFunc("odd", (A, B), loop), a, b)
    jj = np.arange(n)
    np.testing.assert_array_equal(b, a * 3 - jj + np.where(jj < 3, 100, jj // 2))


def test_uniform_if_inside_vector_body(cpu, run, rng):
    R, n = 4, 16
    A, B = buf("A", (R, n)), buf("B", (R, n))
    r, j = Var("r"), Var("j")
    body = IfThenElse(r < 2, Store(B, (r, j), ld(A, r, j) + 1.0), Store(B, (r, j), ld(A, r, j) * 2.0))
    loop = For(j, n, "vectorized", body)
    assert why_not_vectorizable(loop) is None
    f = PrimFunc("uif", (A, B), For(r, R, "serial", loop))
    assert "store <16 x float>" in cpu.render(f)
    a, b = rng.normal(size=(R, n)).astype("float32"), np.zeros((R, n), "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, np.where(np.arange(R)[:, None] < 2, a + 1, a * 2), rtol=1e-6)


@pytest.mark.parametrize("op", ["+", "*", "max", "min"])
@pytest.mark.parametrize("n", [16, 7, 48])
def test_lane_reductions_combine_as_a_tree(cpu, run, rng, op, n):
    """acc = acc <op> A[j] over a vectorized j: a shuffle tree in vector registers, no serial loop."""
    A, X = buf("A", (3, n)), buf("X", (3,))
    r, j = Var("r"), Var("j")
    loop = For(j, n, "vectorized", Store(X, (r,), binary(op, ld(X, r), ld(A, r, j))))
    assert why_not_vectorizable(loop) is None
    f = PrimFunc("lane_reduce", (A, X), For(r, 3, "serial", loop))
    text = cpu.render(f)
    assert "shufflevector" in text and "for.j" not in text
    a, x = rng.uniform(0.5, 1.5, size=(3, n)).astype("float32"), rng.normal(size=3).astype("float32")
    want = x.copy()
    for k in range(n):
        want = {"+": want + a[:, k], "*": want * a[:, k], "max": np.maximum(want, a[:, k]),
                "min": np.minimum(want, a[:, k])}[op]  # fmt: skip
    run(f, a, x)
    np.testing.assert_allclose(x, want, rtol=1e-5)


def _fallbacks():
    n = 8
    A, B, X = buf("A", (n,)), buf("B", (n + 1,)), buf("X", (1,))
    j, k = Var("j"), Var("k")
    yield "prefix", (A, B), For(j, n, "vectorized", Store(B, (j + 1,), ld(B, j) + ld(A, j)))
    yield "count", (A, X), For(j, n, "vectorized", Store(X, (const(0),), ld(X, 0) + 1.0))
    nested = For(k, 2, "serial", Store(B, (j,), ld(B, j) + ld(A, j)))
    yield "nested", (A, B), For(j, n, "vectorized", nested)
    cond = IfThenElse(ld(A, j) > 0.0, Store(B, (j,), ld(A, j)))
    yield "lane_if", (A, B), For(j, n, "vectorized", cond)
    shifted = seq(Store(B, (j,), ld(A, j)), Store(B, (j + 1,), ld(B, j) * 2.0))
    yield "shifted", (A, B), For(j, n, "vectorized", shifted)
    overwrite = seq(Store(B, (const(0),), const(5.0)), Store(B, (j,), ld(A, j)))
    yield "overwrite", (A, B), For(j, n, "vectorized", overwrite)


@pytest.mark.parametrize("name", [x[0] for x in _fallbacks()])
def test_unvectorizable_bodies_run_as_scalar_loops(run, rng, name):
    _, params, loop = next(x for x in _fallbacks() if x[0] == name)
    assert why_not_vectorizable(loop) is not None
    serial = For(loop.var, loop.extent, "serial", loop.body)
    arrays = [rng.normal(size=p.shape).astype("float32") for p in params]
    expect = [x.copy() for x in arrays]
    run(PrimFunc(f"{name}_ref", params, serial), *expect)
    run(PrimFunc(name, params, loop), *arrays)
    for got, want in zip(arrays, expect, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_uniform_store_and_inplace_update_stay_vectorized():
    n = 8
    A, B, X = buf("A", (n,)), buf("B", (n,)), buf("X", (1,))
    j = Var("j")
    assert why_not_vectorizable(For(j, n, "vectorized", Store(B, (j,), ld(B, j) + ld(A, j)))) is None
    assert why_not_vectorizable(For(j, n, "vectorized", Store(X, (const(0),), ld(A, 3)))) is None


def _blocked_matmul(M: int, N: int, K: int, outer: str) -> tuple[PrimFunc, Buffer]:
    """An 8x32 register tile: unrolled rows, vectorized columns, accumulator in a local Allocate."""
    A, B, C = buf("A", (M, K)), buf("B", (K, N)), buf("C", (M, N))
    acc = buf("acc", (8, 32), scope="local")
    io, jo, k, ii, ji = Var("io"), Var("jo"), Var("k"), Var("ii"), Var("ji")
    row, col = io * 8 + ii, jo * 32 + ji

    def tile(stmt):
        return For(ii, 8, "unrolled", For(ji, 32, "vectorized", stmt))

    body = Allocate(
        acc,
        seq(
            tile(Store(acc, (ii, ji), const(0.0))),
            For(k, K, "serial", tile(Store(acc, (ii, ji), ld(acc, ii, ji) + ld(A, row, k) * ld(B, k, col)))),
            tile(Store(C, (row, col), ld(acc, ii, ji))),
        ),
    )
    return PrimFunc("blocked", (A, B, C), For(io, M // 8, outer, For(jo, N // 32, "serial", body))), acc


@pytest.mark.parametrize("threads", [1, 2])
def test_blocked_matmul_parallel(cpu, run, rng, threads):
    M, N, K = 16, 64, 24
    f, _ = _blocked_matmul(M, N, K, "parallel")
    text = cpu.render(f)
    assert "<32 x float>" in text and 'call void @"GOMP_parallel"' in text
    a, b = rng.normal(size=(M, K)).astype("float32"), rng.normal(size=(K, N)).astype("float32")
    c = np.zeros((M, N), "float32")
    cpu.set_num_threads(threads)
    try:
        run(f, a, b, c)
    finally:
        cpu.set_num_threads(os.cpu_count() or 1)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-5)


def test_nested_parallel_runs_inner_serially(cpu, run, rng):
    A, B = buf("A", (4, 8)), buf("B", (4, 8))
    i, j = Var("i"), Var("j")
    f = PrimFunc(
        "nest", (A, B), For(i, 4, "parallel", For(j, 8, "parallel", Store(B, (i, j), ld(A, i, j) + 1.0)))
    )
    assert cpu.render(f).count('call void @"GOMP_parallel"') == 1
    a, b = rng.normal(size=(4, 8)).astype("float32"), np.zeros((4, 8), "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a + 1)


def test_parallel_inside_serial_captures_outer_var(run, rng):
    A, B = buf("A", (3, 10)), buf("B", (3, 10))
    r, i = Var("r"), Var("i")
    f = PrimFunc(
        "cap",
        (A, B),
        For(r, 3, "serial", For(i, 10, "parallel", Store(B, (r, i), ld(A, r, i) * cast("float32", r)))),
    )
    a, b = rng.normal(size=(3, 10)).astype("float32"), np.zeros((3, 10), "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, a * np.arange(3)[:, None].astype("float32"))


def test_large_allocate_uses_heap_in_parallel_body(cpu, run, rng):
    n = 20000  # 80 KB per thread: too big for an OpenMP thread's stack frame
    A, B = buf("A", (4, n)), buf("B", (4, n))
    tmp = buf("tmp", (n,), scope="local")
    i, j = Var("i"), Var("j")
    body = Allocate(
        tmp,
        seq(
            For(j, n, "serial", Store(tmp, (j,), ld(A, i, j) * 2.0)),
            For(j, n, "serial", Store(B, (i, j), ld(tmp, n - 1 - j))),
        ),
    )
    f = PrimFunc("heap", (A, B), For(i, 4, "parallel", body))
    assert '@"aligned_alloc"' in cpu.render(f)
    a, b = rng.normal(size=(4, n)).astype("float32"), np.zeros((4, n), "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, 2 * a[:, ::-1])


@pytest.mark.parametrize(
    ("extent", "native", "pieces"),
    [(64, 16, [(0, 64)]), (14, 16, [(0, 14)]), (48, 16, [(0, 16), (16, 16), (32, 16)]),
     (28, 16, [(0, 16), (16, 8), (24, 4)]), (13, 4, [(0, 4), (4, 4), (8, 4), (12, 1)])],
)  # fmt: skip
def test_vector_chunks_cut_long_odd_extents_into_registers(extent, native, pieces):
    assert vector_chunks(extent, native) == pieces
