"""Cache traffic per buffer: a buffer whose power-of-two stride crowds a few sets misses in its own sets,
not the other buffers' tiles; a load LICM hoisted out of a loop misses no more lines than it touches;
a min or max accumulated in memory waits for its masked store, which costs what the chip's store unit
makes it."""

from __future__ import annotations

import dataclasses

from autosched.lower.ir import Buffer, For, Load, PrimFunc, Seq, Store
from autosched.sim.chip import load_chip
from autosched.sim.model import predict
from autosched.te.expr import Binary, Var

CHIP = load_chip("rocketlake")  # 16 float lanes, 8-way caches
F32 = "float32"


def _l2(func: PrimFunc, chip=CHIP) -> float:
    return sum(st.bounds.get("L2", 0.0) for st in predict(func, chip).stores)


def _column_sums(accumulate: bool) -> PrimFunc:
    """For r, i, j (16 lanes): ``acc[i, j] += S[i, r]``, or only ``last[j] = S[i, r]`` (one line
    written). S's rows are 4 KiB apart, so its 64 lines of one r crowd a few sets past their ways;
    acc (4 KiB) fits."""
    r, i, j = Var("r", "int64"), Var("i", "int64"), Var("j", "int64")
    s = Buffer("S", (64, 1024), F32)
    if accumulate:
        out = Buffer("acc", (64, 16), F32)
        store = Store(out, (i, j), Binary("+", Load(out, (i, j), F32), Load(s, (i, r), F32), F32))
    else:
        out = Buffer("last", (16,), F32)
        store = Store(out, (j,), Load(s, (i, r), F32))
    body = For(i, 64, "serial", For(j, 16, "vectorized", store))
    return PrimFunc("sums", (s, out), For(r, 8, "serial", body))


def test_a_buffer_crowding_its_sets_does_not_bring_the_other_tiles_in_again():
    # S misses on every i either way; the accumulator's 4 KiB stays in L1 across r and i (before, the
    # crowded S made the whole tile miss: acc's lines were fetched and written back on every i too)
    with_acc, s_only = _l2(_column_sums(True)), _l2(_column_sums(False))
    assert s_only > 0
    assert with_acc < 1.5 * s_only


def _gathered_rows(rows: int) -> PrimFunc:
    """For k, i (``rows``, a real loop), j (32 lanes): ``out[i, j] += X[i, k] * W[j, k]``. W is gathered
    (rows of 4 KiB: its 32 lines crowd a few sets) and does not move with i: LICM hoists the gather
    out of i, so W's lines are touched once a k, not once an (i, k)."""
    k, i, j = Var("k", "int64"), Var("i", "int64"), Var("j", "int64")
    x, w, out = Buffer("X", (rows, 1024), F32), Buffer("W", (32, 1024), F32), Buffer("out", (rows, 32), F32)
    prod = Binary("*", Load(x, (i, k), F32), Load(w, (j, k), F32), F32)
    update = Store(out, (i, j), Binary("+", Load(out, (i, j), F32), prod, F32))
    body = For(i, rows, "serial", For(j, 32, "vectorized", update))
    return PrimFunc("dense", (x, w, out), For(k, 1024, "serial", body))


def test_a_hoisted_load_misses_no_more_lines_than_it_touches():
    # 16 rows of i: 16 x the FMAs, but W's misses stay those of one gather a k (X adds a line a row)
    one, many = _l2(_gathered_rows(1)), _l2(_gathered_rows(16))
    assert one > 0
    assert many < 3 * one


def _max_in_memory(op: str) -> PrimFunc:
    """For i, k (64, a real loop), then two vector updates ``acc[i, j] = op(acc[i, j], A[i, k, j])``: the
    loop carries the accumulator but stores it twice, so it lives in memory (as pool's guarded taps)."""
    i, k, j0, j1 = (Var(n, "int64") for n in ("i", "k", "j0", "j1"))
    a, acc = Buffer("A", (64, 64, 16), F32), Buffer("acc", (64, 16), F32)

    def update(j: Var) -> For:
        value = Binary(op, Load(acc, (i, j), F32), Load(a, (i, k, j), F32), F32)
        return For(j, 16, "vectorized", Store(acc, (i, j), value))

    body = For(k, 64, "serial", Seq((update(j0), update(j1))))
    return PrimFunc("red", (a, acc), For(i, 64, "serial", body))


def _chain(func: PrimFunc, chip) -> float:
    return sum(st.bounds["chain"] for st in predict(func, chip).stores)


def test_a_max_accumulated_in_memory_waits_for_its_masked_store():
    # LLVM stores max(acc, x) as a masked store of the lanes that changed; it does not forward to the
    # next load (measured: 16 cycles a step against 9). A chip without masked stores blends instead.
    assert _chain(_max_in_memory("max"), CHIP) > 1.5 * _chain(_max_in_memory("+"), CHIP)
    neon = load_chip("neon-server")
    assert _chain(_max_in_memory("max"), neon) == _chain(_max_in_memory("+"), neon)


def _compute(func: PrimFunc, chip) -> float:
    return sum(st.bounds["compute"] for st in predict(func, chip).stores)


def test_an_avx_masked_store_costs_what_the_chips_store_unit_makes_it():
    # Zen 3 microcodes vmaskmovps: 13 store-unit cycles a store, measured (plain stores: about 1). The
    # same code on a chip with AVX-512 stores under a mask register, which the field does not describe.
    avx2 = load_chip("avx2-desktop")
    slow = dataclasses.replace(avx2, masked_store_cycles=13.0)
    assert _compute(_max_in_memory("max"), slow) > 3 * _compute(_max_in_memory("max"), avx2)
    plus = _max_in_memory("+")  # no mask: a plain store
    assert _compute(plus, slow) == _compute(plus, avx2)
    assert predict(_max_in_memory("max"), slow).seconds > predict(_max_in_memory("max"), avx2).seconds
    wide = dataclasses.replace(CHIP, masked_store_cycles=13.0)  # AVX-512: not vmaskmovps
    assert _compute(_max_in_memory("max"), wide) == _compute(_max_in_memory("max"), CHIP)


def _row_broadcasts(rows: int) -> PrimFunc:
    """For k (64, a real loop), i (``rows``), j (8 lanes): ``acc[i, j] += S[i, k]``, matmul's A: S's rows
    are 4 KiB apart, so its ``rows`` lines of one k all map onto one set, and each line serves 16 k."""
    k, i, j = Var("k", "int64"), Var("i", "int64"), Var("j", "int64")
    s, acc = Buffer("S", (rows, 1024), F32), Buffer("acc", (rows, 8), F32)
    update = Store(acc, (i, j), Binary("+", Load(acc, (i, j), F32), Load(s, (i, k), F32), F32))
    body = For(i, rows, "serial", For(j, 8, "vectorized", update))
    return PrimFunc("rows", (s, acc), For(k, 64, "serial", body))


def test_a_set_crowded_past_its_ways_misses_more_the_more_it_is_crowded():
    # 8 rows fit the 8 ways of Zen 3's L1: a line a row for all 64 k. Two rows past the ways miss
    # part of the time (its replacement is not strict LRU: measured, 10-row matmul tiles ran as fast as
    # 8-row ones), twice the ways miss on every k
    chip = load_chip("znver3")
    per_row = {rows: _l2(_row_broadcasts(rows), chip) / rows for rows in (8, 10, 12, 16)}
    assert per_row[8] > 0
    assert per_row[8] < per_row[10] < per_row[12] < per_row[16]
    assert per_row[10] < 0.5 * per_row[16]
    assert per_row[16] > 8 * per_row[8]
