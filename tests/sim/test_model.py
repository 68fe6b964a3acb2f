"""The time model's facts: more bandwidth or cache never predicts slower, a tile that spills predicts
slower than one that fits, vector lanes and cores help, guards are weighed by how often they hold."""

from __future__ import annotations

import dataclasses
import random

import pytest

from autosched import te
from autosched.lower.ir import Buffer, For, Store
from autosched.lower.pipeline import lower
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.sim.chip import ChipSpec, load_chip
from autosched.sim.explain import explain
from autosched.sim.guards import guard_share
from autosched.sim.model import predict
from autosched.te.expr import Compare, Const, Var
from autosched.topi.workloads import make_conv2d, make_matmul, make_max_pool2d, make_softmax

CHIP = load_chip("rocketlake")


def _scaled(chip: ChipSpec, bw: float = 1.0, cache: float = 1.0) -> ChipSpec:
    caches = tuple(
        dataclasses.replace(c, bandwidth_gbs=c.bandwidth_gbs * bw, size_bytes=int(c.size_bytes * cache))
        for c in chip.caches
    )
    single = chip.single_core_memory_bandwidth_gbs * bw
    return dataclasses.replace(
        chip,
        caches=caches,
        memory_bandwidth_gbs=chip.memory_bandwidth_gbs * bw,
        single_core_memory_bandwidth_gbs=single,
    )


def _sampled(n: int = 12):
    rng = random.Random(3)
    for ts in (
        make_matmul(128, 128, 128),
        make_conv2d(1, 16, 14, 14, 16, 3, 3, 1, 1),
        make_softmax((64, 256)),
        make_max_pool2d(1, 16, 28, 28, 3, 2, 1),
    ):
        policy = SketchPolicy([ts[-1]], cores=CHIP.cores, lanes=CHIP.lanes)
        for _ in range(n):
            sch, _ = policy.sample(rng)
            yield lower(sch, ts, "k")


def test_more_bandwidth_or_cache_never_predicts_slower():
    faster, bigger = _scaled(CHIP, bw=2.0), _scaled(CHIP, cache=4.0)
    for func in _sampled():
        base = predict(func, CHIP).seconds
        assert base > 0
        assert predict(func, faster).seconds <= base * (1 + 1e-12)
        assert predict(func, bigger).seconds <= base * (1 + 1e-12)


def test_less_bandwidth_makes_a_streaming_kernel_slower():
    ts = make_softmax((2048, 1024))  # 8 MiB in, 8 MiB out: more than L2
    func = lower(create_schedule(ts[-1]), ts, "k")
    slow = _scaled(CHIP, bw=0.1)
    assert predict(func, slow).seconds > 2 * predict(func, CHIP).seconds


def _with_l3(chip: ChipSpec, size_bytes: int) -> ChipSpec:
    caches = tuple(dataclasses.replace(c, size_bytes=size_bytes) if c.shared else c for c in chip.caches)
    return dataclasses.replace(chip, caches=caches)


def test_a_program_that_fits_the_shared_cache_whole_moves_nothing_from_memory_when_warm():
    """Kernels are timed warm: a softmax's 24 MiB (input, exp intermediate, output), its rows split over
    both cores, stay in a shared 40 MiB L3 between runs, though each core's share of it (20 MiB) is
    smaller; 24 MiB cannot hold them."""
    ts = make_softmax((2048, 1024))
    s = create_schedule(ts[-1])
    for name in ("softmax_maxelem", "softmax_exp", "softmax_expsum", "softmax_norm"):
        s[name].parallel(s[name].op.axis[0])
    func = lower(s, ts, "k")
    fits = predict(func, _with_l3(CHIP, 40 << 20))
    assert CHIP.cores == 2 and all(st.bounds.get("DRAM", 0.0) == 0.0 for st in fits.stores)
    spills = predict(func, _with_l3(CHIP, 24 << 20))
    assert any(st.bounds.get("DRAM", 0.0) > 0 for st in spills.stores)


def _matmul_tile(ti: int, tj: int, n: int = 256):
    """C[i, j] += A[i, k] * B[k, j] with an unrolled ti x vectorized tj register tile under k."""
    A, B, C = make_matmul(n, n, n)
    s = create_schedule(C)
    i, j = s[C].op.axis
    (k,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, factor=ti)
    jo, ji = s[C].split(j, factor=tj)
    s[C].reorder(io, jo, k, ii, ji)
    s[C].unroll(ii)
    s[C].vectorize(ji)
    return lower(s, [A, B, C], "mm")


def test_a_register_tile_that_spills_predicts_slower_than_one_that_fits():
    fits = predict(_matmul_tile(4, 64), CHIP)  # 16 vector accumulators: within 32 registers
    spills = predict(_matmul_tile(16, 256), CHIP)  # 256 accumulators
    assert spills.seconds > fits.seconds
    assert any("spill" in note for st in spills.stores for note in st.notes)
    assert not any("spill" in note for st in fits.stores for note in st.notes)


