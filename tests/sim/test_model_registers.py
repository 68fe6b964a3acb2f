"""Accumulators held in registers: LICM keeps one across a loop only when that loop stores it once, and
an odd-width one held there (``<28 x float>`` loop-carried in registers) is scalarized and spilled."""

from __future__ import annotations

from autosched.lower.ir import Allocate, Buffer, For, Load, PrimFunc, Seq, Store
from autosched.sim.chip import load_chip
from autosched.sim.model import predict
from autosched.te.expr import Binary, Const, Var

CHIP = load_chip("rocketlake")  # 16 float lanes


def _row_sums(width: int, k_kind: str) -> PrimFunc:
    """out[i, j] = sum_k A[i, k, j] through a local accumulator re-initialised for every i; the lanes of
    j are one vector of ``width`` floats."""
    i, k, j0, j1, j2 = (Var(n, "int64") for n in ("i", "k", "j0", "j1", "j2"))
    a = Buffer("A", (8, 64, width), "float32")
    out = Buffer("out", (8, width), "float32")
    acc = Buffer("acc", (width,), "float32", scope="local")
    init = For(j0, width, "vectorized", Store(acc, (j0,), Const(0.0, "float32")))
    update = Store(
        acc, (j1,), Binary("+", Load(acc, (j1,), "float32"), Load(a, (i, k, j1), "float32"), "float32")
    )
    red = For(k, 64, k_kind, For(j1, width, "vectorized", update))
    back = For(j2, width, "vectorized", Store(out, (i, j2), Load(acc, (j2,), "float32")))
    return PrimFunc("rows", (a, out), For(i, 8, "serial", Allocate(acc, Seq((init, red, back)))))


def _notes(func: PrimFunc) -> list[str]:
    return [n for st in predict(func, CHIP).stores for n in st.notes]


def test_an_odd_width_accumulator_held_across_a_loop_is_scalarized():
    odd, wide = _row_sums(28, "serial"), _row_sums(32, "serial")
    assert any("scalarized" in n for n in _notes(odd))
    assert not any("scalarized" in n for n in _notes(wide))
    assert predict(odd, CHIP).seconds > 1.5 * predict(wide, CHIP).seconds  # fewer lanes, yet slower


def test_an_accumulator_re_initialised_in_a_loop_is_not_held_across_it():
    # the unrolled reduction leaves i the innermost real loop; acc does not move with i, but i's body
    # also initialises and reads it back, so it is no loop-carried register there (no scalarization)
    flat = _row_sums(28, "unrolled")
    assert not any("scalarized" in n for n in _notes(flat))
    assert predict(flat, CHIP).seconds < predict(_row_sums(28, "serial"), CHIP).seconds
