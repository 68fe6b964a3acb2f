"""The unswitch_guards pass: a window's padding tests leave the loops that do not change them, the
taken branch reads without a select, and every schedule still matches numpy."""

from __future__ import annotations

import random
from typing import Any

import pytest

from autosched import te
from autosched.lower.ir import For, IfThenElse, Store
from autosched.lower.pipeline import lower
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.te.expr import Select
from autosched.te.tensor import walk
from autosched.testing import assert_matches_numpy
from autosched.topi.transform import pad
from autosched.topi.workloads import (
    make_avg_pool2d,
    make_conv1d,
    make_conv2d,
    make_depthwise_conv2d,
    make_matmul,
    make_max_pool2d,
)


def _selects(s) -> int:
    return sum(isinstance(n, Select) for x in walk_stmts(s) if isinstance(x, Store) for n in walk(x.value))


def _capsule(n: int = 1, h: int = 6, ci: int = 4, co: int = 16) -> list:
    """NHWIJC capsule conv, 3x3 stride 2 pad 1 (the shape of vs_tvm's capsule_conv2d, smaller)."""
    data = te.placeholder((n, h, h, 4, 4, ci), name="data")
    kernel = te.placeholder((3, 3, 4, 4, ci, co), name="kernel")
    padded = pad(data, (0, 1, 1, 0, 0, 0), (0, 1, 1, 0, 0, 0))
    out = h // 2
    rh, rw = te.reduce_axis((0, 3), name="rh"), te.reduce_axis((0, 3), name="rw")
    ck, rc = te.reduce_axis((0, 4), name="cap_k"), te.reduce_axis((0, ci), name="rc")
    c = te.compute(
        (n, out, out, 4, 4, co),
        lambda b, y, x, i, j, o: te.sum(
            padded[b, y * 2 + rh, x * 2 + rw, i, ck, rc] * kernel[rh, rw, ck, j, rc, o], axis=[rh, rw, ck, rc]
        ),
        name="capsule",
    )
    return [data, kernel, c]


