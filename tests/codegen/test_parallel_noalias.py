"""A parallel body keeps the kernel's aliasing facts: its buffers are noalias there too, so a
reduction accumulated in the output stays in registers between its taps."""

from __future__ import annotations

import numpy as np

from autosched import te
from autosched.hai.llvm_cpu import LLVMCPUAdapter
from autosched.lower.ir import Buffer, For, Load, PrimFunc, Store, seq
from autosched.te.expr import Var, binary, const


def _window_max(kind: str) -> PrimFunc:
    """out[r, j] = max over 3 taps of x[r + t, j]: the taps update out in place, as a lowered pool does."""
    R, n = 64, 16
    x, out = Buffer("x", (R + 2, n), "float32", "global"), Buffer("out", (R, n), "float32", "global")
    r, t, j = Var("r"), Var("t"), Var("j")
    init = For(j, n, "vectorized", Store(out, (r, j), const(-np.inf, "float32")))
    here = Load(out, (r, j), "float32")
    tap = Store(out, (r, j), binary("max", here, Load(x, (r + t, j), "float32")))
    body = For(t, 3, "unrolled", For(j, n, "vectorized", tap))
    return PrimFunc("wmax", (x, out), For(r, R, kind, seq(init, body)))


# LLVM's unroll count depends on the CPU it tunes for (rocketlake 2, emeraldrapids 4): the store
# counts are taken for one fixed CPU, the IR only (nothing runs), so they hold on any host.
_COUNTED = LLVMCPUAdapter("llvm-cpu -mcpu=rocketlake")


def _vector_stores(func: PrimFunc) -> int:
    mod, _ = _COUNTED._optimized_module(func, "default")
    return sum(line.lstrip().startswith("store <16 x float>") for line in str(mod).splitlines())


def test_parallel_body_stores_once_per_output(run, rng) -> None:
    """The parallel kernel optimizes as the serial one: an output row stored once after its taps
    (LLVM unrolls the row loop twice, the parallel chunk gets a prologue for an odd count: 2 and 3
    stores). Without noalias in the outlined body: 12, the init and each tap stored."""
    serial = _vector_stores(_window_max("serial"))
    assert serial <= 2
    assert _vector_stores(_window_max("parallel")) <= serial + 1
    a = rng.normal(size=(66, 16)).astype("float32")
    out = np.full((64, 16), np.nan, "float32")
    run(_window_max("parallel"), a, out)
    np.testing.assert_array_equal(out, np.maximum(np.maximum(a[:-2], a[1:-1]), a[2:]))


def test_parallel_bodies_with_loop_values_match_numpy() -> None:
    """A parallel loop inside a serial one passes the outer loop's value into the noalias body."""
    from autosched.search_space.schedule import create_schedule
    from autosched.testing import assert_matches_numpy

    A = te.placeholder((6, 32, 16), name="A")
    B = te.compute((6, 32, 16), lambda i, j, k: A[i, j, k] * 2.0 + A[i, 31 - j, k], name="B")
    s = create_schedule(B)
    s[B].parallel(s[B].op.axis[1])
    s[B].vectorize(s[B].op.axis[2])
    assert_matches_numpy(s, [A, B])
