"""Vectors held in registers: LICM keeps an accumulator across a loop only when that loop stores it once,
an unrolled reduction keeps it in straight-line code,
an odd-width one held there costs the pieces codegen cuts it into (28 lanes: 16 + 8 + 4), and a gathered
operand is kept across the innermost loop only while the gathers fit in registers."""

from __future__ import annotations

import dataclasses

from autosched.lower.ir import Allocate, Buffer, For, Load, PrimFunc, Seq, Store
from autosched.sim.chip import load_chip
from autosched.sim.model import predict
from autosched.te.expr import Binary, Const, Var

CHIP = load_chip("rocketlake")  # 16 float lanes


def _row_sums(width: int, k_kind: str, store_inside: bool = False) -> PrimFunc:
    """out[i, j] = sum_k A[i, k, j] through a local accumulator re-initialised for every i; the lanes of
    j are one vector of ``width`` floats. ``store_inside``: acc is also written once more every k."""
    i, k, j0, j1, j2 = (Var(n, "int64") for n in ("i", "k", "j0", "j1", "j2"))
    a = Buffer("A", (8, 64, width), "float32")
    out = Buffer("out", (8, width), "float32")
    acc = Buffer("acc", (width,), "float32", scope="local")
    init = For(j0, width, "vectorized", Store(acc, (j0,), Const(0.0, "float32")))
    update = Store(
        acc, (j1,), Binary("+", Load(acc, (j1,), "float32"), Load(a, (i, k, j1), "float32"), "float32")
    )
    step: Store | Seq = update
    if store_inside:
        step = Seq(
            (
                update,
                Store(acc, (j1,), Binary("*", Load(acc, (j1,), "float32"), Const(1.0, "float32"), "float32")),
            )
        )
    red = For(k, 64, k_kind, For(j1, width, "vectorized", step))
    back = For(j2, width, "vectorized", Store(out, (i, j2), Load(acc, (j2,), "float32")))
    return PrimFunc("rows", (a, out), For(i, 8, "serial", Allocate(acc, Seq((init, red, back)))))


def _notes(func: PrimFunc) -> list[str]:
    return [n for st in predict(func, CHIP).stores for n in st.notes]


def test_an_odd_width_accumulator_held_across_a_loop_costs_its_codegen_pieces():
    # codegen cuts 28 lanes into 16 + 8 + 4 (vector_chunks), so the held accumulator is three vectors,
    # not lanes one by one: a little slower than 32 lanes (two), far from the 8x of scalarized code
    # (measured on Zen 5: such 56-wide conv tiles were among the fastest candidates)
    odd, wide = _row_sums(28, "serial"), _row_sums(32, "serial")
    assert not any("scalarized" in n for n in _notes(odd))
    assert predict(wide, CHIP).seconds <= predict(odd, CHIP).seconds < 2 * predict(wide, CHIP).seconds


def test_an_accumulator_is_held_across_a_loop_only_when_the_loop_stores_it_once():
    # LICM keeps acc in a register across serial k when k's body stores it once; a second store of it
    # in there keeps it in memory, each update a store-to-load forward (the extra work alone: 1.55x)
    held, twice = _row_sums(32, "serial"), _row_sums(32, "serial", store_inside=True)
    assert predict(twice, CHIP).seconds > 2.2 * predict(held, CHIP).seconds


def test_an_unrolled_reduction_keeps_its_accumulator_in_registers():
    # k unrolled inside i is straight-line code: GVN forwards acc from one copy to the next and DSE keeps
    # its last store, as LICM does across a serial k (a max pool's assembly: one store an output vector,
    # not nine; the model had such pool schedules 2-2.7x slower than measured before)
    flat, held = _row_sums(32, "unrolled"), _row_sums(32, "serial")
    assert predict(flat, CHIP).seconds < 1.2 * predict(held, CHIP).seconds


