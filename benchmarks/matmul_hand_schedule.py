"""A hand-written schedule for a 1024^3 float32 matmul, TVM "how to optimize GEMM on CPU" style,
against numpy (OpenBLAS) in the same process, on 1 and 2 threads.

Run with nothing else on the machine: ``python benchmarks/matmul_hand_schedule.py``.
The schedule: B packed into column panels (a separate te compute), C tiled into blocks of 6 rows
and four vectors (6 x 64 on AVX-512: 24 accumulators of the 32 registers) whose accumulator lives in
registers (cache_write + compute_at, vectorized, unrolled), the loop over column panels outside the
loop over row blocks so a panel stays in L2, and the block loops fused and parallel. 6 rows do not
divide 1024: the last block is partial, and lowering gives the full ones a copy without bounds tests
(lower/tails.py). On one Emerald Rapids core 6 x 64 ran 155 GFLOP/s against 127 for 4 x 64 and 122
for the 8 x 32 blocks this schedule used before.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, os.path.dirname(__file__))
from peak import measure_peak_gflops

import autosched
from autosched import te
from autosched.hai.registry import get_adapter
from autosched.measure import blas
from autosched.measure.compare import interleaved_medians


def register_tile(s, CC, kf: int) -> None:
    """The accumulator tile in registers: k outside, the tile's rows unrolled, its columns in lanes."""
    mc, nc = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=kf)
    s[CC].reorder(ko, ki, mc, nc)
    s[CC].vectorize(nc)
    s[CC].unroll(ki)
    s[CC].unroll(mc)


def gemm(M: int, N: int, K: int, bm: int = 6, bn: int = 64, kf: int = 4):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k), name="C")

    s = autosched.create_schedule(C)
    CC = s.cache_write(C, "local")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bm, bn)
    s[C].reorder(no, mo, mi, ni)  # a packed B panel (K x bn) is reused by every row block
    s[CC].compute_at(s[C], mo)
    register_tile(s, CC, kf)
    s[C].vectorize(ni)
    s[C].parallel(s[C].fuse(no, mo))
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    s[packedB].parallel(x)
    return s, [A, B, C]


def gemm_panel_packing(M: int, N: int, K: int, bm: int = 6, bn: int = 64, kf: int = 4):
    """The same blocking, with B packed per column panel by ``cache_read`` inside the panel loop: the
    thread that uses a panel packs it, into its own cache, just before using it (BLIS style)."""
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

    s = autosched.create_schedule(C)
    CC = s.cache_write(C, "local")
    BB = s.cache_read(B, "local", [CC])  # a packed-B compute: B[:, panel] copied contiguously
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bm, bn)
    s[C].reorder(no, mo, mi, ni)
    s[CC].compute_at(s[C], mo)
    s[BB].compute_at(s[C], no)
    register_tile(s, CC, kf)
    s[C].vectorize(ni)
    s[C].parallel(no)
    s[BB].vectorize(s[BB].op.axis[1])
    return s, [A, B, C]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--rows", type=int, default=6, help="rows of the register tile")
    p.add_argument("--vectors", type=int, help="vectors in a row of the register tile (default: 64 floats)")
    a = p.parse_args()
    lanes = get_adapter("llvm-cpu").info().vector_bits // 32
    bn = lanes * a.vectors if a.vectors else 64
    M = N = K = a.size
    rng = np.random.default_rng(0)
    A = rng.uniform(-1, 1, (M, K)).astype("float32")
    B = rng.uniform(-1, 1, (K, N)).astype("float32")
    C = np.empty((M, N), "float32")
    kernels = {}
    for label, make in (("te packed-B", gemm), ("panel packing", gemm_panel_packing)):
        s, args = make(M, N, K, bm=a.rows, bn=bn)
        fn = autosched.build(s, args, "llvm-cpu", name="gemm")
        fn(A, B, C)
        np.testing.assert_allclose(C, A @ B, rtol=1e-3, atol=1e-3)
        kernels[label] = fn
    flops = 2 * M * N * K
    peak = measure_peak_gflops()
    print(f"matmul {M}x{N}x{K} float32, register tile {a.rows} x {bn}; FMA peak {peak:.0f} GFLOP/s a core")
    print(blas.describe())
    if blas.forced_warning():
        print(f"warning: {blas.forced_warning()}")
    print(f"{'schedule':>14} {'threads':>7} {'autosched':>12} {'numpy':>12} {'ratio':>7} {'of peak':>8}")
    for threads in (1, 2):
        for label, fn in kernels.items():
            fn.adapter.set_num_threads(threads)
            with threadpool_limits(threads):
                ours, ref = interleaved_medians(
                    [lambda fn=fn: fn(A, B, C), lambda: np.matmul(A, B)], a.repeat
                )
            g_ours, g_ref = flops / ours / 1e9, flops / ref / 1e9
            print(
                f"{label:>14} {threads:>7} {g_ours:>8.1f} GF/s {g_ref:>8.1f} GF/s {g_ours / g_ref:>6.2f}x "
                f"{g_ours / (peak * threads):>7.0%}"
            )


if __name__ == "__main__":
    main()
