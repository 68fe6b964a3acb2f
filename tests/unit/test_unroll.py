"""The auto_unroll_max_step pragma: which loops it unrolls."""

from __future__ import annotations

from autosched.lower.ir import Buffer, For, Load, PrimFunc, Store
from autosched.lower.unroll import auto_unroll
from autosched.te.expr import Var, const, select


def _nest(value_of) -> For:
    """for i in 8 (pragma 64): for r in 8: for j in 16 (vectorized): B[j] = B[j] + value"""
    A, B = Buffer("A", (16,), "float32", "global"), Buffer("B", (16,), "float32", "global")
    i, r, j = Var("i"), Var("r"), Var("j")
    body = For(j, 16, "vectorized", Store(B, (j,), Load(B, (j,), "float32") + value_of(A, j)))
    return For(i, 8, "serial", For(r, 8, "serial", body), annotations=(("auto_unroll_max_step", 64),))


def _kinds(loop: For) -> list[str]:
    f = auto_unroll(PrimFunc("f", (), loop))
    out, s = [], f.body
    while isinstance(s, For):
        out.append(s.kind)
        s = s.body
    return out


def test_vector_loop_counts_once() -> None:
    loop = _nest(lambda A, j: Load(A, (j,), "float32"))
    assert _kinds(loop) == ["serial", "unrolled", "vectorized"]  # 8 x 1 steps <= 64


def test_vector_loop_with_a_condition_counts_every_lane() -> None:
    # Padding along the vector axis may be emitted lane by lane: 8 x 16 scalar steps stay a loop
    # (LLVM took over 30 s on 504 unrolled copies of such a 56-lane body).
    loop = _nest(lambda A, j: select(j < 8, Load(A, (j,), "float32"), const(0.0)))
    assert _kinds(loop) == ["serial", "serial", "vectorized"]


def test_vector_loop_with_a_gather_counts_every_lane() -> None:
    def strided(A: Buffer, j: Var) -> Load:
        W = Buffer("W", (16, 4), "float32", "global")  # W[j, 0]: stride 4 along the vector axis
        return Load(W, (j, const(0)), "float32")

    assert _kinds(_nest(strided)) == ["serial", "serial", "vectorized"]
    # Contiguous and uniform accesses (A[j], A[0]) keep one vector instruction a statement.
    assert _kinds(_nest(lambda A, j: Load(A, (j,), "float32") * Load(A, (const(0),), "float32"))) == [
        "serial",
        "unrolled",
        "vectorized",
    ]
