"""Register tiles that do not divide their axis: sampled by the sketch, versioned by lowering, and
right on random inputs (lower/tails.py; sketch_base.tail_options)."""

from __future__ import annotations

import math
import random

import pytest

from autosched import te
from autosched.lower.ir import For, IfThenElse
from autosched.lower.pipeline import lower
from autosched.lower.printer import format_stmt
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.sketch_base import padded, tail_options
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import make_conv2d, make_matmul


def _gemm(M: int, N: int, K: int, bm: int, bn: int, parallel: bool = False):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = create_schedule(C)
    CC = s.cache_write(C, "local")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], bm, bn)
    s[CC].compute_at(s[C], no)
    i, j = s[CC].op.axis
    s[CC].reorder(s[CC].op.reduce_axis[0], i, j)
    s[CC].unroll(i)
    s[CC].vectorize(j)
    if parallel:
        s[C].parallel(s[C].fuse(mo, no))
    return s, [A, B, C]


def _tests(stmt) -> list[IfThenElse]:
    return [s for s in walk_stmts(stmt) if isinstance(s, IfThenElse)]


def test_full_tiles_run_without_bounds_tests() -> None:
    s, args = _gemm(100, 64, 32, bm=6, bn=16)  # 16 tiles of 6 rows and one of 4
    f = lower(s, args)
    loops = [x for x in walk_stmts(f.body) if isinstance(x, For) and x.var.name == "i.outer"]
    assert len(loops) == 1
    versioned = loops[0].body
    assert isinstance(versioned, IfThenElse) and versioned.otherwise is not None
    assert format_stmt(loops[0]).splitlines()[1].strip() == "if (((i.outer * 6) + 5) < 100):"  # the last row
    assert not _tests(versioned.then)  # the full tiles: no test left
    assert _tests(versioned.otherwise)  # the tail: each row tested


@pytest.mark.parametrize(
    "shape,tile,parallel",
    [
        ((100, 64, 32), (6, 16), False),
        ((100, 64, 32), (7, 32), True),  # a fused parallel loop around the tiles
        ((50, 70, 16), (6, 48), False),  # both axes partial: rows and a vector tile past N
        ((13, 16, 8), (16, 16), False),  # one tile, larger than the axis: never full
    ],
)
def test_partial_tiles_match_numpy(shape, tile, parallel) -> None:
    s, args = _gemm(*shape, *tile, parallel=parallel)
    assert_matches_numpy(s, args, seed=len(shape) + tile[0])


def test_tail_options_are_the_non_divisors() -> None:
    assert tail_options(1024, 16) == [3, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15]
    assert tail_options(12, 16) == [5, 7, 8, 9, 10, 11]
    assert padded(1024, 6) == 1026 and padded(1024, 8) == 1024


def test_sketch_samples_partial_row_tiles_that_match_numpy() -> None:
    *ins, out = make_matmul(100, 64, 32)
    policy, rng = SketchPolicy([out], lanes=16, registers=32), random.Random(5)
    partial = 0
    for _ in range(40):
        sch, d = policy.sample(rng)
        rows = d["matmul.local/tile/i"]
        if 100 % rows[-1]:
            assert rows[-1] in tail_options(100, 16) and len(rows) == 4
            assert rows[0] * rows[1] * rows[2] * rows[3] == padded(100, rows[-1])
            if partial < 3:
                assert_matches_numpy(sch, [*ins, out], seed=partial)
            partial += 1
    assert partial >= 5  # about half of the sampled row tiles


def test_given_partial_tiles_are_kept_and_bad_ones_resampled() -> None:
    *_, out = make_matmul(1024, 1024, 64)
    policy = SketchPolicy([out], lanes=16, registers=32)
    good = {
        "matmul.local/tile/i": [1, 57, 3, 6], "matmul.local/tile/j": [1, 16, 1, 64],
        "matmul.local/resident": False,
    }  # fmt: skip
    _, d = policy.sample(random.Random(0), good)
    assert d["matmul.local/tile/i"] == [1, 57, 3, 6]  # 171 tiles of 6 rows: 1026 >= 1024
    bad = {**good, "matmul.local/tile/i": [1, 57, 1, 6]}  # 342 rows: not a tiling of 1024
    _, d = policy.sample(random.Random(0), bad)
    assert d["matmul.local/tile/i"] != [1, 57, 1, 6]


def test_windows_keep_to_divisors() -> None:
    """A conv's rows (three reduction axes) are tiled by divisors only: partial tiles are a GEMM's."""
    *_, out = make_conv2d(C=8, H=14, W=14, K=16, stride=1)
    extents = {a.name: a.extent for a in (*out.op.axis, *out.op.reduce_axis)}
    policy, rng = SketchPolicy([out], lanes=16, registers=32), random.Random(1)
    tiles = 0
    for _ in range(30):
        _, d = policy.sample(rng)
        for key, v in d.items():
            axis = key.rsplit("/", 1)[-1]
            if "/tile/" in key and axis in extents:
                assert math.prod(v) == extents[axis], (key, v)
                tiles += 1
    assert tiles >= 30


def test_partial_tiles_of_a_batched_gemm_match_numpy() -> None:
    """Rows partial on two spatial axes at once: a batch of matmuls, one reduction axis."""
    a = te.placeholder((3, 20, 16), name="A")
    b = te.placeholder((3, 16, 32), name="B")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((3, 20, 32), lambda n, i, j: te.sum(a[n, i, k] * b[n, k, j], axis=k), name="bmm")
    policy, rng = SketchPolicy([c], lanes=16, registers=32), random.Random(2)
    checked = 0
    for _ in range(60):
        sch, d = policy.sample(rng)
        if any(3 % v[-1] or 20 % v[-1] for key, v in d.items() if key.endswith(("/tile/n", "/tile/i"))):
            assert_matches_numpy(sch, [a, b, c], seed=checked)
            checked += 1
            if checked == 3:
                break
    assert checked == 3


def test_features_count_the_tail_copy_as_rare() -> None:
    """The versioned body's tail copy is not counted again: the features of 6-row tiles over 96 rows
    (all full, no copy) and over 100 rows (a tail copy) differ by the rows, not by a second body."""
    from autosched.cost_model.features import candidate_features, store_features

    full = lower(*_gemm(96, 64, 32, bm=6, bn=16))
    tail = lower(*_gemm(100, 64, 32, bm=6, bn=16))
    assert store_features(tail).shape == store_features(full).shape  # the tail's stores not counted
    assert candidate_features(tail).shape == candidate_features(full).shape