def test_a_cache_tile_that_spills_predicts_slower_than_one_that_fits():
    func = _matmul_tile(4, 64, n=512)  # B (1 MiB) is swept once per row of tiles
    small = _scaled(CHIP, cache=1 / 16)  # L2 128 KiB: B no longer fits
    assert predict(func, small).seconds > predict(func, CHIP).seconds


def test_vectorized_and_parallel_schedules_predict_faster():
    A, B, C = make_matmul(256, 256, 256)
    plain = predict(lower(create_schedule(C), [A, B, C], "mm"), CHIP).seconds
    tiled = _matmul_tile(4, 64)
    s_par = create_schedule(C)
    i, j = s_par[C].op.axis
    (k,) = s_par[C].op.reduce_axis
    io, ii = s_par[C].split(i, factor=4)
    jo, ji = s_par[C].split(j, factor=64)
    s_par[C].reorder(io, jo, k, ii, ji)
    s_par[C].unroll(ii)
    s_par[C].vectorize(ji)
    s_par[C].parallel(io)
    par = predict(lower(s_par, [A, B, C], "mm"), CHIP).seconds
    assert predict(tiled, CHIP).seconds < plain
    assert par < predict(tiled, CHIP).seconds
    one_core = dataclasses.replace(CHIP, cores=1)
    assert predict(lower(s_par, [A, B, C], "mm"), one_core).seconds > par


def test_guards_are_weighed_by_their_share():
    x = Var("x", "int64")
    buf = Buffer("b", (10,), "int64")
    loop = For(x, 10, "serial", Store(buf, (x,), x))
    assert guard_share(Compare(">=", x, Const(1, "int64")), [loop]) == pytest.approx(0.9, abs=0.15)
    assert guard_share(Compare(">=", x, Const(0, "int64")), [loop]) == 1.0
    ts = make_max_pool2d(1, 4, 12, 12, 3, 2, 1)  # padding guards: the common branch carries the time
    pred = predict(lower(create_schedule(ts[-1]), ts, "pool"), CHIP)
    assert pred.seconds > 0 and sum(st.executions for st in pred.stores) < 2 * 4 * 6 * 6 * 10


def test_explain_names_the_dominant_bound():
    text = explain(predict(_matmul_tile(16, 256), CHIP), flops=2 * 256**3)
    assert "bound by" in text and "GFLOP/s" in text and "rocketlake" in text
    assert "spill" in text


def _copy_with_guard(on: str | None, op: str = ">=", bound: int = 1):
    """out[j, i] = A[j, i] over i, j (j innermost, strided: scalar code), under ``if (on op bound)``."""
    from autosched.lower.ir import IfThenElse, Load, PrimFunc

    i, j = Var("i", "int64"), Var("j", "int64")
    a, out = Buffer("A", (64, 64), "float32"), Buffer("out", (64, 64), "float32")
    body: Store | IfThenElse = Store(out, (j, i), Load(a, (j, i), "float32"))
    if on:
        body = IfThenElse(Compare(op, {"i": i, "j": j}[on], Const(bound, "int64")), body)
    return PrimFunc("copy", (a, out), For(i, 64, "serial", For(j, 64, "serial", body)))


def test_a_guard_tested_in_the_innermost_loop_costs_instructions():
    plain = predict(_copy_with_guard(None), CHIP).seconds
    outer = predict(_copy_with_guard("i", bound=8), CHIP).seconds  # invariant in j: unswitched
    inner = predict(_copy_with_guard("j", bound=8), CHIP).seconds  # a compare and branch at every j
    assert outer <= plain
    assert inner > 1.1 * outer


def test_a_guard_llvm_folds_or_peels_costs_nothing():
    """A test that holds over the whole loop is folded; one that fails only in the first iterations
    of the innermost loop is peeled off them (a max pool's ``2 x + rx - 1 >= 0``: one iteration)."""
    plain = predict(_copy_with_guard(None), CHIP).seconds
    assert predict(_copy_with_guard("j", "<", 64), CHIP).seconds == pytest.approx(plain, rel=1e-9)
    peeled = predict(_copy_with_guard("j", ">=", 1), CHIP).seconds
    assert peeled == pytest.approx(plain * 63 / 64, rel=0.05)
    kept = predict(_copy_with_guard("j", "<", 63), CHIP).seconds  # fails at the end: a branch each j
    assert kept > 1.1 * peeled