def _conv_padded_with(value: float, c: int = 4, h: int = 8, k: int = 4) -> list:
    """3x3 stride-1 NCHW conv of an image padded with ``value``: its border taps add ``value * W``."""
    data = te.placeholder((1, c, h, h), name="data")
    weight = te.placeholder((k, c, 3, 3), name="weight")
    padded = pad(data, (0, 0, 1, 1), (0, 0, 1, 1), pad_value=value)
    rc, ry, rx = (
        te.reduce_axis((0, c), name="rc"),
        te.reduce_axis((0, 3), name="ry"),
        te.reduce_axis((0, 3), name="rx"),
    )
    out = te.compute(
        (1, k, h, h),
        lambda n, f, y, x: te.sum(padded[n, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv",
    )
    return [data, weight, out]


def _taps_inside(args: list, unroll: int = 0) -> Any:
    """The plain loops of a padded conv with the channel loop inside the taps."""
    s = create_schedule(args[-1])
    s[args[-1].op.input_tensors[0]].compute_inline()
    st = s[args[-1]]
    rc, ry, rx = st.op.reduce_axis
    st.reorder(*st.op.axis, ry, rx, rc)
    if unroll:
        st.pragma(st.op.axis[0], "auto_unroll_max_step", unroll)
    return s


def test_padding_test_leaves_the_channel_loop() -> None:
    """Plain loops of a padded conv: the test of ``rx`` sits inside the ``rx`` loop around the channel
    loop, the taken branch has no select left and the other reads no input (the padding's zero)."""
    args = make_conv2d(C=4, H=8, W=8, K=4, stride=1)
    s = _taps_inside(args)
    loops = {x.var.name: x for x in walk_stmts(lower(s, args).body) if isinstance(x, For)}
    assert isinstance(loops["ry"].body, IfThenElse)  # yy + ry inside the image: then the rx loop
    guard = loops["rx"].body
    assert isinstance(guard, IfThenElse), "the rx test should be the rx loop's whole body"
    assert isinstance(guard.then, For) and guard.then.var.name == "rc"
    assert _selects(guard.then) == 0
    assert guard.otherwise is None, "a tap of the zero padding adds 0 * W: the border copy skips it"
    assert_matches_numpy(s, args)


def test_a_padding_that_is_not_zero_keeps_its_border_taps() -> None:
    """Padded with 1, a border tap adds ``1 * W``: the border copy keeps it, reading no input."""
    args = _conv_padded_with(1.0)
    s = _taps_inside(args)
    guard = next(x.body for x in walk_stmts(lower(s, args).body) if isinstance(x, For) and x.var.name == "rx")
    assert isinstance(guard, IfThenElse) and guard.otherwise is not None
    border = [x.value for x in walk_stmts(guard.otherwise) if isinstance(x, Store)]
    assert border and _selects(guard.otherwise) == 0 and "data" not in repr(border)
    assert_matches_numpy(s, args)


def test_a_test_that_loads_stays_in_place() -> None:
    """``select(B[i] > 0, ...)`` reads memory: evaluating it before its loop could fault, so it stays."""
    a, b = te.placeholder((8, 16), name="A"), te.placeholder((8,), name="B")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((8,), lambda i: te.sum(te.if_then_else(b[i] > 0, a[i, k], 0.0), axis=k), name="C")
    s = create_schedule(c)
    body = lower(s, [a, b, c]).body
    assert not any(isinstance(x, IfThenElse) for x in walk_stmts(body))
    assert_matches_numpy(s, [a, b, c])


CASES = {
    "capsule": _capsule,
    "conv2d_s1": lambda: make_conv2d(C=8, H=10, W=10, K=32, stride=1),
    "conv2d_s2": lambda: make_conv2d(C=4, H=9, W=9, K=16, stride=2),
    "conv1d_s2": lambda: make_conv1d(C=8, W=40, K=16, stride=2),
    "conv2d_pad_one": lambda: _conv_padded_with(1.0, c=8, h=10, k=32),
    "depthwise": lambda: make_depthwise_conv2d(C=32, H=10, W=10),
    "max_pool": lambda: make_max_pool2d(C=16, H=9, W=9),
    "avg_pool": lambda: make_avg_pool2d(C=16, H=9, W=9),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_random_sketch_samples_match_numpy(name: str) -> None:
    args = CASES[name]()
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(7)
    for seed in range(4):
        sch, _ = policy.sample(rng)
        assert_matches_numpy(sch, args, seed=seed)


def test_border_copy_stays_rolled_under_the_unroll_pragma() -> None:
    """The fast copy unrolls as the pragma asks; the border copy, run for a few taps, stays a loop
    (unrolled as well, it multiplied the code LLVM compiles)."""
    args = _conv_padded_with(1.0)  # a border copy that does something
    s = _taps_inside(args, unroll=512)
    guard = next(x.body for x in walk_stmts(lower(s, args).body) if isinstance(x, For) and x.var.name == "rx")
    assert isinstance(guard, IfThenElse) and isinstance(guard.then, For) and guard.otherwise is not None
    assert guard.then.kind == "unrolled"
    assert isinstance(guard.otherwise, For) and guard.otherwise.kind == "serial"
    assert_matches_numpy(s, args, seed=2)


def test_unswitch_rows_is_a_decision_of_padded_convs_only() -> None:
    policy, rng = SketchPolicy([_capsule()[-1]], lanes=16), random.Random(1)
    samples = [policy.sample(rng)[1] for _ in range(24)]
    inlined = [d for d in samples if d.get("pad/inline", True)]  # a materialized pad has no test to lift
    assert {d["capsule.local/unswitch_rows"] for d in inlined} == {False, True}
    assert not any("capsule.local/unswitch_rows" in d for d in samples if d.get("pad/inline") is False)
    *_, mm = make_matmul(32, 32, 32)
    assert not any(k.endswith("unswitch_rows") for k in SketchPolicy([mm]).sample(random.Random(0))[1])


def test_unswitch_rows_tests_a_row_tile_once() -> None:
    """Rows of the register tile in a loop of 2: with the pragma, a test of both rows picks the row
    loop without the row test, and the rows that touch the border take the fallback (the original
    loop); without it, each row tests."""
    args = _capsule(h=8)
    given = {
        "capsule.local/tile/y": [1, 2, 1, 2], "capsule.local/tile/x": [4, 1, 1, 1],
        "capsule.local/tile/i": [1, 1, 1, 4], "capsule.local/tile/j": [1, 1, 2, 2],
        "capsule.local/tile/o": [1, 1, 1, 16], "capsule.local/unroll": 0, "pad/inline": True,
    }  # fmt: skip

    def clean_tiles(rows: bool) -> tuple[int, Any]:
        """How many row loops there are (a lifted test adds the fallback's), and the schedule."""
        given_rows = {**given, "capsule.local/unswitch_rows": rows}
        sch, _ = SketchPolicy([args[-1]], lanes=16).sample(random.Random(0), given_rows)
        body = lower(sch, args).body
        loops = [x for x in walk_stmts(body) if isinstance(x, For) and x.var.name == "y.inner"]
        return len(loops), sch

    per_row, sch_off = clean_tiles(False)
    lifted, sch_on = clean_tiles(True)
    assert lifted > per_row  # the tile of rows under one test, and the rows that test as before
    for sch in (sch_off, sch_on):
        assert_matches_numpy(sch, args, seed=5)


@pytest.mark.parametrize("name", ["capsule", "conv2d_s1", "conv1d_s2"])
def test_samples_with_unswitch_rows_match_numpy(name: str) -> None:
    args = CASES[name]()
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(11)
    key = f"{args[-1].name}.local/unswitch_rows"
    for seed in range(3):
        sch, _ = policy.sample(rng, {key: True})
        assert_matches_numpy(sch, args, seed=seed)