def _strided_dense(lanes: int) -> PrimFunc:
    """out[i, j] += X[i, k] * W[j, k] with j the vector (W gathered at a stride of 128), k split 32 x 4
    and the 4 unrolled inside i: the 4 gathered W vectors do not move with i."""
    ko, i, ki, j = (Var(n, "int64") for n in ("ko", "i", "ki", "j"))
    x, w = Buffer("X", (64, 128), "float32"), Buffer("W", (lanes, 128), "float32")
    out = Buffer("out", (64, lanes), "float32")
    k = Binary("+", Binary("*", ko, Const(4, "int64"), "int64"), ki, "int64")
    prod = Binary("*", Load(x, (i, k), "float32"), Load(w, (j, k), "float32"), "float32")
    update = Store(out, (i, j), Binary("+", Load(out, (i, j), "float32"), prod, "float32"))
    body = For(ki, 4, "unrolled", For(j, lanes, "vectorized", update))
    return PrimFunc("dense", (x, w, out), For(ko, 32, "serial", For(i, 64, "serial", body)))


def test_gathers_invariant_in_the_innermost_loop_are_hoisted_while_they_fit_in_registers():
    few = dataclasses.replace(CHIP, vector_registers=8)  # room for 2 hoisted vectors, not 4
    func = _strided_dense(CHIP.lanes)
    assert predict(func, few).seconds > 1.5 * predict(func, CHIP).seconds


def _unrolled_rows(rows: int) -> PrimFunc:
    """out[i, j] += X[i, k] * W[j, k], W gathered at a stride of 128; for k (real), i (``rows``,
    unrolled), j: the unrolled rows all gather the same W vector."""
    k, i, j = (Var(n, "int64") for n in ("k", "i", "j"))
    x, w = Buffer("X", (rows, 128), "float32"), Buffer("W", (CHIP.lanes, 128), "float32")
    out = Buffer("out", (rows, CHIP.lanes), "float32")
    prod = Binary("*", Load(x, (i, k), "float32"), Load(w, (j, k), "float32"), "float32")
    update = Store(out, (i, j), Binary("+", Load(out, (i, j), "float32"), prod, "float32"))
    body = For(i, rows, "unrolled", For(j, CHIP.lanes, "vectorized", update))
    return PrimFunc("dense", (x, w, out), For(k, 128, "serial", body))


def test_the_copies_of_one_gather_in_unrolled_rows_are_gathered_once():
    # GVN merges them (seen in the assembly of a dense candidate: one gather a k step for its 10
    # unrolled rows): 8 rows add 8 FMAs a step to one gather's 16 loads and 48 inserts, not 8 gathers
    one = predict(_unrolled_rows(1), CHIP).seconds
    assert predict(_unrolled_rows(8), CHIP).seconds < 2 * one


def _unrolled_tile(rows: int) -> PrimFunc:
    """out[i, r, j] += A[i, k, j] over a real i, then unrolled r (rows of accumulators), unrolled k and
    32 lanes of j (two registers each): one straight-line body of rows x 2 accumulator registers."""
    i, r, k, j = (Var(n, "int64") for n in ("i", "r", "k", "j"))
    a, out = Buffer("A", (64, 32, 32), "float32"), Buffer("out", (64, rows, 32), "float32")
    update = Store(
        out, (i, r, j), Binary("+", Load(out, (i, r, j), "float32"), Load(a, (i, k, j), "float32"), "float32")
    )
    body = For(r, rows, "unrolled", For(k, 32, "unrolled", For(j, 32, "vectorized", update)))
    return PrimFunc("tile", (a, out), For(i, 64, "serial", body))


def test_a_straight_line_body_holds_its_accumulators_only_while_all_of_them_fit():
    # LLVM interleaves the unrolled copies, so all the body's accumulators are in flight: 8 rows x 2
    # registers fit, 32 x 2 spill and each update goes through memory again (a dense tile of 4 x 4 x 4
    # registers with 32 k steps unrolled inside: measured 8.0 ms, modeled 2.6 ms while held)
    fits, spills = predict(_unrolled_tile(8), CHIP).seconds, predict(_unrolled_tile(32), CHIP).seconds
    assert spills / 32 > 1.3 * fits / 8
