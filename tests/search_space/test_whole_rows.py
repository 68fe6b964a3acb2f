"""Whole rows in vector lanes (issue 12, MobileNetV2's 56x56 and 28x28 1x1 convs): a 1x1 conv whose width
is not a multiple of the lanes (56 = 3.5 vectors) takes register tiles of whole rows (2 x 56 = 7
vectors), its rows and columns fused into one vector loop. Codegen reads ``W * (p // W) + p % W`` as
one contiguous stream; the default schedule and sketch samples of such tiles match numpy; a padded
3x3 window keeps its rows apart."""

from __future__ import annotations

import random

from autosched.build import build
from autosched.codegen.llvm_vector import affine_index, stmt_exprs, walk_exprs
from autosched.lower.ir import Buffer, For, Load
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.default import default_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.te.expr import Var
from autosched.testing import assert_matches_numpy
from tests.codegen.test_channel_lanes_samples import pointwise
from tests.search_space.test_channel_lanes import with_epilogue


def test_a_fused_row_index_is_one_contiguous_stream() -> None:
    p, c = Var("p", "int32"), Var("c", "int32")
    buf = Buffer("x", (8, 4, 56), "float32")
    form = affine_index(buf, (c, p // 56, p % 56), p)
    assert form is not None and form.coeff == 1
    assert affine_index(buf, (c, p // 56, p % 28), p) is None  # no matching remainder: a gather
    padded = Buffer("pad", (8, 4, 58), "float32")
    assert affine_index(padded, (c, p // 56, p % 56), p) is None  # rows 58 apart: not one stream


def _fused_vector_loads(sch, args) -> list[int | None]:
    """Lane strides of the data's loads inside vector loops over a fused row index."""
    func = build(sch, args, "llvm-cpu", "k").func
    data = func.params[0].name
    found: list[int | None] = []
    for loop in walk_stmts(func.body):
        if isinstance(loop, For) and loop.kind == "vectorized" and ".fused" in loop.var.name:
            for s in walk_stmts(loop.body):
                for e in stmt_exprs(s):
                    for n in walk_exprs(e):
                        if isinstance(n, Load) and n.buffer.name == data:
                            form = affine_index(n.buffer, n.indices, loop.var)
                            found.append(None if form is None else form.coeff)
    return found


def test_the_default_tiles_a_56_wide_pointwise_conv_by_whole_rows() -> None:
    args = with_epilogue(pointwise(24, 56, 8))  # 24 -> 8 channels: no channel fills a vector
    sch = default_schedule(args[-1], cores=2)
    fused = [s for s in sch.trace if s.primitive == "fuse" and "yy.inner" in s.args[0]]
    assert fused, [s.to_code() for s in sch.trace]
    assert set(_fused_vector_loads(sch, args)) == {1}  # the data as whole vectors
    assert_matches_numpy(sch, args, seed=1)


def test_the_default_takes_a_112_wide_row_of_whole_vectors_as_its_tile() -> None:
    args = with_epilogue(pointwise(8, 112, 16))
    sch = default_schedule(args[-1], cores=2)
    tiles = [s.args[1] for s in sch.trace if s.primitive == "split" and s.args[0] == "xx"]
    assert tiles == [112], [s.to_code() for s in sch.trace]
    chunks = [s.args[1] for s in sch.trace if s.primitive == "split" and s.args[0] == "xx.inner"]
    assert chunks == [16]  # vectorized a vector at a time
    assert_matches_numpy(sch, args, seed=3)


def test_sampled_whole_row_tiles_match_numpy() -> None:
    args = with_epilogue(pointwise(16, 28, 8), residual=True)
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(4)
    given = {
        "conv2d.local/vector_axis": "last",
        "conv2d/tile/yy": [7, 1, 1, 4],  # 4 rows of 28: 7 vectors
        "conv2d/tile/xx": [1, 1, 1, 28],
        "conv2d/resident": False,
        "conv2d/pack": False,  # the data read in place
    }
    for seed, yy in enumerate(([7, 1, 1, 4], [1, 7, 1, 4], [1, 1, 7, 4])):
        sch, d = policy.sample(rng, {**given, "conv2d/tile/yy": yy})
        assert d["conv2d/tile/xx"][-1] == 28 and d["conv2d/tile/yy"][-1] == 4, d
        assert set(_fused_vector_loads(sch, args)) == {1}
        assert_matches_numpy(sch, args, seed=seed)


def test_a_padded_window_keeps_its_rows_apart() -> None:
    from autosched.topi.workloads import make_conv2d

    args = make_conv2d(C=8, H=28, W=28, K=8, R=3, S=3, stride=1, padding=1)
    sch = default_schedule(args[-1], cores=2)
    assert not any(s.primitive == "fuse" and "yy.inner" in s.args[0] for s in sch.trace)
    assert_matches_numpy(sch, args, seed=0)
