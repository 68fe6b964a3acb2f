"""A parallel body keeps the kernel's aliasing facts: its buffers are noalias there too, so a
reduction accumulated in the output stays in registers between its taps; a tile allocated on the
heap inside it is known apart from the inputs as well (codegen.llvm_alias)."""

from __future__ import annotations

import numpy as np

from autosched import te
from autosched.codegen.llvm import MALLOC_ABOVE_BYTES
from autosched.hai.llvm_cpu import LLVMCPUAdapter
from autosched.lower.ir import Allocate, Buffer, For, Load, PrimFunc, Store, seq
from autosched.lower.stmt_visit import walk_stmts
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


# A sampled 1024^3 matmul schedule (benchmarks/simulator.py's candidates) whose accumulator tile,
# 256 x 256 floats, is too large for the stack: aligned_alloc inside the parallel body.
_HEAP_TILE = [
    ["cache_write", "matmul", ["local"]], ["split", "matmul", ["i", 512, None]],
    ["split", "matmul", ["i.inner", 256, None]], ["split", "matmul", ["j", 256, None]],
    ["split", "matmul", ["j.inner", 256, None]],
    ["reorder", "matmul", [["i.outer", "j.outer", "i.inner.outer", "j.inner.outer", "i.inner.inner",
                            "j.inner.inner"]]],
    ["compute_at", "matmul.local", ["matmul", "j.inner.outer"]],
    ["fuse", "matmul", [["i.outer", "j.outer", "i.inner.outer", "j.inner.outer"]]],
    ["parallel", "matmul", ["i.outer.j.outer.fused.i.inner.outer.fused.j.inner.outer.fused"]],
    ["split", "matmul", ["j.inner.inner", 16, None]], ["unroll", "matmul", ["j.inner.inner.outer"]],
    ["vectorize", "matmul", ["j.inner.inner.inner"]], ["split", "matmul.local", ["i", 16, None]],
    ["split", "matmul.local", ["j", 16, None]], ["split", "matmul.local", ["k", 8, None]],
    ["reorder", "matmul.local", [["k.outer", "i.outer", "j.outer", "k.inner", "i.inner", "j.inner"]]],
    ["vectorize", "matmul.local", ["j.inner"]],
    ["pragma", "matmul.local", ["k.outer", "auto_unroll_max_step", 512]],
]  # fmt: skip


def test_a_heap_tile_in_a_parallel_body_is_known_apart_from_the_inputs() -> None:
    """The tile's 16 x 16 block is updated 8 times in straight-line code (k.inner, i.inner unrolled):
    kept in registers, it is stored 32 times in the optimized module. Without alias scopes on every
    access: 144 stores (after every update, as a store to the tile might have changed B), and the
    1024^3 kernel ran in 23 ms instead of 10.5 (AMD Zen 5, 2 threads)."""
    from autosched.lower.pipeline import lower
    from autosched.search_space.schedule import replay
    from autosched.search_space.trace import trace_from_json
    from autosched.testing import assert_matches_numpy
    from autosched.topi.workloads import make_matmul

    args = make_matmul(512, 512, 64)
    sch = replay([args[-1]], trace_from_json(_HEAP_TILE))
    func = lower(sch, list(args), "matmul", "llvm-cpu")
    assert any(
        isinstance(s, Allocate) and s.buffer.size * 4 > MALLOC_ABOVE_BYTES for s in walk_stmts(func.body)
    )
    assert _vector_stores(func) <= 40
    assert_matches_numpy(replay([args[-1]], trace_from_json(_HEAP_TILE)), list(args))
