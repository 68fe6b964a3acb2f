"""Sketch decisions for memory-bound kinds: a reduction whose readers re-read its rows is computed in
their row loop (one pass over memory), with its own reduction in the vector lanes; a strided one keeps
the root."""

from __future__ import annotations

import random

from autosched import te
from autosched.search_space.sketch import SketchPolicy
from autosched.topi.workloads import make_avg_pool2d, make_layer_norm, make_softmax


def test_layer_norm_sums_run_in_the_output_row_loop() -> None:
    """Whenever the output keeps a row loop, both row sums are computed in it, rfactor-ed."""
    *_, out = make_layer_norm((64, 256), axis=-1)
    policy = SketchPolicy([out], lanes=16)
    rng = random.Random(0)
    kept = 0
    for _ in range(40):
        s, d = policy.sample(rng)
        if s["layer_norm"].attach[0] != "root" or d["layer_norm/parallel_depth"] != 1:
            continue
        kept += 1
        for name in ("layer_norm_sum", "layer_norm_varsum"):
            assert d[f"{name}/location"] >= 1 and d[f"{name}/rfactor"] is True, d
            assert s[name].attach[:2] == ("at", "layer_norm"), s[name].attach
    assert kept >= 5
    # An old record's root placement is not rebuilt: the decision is resampled among the row loops.
    _, d = policy.sample(rng, {"layer_norm/parallel_depth": 1, "layer_norm_varsum/location": 0})
    assert d["layer_norm_varsum/location"] == 1


def test_softmax_reductions_prefer_the_row_loop() -> None:
    _, out = make_softmax((64, 512))
    policy = SketchPolicy([out], lanes=16)
    rng = random.Random(3)
    for _ in range(30):
        _, d = policy.sample(rng)
        if d["softmax_norm/parallel_depth"] == 1 and d.get("softmax_exp/inline", True):
            assert d["softmax_expsum/location"] == 1 and d["softmax_maxelem/location"] == 1, d


def test_strided_and_large_reductions_keep_the_root() -> None:
    """A column sum (stride = row length), a row of 1M floats (4 MiB) and a pooling window (3 taps)
    may still go to the root."""
    x = te.placeholder((256, 64), name="x")
    i = te.reduce_axis((0, 256), name="i")
    col = te.compute((64,), lambda j: te.sum(x[i, j], axis=i), name="col")
    scaled = te.compute((256, 64), lambda r, j: x[r, j] / col[j], name="scaled")
    y = te.placeholder((2, 1 << 20), name="y")
    k = te.reduce_axis((0, 1 << 20), name="k")
    big = te.compute((2,), lambda r: te.sum(y[r, k], axis=k), name="big")
    shifted = te.compute((2, 1 << 20), lambda r, c: y[r, c] - big[r], name="shifted")
    *_, avg = make_avg_pool2d(1, 4, 12, 12, kernel=3, stride=2, padding=1)
    for out, name in ((scaled, "col"), (shifted, "big"), (avg, "pool_sum")):
        policy = SketchPolicy([out], lanes=16)
        rng = random.Random(0)
        seen = {policy.sample(rng)[1].get(f"{name}/location") for _ in range(30)}
        assert 0 in seen, (name, seen)


def test_parallel_loops_fused_only_until_every_core_has_enough() -> None:
    """128 rows give two cores 64 chunks each: rows and columns are not fused (the sums keep their
    row loop); 8 rows are fused with the columns to have enough."""
    for rows, depths in ((128, {1}), (8, {1, 2})):
        *_, out = make_layer_norm((rows, 256), axis=-1)
        policy = SketchPolicy([out], cores=2, lanes=16)
        rng = random.Random(0)
        seen = {policy.sample(rng)[1]["layer_norm/parallel_depth"] for _ in range(20)}
        assert seen == depths, (rows, seen)


def test_a_pool_keeps_several_columns_in_flight_and_still_matches_numpy() -> None:
    """NHWC max pool: channels in vector lanes, and a few output columns inside the window loops (each
    its own accumulator) when the spatial_tile decision says so; every sampled width matches numpy."""
    from autosched.testing import assert_matches_numpy

    data, out = _nhwc_max_pool(12)
    policy = SketchPolicy([out], lanes=16)
    widths = set()
    for seed in range(40):
        s, d = policy.sample(random.Random(seed))
        if d.get("pool/vector", 1) <= 1:
            continue
        width = d["pool/spatial_tile"]
        widths.add(width)
        leaves = [leaf.name for leaf in s["pool"].leaves]
        if width > 1:  # the columns' inner loop sits between the window and the vector lanes
            assert leaves.index("x.inner") > max(leaves.index("ry"), leaves.index("rx")), leaves
            assert leaves.index("x.inner") < leaves.index("c.inner"), leaves
        assert_matches_numpy(s, [data, out])
    assert {1, 2, 3, 6} & widths and len(widths) >= 2, widths


def test_the_default_pool_computes_four_columns_in_its_window() -> None:
    from autosched.search_space.default import default_schedule
    from autosched.testing import assert_matches_numpy

    data, out = _nhwc_max_pool(16)
    s = default_schedule(out)
    leaves = [leaf.name for leaf in s["pool"].leaves]
    assert leaves[-3:] == ["rx", "x.inner", "c.inner"], leaves
    assert s["pool"].leaves[-2].extent == 4
    assert_matches_numpy(s, [data, out])


def _nhwc_max_pool(size: int) -> tuple[te.Tensor, te.Tensor]:
    """3x3, stride 2, padding 1 over ``[1, size, size, 32]``: the pool of ResNet's stem, small."""
    from autosched.topi.transform import pad

    data = te.placeholder((1, size, size, 32), name="data")
    padded = pad(data, (0, 1, 1, 0), (0, 1, 1, 0), pad_value=-3.0e38)
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    out = te.compute(
        (1, size // 2, size // 2, 32),
        lambda b, y, x, c: te.max(padded[b, y * 2 + ry, x * 2 + rx, c], axis=[ry, rx]),
        name="pool",
    )
    return data, out