def _unrolled_guards(k: int, guarded: bool, bound: int = 8):
    """out[i, u] += A[r, u] over i, r (real loops) and an unrolled u of ``k``, under ``if (i + u >= bound)``:
    invariant in the innermost real loop r, one distinct condition per unrolled copy (with bound 8, each
    may fail; with 1, only u = 0's)."""
    from autosched.lower.ir import IfThenElse, Load, PrimFunc
    from autosched.te.expr import Binary

    i, r, u = Var("i", "int64"), Var("r", "int64"), Var("u", "int64")
    a, out = Buffer("A", (64, k), "float32"), Buffer("out", (64, k), "float32")
    update = Binary("+", Load(out, (i, u), "float32"), Load(a, (r, u), "float32"), "float32")
    body: Store | IfThenElse = Store(out, (i, u), update)
    if guarded:
        body = IfThenElse(Compare(">=", Binary("+", i, u, "int64"), Const(bound, "int64")), body)
    return PrimFunc("acc", (a, out), For(i, 64, "serial", For(r, 64, "serial", For(u, k, "unrolled", body))))


def test_guards_past_what_llvm_unswitches_stay_branches_in_the_loop():
    """A condition invariant in the innermost real loop is unswitched out of it while its unrolled copies
    are few (two: free); eight distinct copies stay eight branches in the loop body (a conv's padding
    tests inside its unrolled register tile measured 1.44 ms against 0.59 ms with the padding
    materialized)."""
    for k, charged in ((2, False), (8, True)):
        plain = predict(_unrolled_guards(k, False), CHIP).seconds
        guarded = predict(_unrolled_guards(k, True), CHIP).seconds
        if charged:
            assert guarded > 1.05 * plain, (k, guarded, plain)
        else:
            assert guarded <= plain * 1.001, (k, guarded, plain)
    # copies that always hold are folded (i >= 0): of 8, only u = 0's test is left, and it is unswitched
    assert (
        predict(_unrolled_guards(8, True, bound=1), CHIP).seconds
        <= predict(_unrolled_guards(8, False), CHIP).seconds * 1.001
    )


def _guarded_lanes(lanes: int, scaled: bool):
    """out[i, x] = select(cond(x), A[i, x], 0) over a vectorized x that codegen leaves serial (the select
    guards a load with a condition on the lanes): ``x * 2 + i * 3 >= 5`` (``scaled``) or ``x + i >= 1``."""
    from autosched.lower.ir import Load, PrimFunc
    from autosched.te.expr import Binary, Select

    i, x = Var("i", "int64"), Var("x", "int64")
    a, out = Buffer("A", (64, lanes), "float32"), Buffer("out", (64, lanes), "float32")
    two, three = Const(2, "int64"), Const(3, "int64")
    if scaled:
        lhs = Binary("+", Binary("*", x, two, "int64"), Binary("*", i, three, "int64"), "int64")
    else:
        lhs = Binary("+", x, i, "int64")
    cond = Compare(">=", lhs, Const(5 if scaled else 1, "int64"))
    value = Select(cond, Load(a, (i, x), "float32"), Const(0.0, "float32"), "float32")
    return PrimFunc(
        "g", (a, out), For(i, 64, "serial", For(x, lanes, "vectorized", Store(out, (i, x), value)))
    )


def test_index_arithmetic_of_lanes_llvm_unrolls_is_folded():
    few = predict(_guarded_lanes(4, True), CHIP).seconds, predict(_guarded_lanes(4, False), CHIP).seconds
    assert few[0] == pytest.approx(few[1], rel=1e-9)  # 4 lanes unrolled: the arithmetic is offsets
    many = predict(_guarded_lanes(256, True), CHIP).seconds, predict(_guarded_lanes(256, False), CHIP).seconds
    assert many[0] > many[1]  # a real loop of 256: the multiply and add run every iteration


def _padded_row(width: int, stride: int):
    """out[i, x] = select(x * stride + i >= 1, A[i, x * stride - 1], 0): a padded row read under a guard
    on the lanes, over a vectorized x that codegen leaves to LLVM (``width`` lanes, 64 rows)."""
    from autosched.lower.ir import Load, PrimFunc
    from autosched.te.expr import Binary, Select

    i, x = Var("i", "int64"), Var("x", "int64")
    a, out = Buffer("A", (64, width * stride), "float32"), Buffer("out", (64, width), "float32")
    col = Binary("*", x, Const(stride, "int64"), "int64") if stride > 1 else x
    cond = Compare(">=", Binary("+", col, i, "int64"), Const(1, "int64"))
    value = Select(cond, Load(a, (i, Binary("-", col, Const(1, "int64"), "int64")), "float32"),
                   Const(0.0, "float32"), "float32")  # fmt: skip
    return PrimFunc(
        "pad", (a, out), For(i, 64, "serial", For(x, width, "vectorized", Store(out, (i, x), value)))
    )


