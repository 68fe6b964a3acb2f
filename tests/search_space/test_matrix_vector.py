"""A batch-1 GEMM (MobileNetV2's classifier): the untuned schedule reduces it row by row in vector lanes
when its weight rows are contiguous along K, and the row-by-row choice is not offered for a weight
stored in column panels (graph/gemm_layout.py), whose rows are 32 floats apart; both against numpy."""

from __future__ import annotations

import random

from autosched import te
from autosched.search_space.default import default_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import make_dense


def _panel_dense(n: int = 64, k: int = 96) -> list[te.Tensor]:
    """out[0, j] = x[0, :] . W[j, :] + b[j] with W stored as P[j // 32, k, j % 32], as gemm_layout does."""
    x = te.placeholder((1, k), name="x")
    p = te.placeholder((n // 32, k, 32), name="P")
    b = te.placeholder((n,), name="b")
    r = te.reduce_axis((0, k), name="k")
    mm = te.compute((1, n), lambda i, j: te.sum(x[i, r] * p[j // 32, r, j % 32], axis=r), name="mv")
    out = te.compute((1, n), lambda i, j: mm[i, j] + b[j], name="out")
    return [x, p, b, out]


def _steps(sch) -> list[tuple[str, str]]:
    return [(s.primitive, s.stage) for s in sch.trace]


def test_the_default_reduces_a_batch_1_dense_row_by_row_in_parallel() -> None:
    args = make_dense(1, 40, 96, bias=True, activation=None)
    sch = default_schedule(args[-1], cores=2)
    steps = _steps(sch)
    assert ("rfactor", "dense") in steps
    assert ("vectorize", "dense.rf") in steps
    assert any(p == "parallel" and st == "dense" for p, st in steps)  # the outputs split across cores
    (lanes,) = [s.args[1] for s in sch.trace if s.primitive == "split" and s.stage == "dense"]
    assert lanes == 32  # two vectors of partial sums, not a quarter of one
    assert_matches_numpy(sch, args, seed=1)


def test_rows_gemms_keep_their_tiled_default() -> None:
    args = make_dense(8, 40, 96, bias=True, activation=None)  # 8 rows reuse each weight
    assert not any(p == "rfactor" for p, _ in _steps(default_schedule(args[-1], cores=2)))


def test_a_panel_weight_is_not_reduced_row_by_row() -> None:
    args = _panel_dense()
    sch = default_schedule(args[-1], cores=2)
    assert not any(p == "rfactor" for p, _ in _steps(sch))
    assert_matches_numpy(sch, args, seed=2)
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(0)
    for seed in range(3):
        s, d = policy.sample(rng)
        assert not any(k.endswith("/matrix_vector") for k in d)
        assert_matches_numpy(s, args, seed=seed)