def test_a_guarded_load_vectorizes_when_contiguous_and_long_enough():
    """LLVM's vectorizer masks a contiguous guarded load at the chip's lanes, but leaves a loop shorter
    than its minimum trip count (16) to the full unroller, which makes it lane by lane: a depthwise
    conv's padded 8-wide rows under -mcpu=haswell ran 0.34 ms (102 scalar FMAs, 52 branches), its
    56-wide rows 0.056 ms (vmaskmovps). A strided guarded load is a gather: a fraction of the lanes."""
    avx2 = load_chip("avx2-desktop")
    assert avx2.lanes == 8

    def per_element(width: int, stride: int = 1) -> float:
        return predict(_padded_row(width, stride), avx2).stores[0].bounds["compute"] / width

    short, long = per_element(8), per_element(64)
    assert short > 3 * long, (short, long)
    assert per_element(64, stride=2) > 2 * long


def _tile_per_row(inside: bool):
    """For each row i (the innermost real loop): acc[x] = 0, then nine unrolled updates acc[x] += A[i, r, x],
    then out[i, x] = acc[x]. ``inside``: acc is allocated in i's body, else acc[i, x] is one tile per row
    allocated outside (the same independent chains, spelled apart)."""
    from autosched.lower.ir import Allocate, Load, PrimFunc, Seq
    from autosched.te.expr import Binary

    i, r, x = Var("i", "int64"), Var("r", "int64"), Var("x", "int64")
    x0, x1 = Var("x0", "int64"), Var("x1", "int64")
    a, out = Buffer("A", (64, 9, 8), "float32"), Buffer("out", (64, 8), "float32")
    acc = Buffer("acc", (8,) if inside else (64, 8), "float32")

    def at(v: Var) -> tuple:
        return (v,) if inside else (i, v)

    update = Binary("+", Load(acc, at(x), "float32"), Load(a, (i, r, x), "float32"), "float32")
    body = Seq((
        For(x0, 8, "vectorized", Store(acc, at(x0), Const(0.0, "float32"))),
        For(r, 9, "unrolled", For(x, 8, "vectorized", Store(acc, at(x), update))),
        For(x1, 8, "vectorized", Store(out, (i, x1), Load(acc, at(x1), "float32"))),
    ))  # fmt: skip
    loop = For(i, 64, "serial", Allocate(acc, body) if inside else body)
    return PrimFunc("rows", (a, out), loop if inside else Allocate(acc, loop))


def test_a_tile_allocated_in_the_loop_carries_no_chain_across_it():
    chains = []
    for inside in (True, False):
        (upd,) = [s for s in predict(_tile_per_row(inside), CHIP).stores if s.bounds["chain"] > 0]
        chains.append(upd.bounds["chain"])
    assert chains[0] == pytest.approx(chains[1], rel=1e-6)


def _elementwise(fn):
    A = te.placeholder((64, 256), name="A")
    B = te.compute((64, 256), lambda i, j: fn(A[i, j]), name="B")
    s = create_schedule(B)
    _, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    return lower(s, [A, B], "ew")


def test_exp_costs_more_without_avx512s_rounding_and_scaling_instructions():
    assert "avx512f" in CHIP.features
    portable = dataclasses.replace(CHIP, features=tuple(f for f in CHIP.features if f != "avx512f"))
    exp = _elementwise(te.exp)
    compute = [sum(st.bounds["compute"] for st in predict(exp, c).stores) for c in (CHIP, portable)]
    assert compute[1] > compute[0] > 0
    fma = _elementwise(lambda a: a * 2.0 + 1.0)  # no exp: the same on both
    assert predict(fma, portable).seconds == predict(fma, CHIP).seconds


def test_a_streamed_store_writes_to_memory_even_when_the_program_fits_a_cache():
    """Non-temporal stores bypass the caches: a 1.5 MB elementwise output that stays in L3 when stored
    plainly costs its bytes at memory bandwidth when streamed (codegen.llvm_stream)."""
    A = te.placeholder((512, 768), name="A")
    B = te.compute((512, 768), lambda i, j: A[i, j] * 2.0, name="B")

    def kernel(streamed: bool):
        s = create_schedule(B)
        s[B].parallel(s[B].op.axis[0])
        s[B].vectorize(s[B].op.axis[1])
        if streamed:
            s[B].pragma(s[B].op.axis[1], "stream_stores", 1)
        return lower(s, [A, B], "k")

    plain, streamed = predict(kernel(False), CHIP), predict(kernel(True), CHIP)
    assert all(st.bounds.get("DRAM", 0.0) == 0.0 for st in plain.stores)  # 3 MB in all: warm in L3
    (st,) = streamed.stores
    assert st.bounds["DRAM"] >= 512 * 768 * 4 / (CHIP.memory_bandwidth_gbs * 1e9) * 0.99
    assert streamed.seconds > plain.seconds
