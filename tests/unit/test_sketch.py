"""Sketch priors that hold for every sample (no compiling: the decisions and the schedule's steps)."""

from __future__ import annotations

import random

import pytest

from autosched.search_space.mutate import mutate
from autosched.search_space.sketch import SketchPolicy, inner_options, sample_tiles
from autosched.topi.workloads import make_matmul, make_softmax


def test_inner_options_prefer_whole_vectors() -> None:
    assert inner_options(1024, 64, 16) == [16, 32, 64]
    assert inner_options(56, 64, 8) == [8, 56]
    assert inner_options(7, 64, 1) == [1, 7]
    assert inner_options(12, 64, 16) == [1, 2, 3, 4, 6, 12]  # no multiple of 16 divides 12: all kept
    rng = random.Random(0)
    for _ in range(200):
        t = sample_tiles(1024, 4, rng, 64, 16)
        assert t[-1] in (16, 32, 64) and t[0] * t[1] * t[2] * t[3] == 1024


@pytest.mark.parametrize("n", [1024, 48])
def test_matmul_register_tile_is_whole_vectors(n: int) -> None:
    *_, C = make_matmul(n, n, n)
    policy = SketchPolicy([C], lanes=16)
    rng = random.Random(1)
    for _ in range(30):
        _, d = policy.sample(rng)
        j = d["matmul.local/tile/j"]
        assert j[-1] % 16 == 0 and j[-1] <= 64, j
        # A mutation that breaks the rule is repaired when the candidate is rebuilt.
        bad = dict(d, **{"matmul.local/tile/j": [n // 2, 1, 1, 2]})
        _, rebuilt = policy.sample(rng, bad)
        assert rebuilt["matmul.local/tile/j"][-1] % 16 == 0
        child = mutate(d, rng)
        assert child is not None
        _, kept = policy.sample(rng, child)
        assert kept["matmul.local/tile/j"][-1] % 16 == 0


def test_softmax_stages_can_share_the_output_row_loop() -> None:
    """The row max, the exps and their sum can all run inside the output's row loop (every reader
    of each runs there), but never inside its column loop (the row would be recomputed per column)."""
    _, out = make_softmax((64, 128))
    policy = SketchPolicy([out], lanes=16)
    fused = {"softmax_exp/inline": False, "softmax_norm/location": 0, "softmax_norm/parallel_depth": 1}
    fused.update({f"softmax_{s}/location": 1 for s in ("maxelem", "exp", "expsum")})
    s, used = policy.sample(random.Random(0), fused)
    assert {k: used[k] for k in fused} == fused
    attach = {st.name: st.attach for st in s.stages}
    for name in ("softmax_maxelem", "softmax_exp", "softmax_expsum"):
        assert attach[name] == ("at", "softmax_norm", "i0"), attach
    rng = random.Random(1)
    seen = set()
    for _ in range(60):
        _, d = policy.sample(rng)
        seen.add(d["softmax_exp/inline"])
        for name in ("maxelem", "expsum"):
            assert d[f"softmax_{name}/location"] in (0, 1)  # the root or the row loop, nothing deeper
    assert seen == {True, False}


def test_accumulator_tile_fits_the_registers() -> None:
    """The innermost (register) tiles of a multi-level tiling hold at most ``registers`` vectors;
    a given tiling that would spill (conv2d's 16 x 7 x 8 tile: 112 vectors) is resampled."""
    from autosched.topi.workloads import make_conv2d

    *_, out = make_conv2d(1, 64, 56, 56, 64, 3, 3, stride=1, padding=1)
    policy = SketchPolicy([out], lanes=16)
    assert policy.registers == 28
    rng = random.Random(0)

    def vectors(d: dict) -> int:
        vec = "ff" if d.get("conv2d.local/vector_axis") == "ff" else "xx"  # the lanes: W or K
        inner = [d[f"conv2d.local/tile/{a}"][-1] for a in ("nn", "ff", "yy", "xx") if a != vec]
        return inner[0] * inner[1] * inner[2] * -(-d[f"conv2d.local/tile/{vec}"][-1] // 16)

    for _ in range(40):
        _, d = policy.sample(rng)
        assert vectors(d) <= 28, d
    spill = {"conv2d.local/tile/ff": [2, 2, 1, 16], "conv2d.local/tile/yy": [2, 4, 1, 7]}
    spilling = dict(d, **spill, **{"conv2d.local/vector_axis": "last"})
    _, rebuilt = policy.sample(rng, spilling)
    assert vectors(rebuilt) <= 28
    assert rebuilt["conv2d.local/tile/rc"] == d["conv2d.local/tile/rc"]  # reduction tiles are kept


def test_a_resident_accumulator_tile_fits_the_registers_whole() -> None:
    """With ``resident`` the accumulator tile of levels 2 and 3 together fits the registers (it then
    stays in them across the whole reduction); without it only level 3 must. A mutation that widens
    the vector tile past the registers keeps the wider vectors and gives up rows to level 2."""
    *_, C = make_matmul(1024, 1024, 1024)
    policy = SketchPolicy([C], lanes=16)
    rng = random.Random(2)

    def tile(d: dict, levels: slice) -> int:
        i, j = d["matmul.local/tile/i"], d["matmul.local/tile/j"]
        rows = i[levels][0] * (i[levels][1] if len(i[levels]) > 1 else 1)
        cols = j[levels][0] * (j[levels][1] if len(j[levels]) > 1 else 1)
        return rows * -(-cols // 16)

    seen = set()
    for _ in range(60):
        _, d = policy.sample(rng)
        seen.add(d["matmul.local/resident"])
        assert tile(d, slice(3, 4)) <= 28
        if d["matmul.local/resident"]:
            assert tile(d, slice(2, 4)) <= 28, d
    assert seen == {True, False}
    wide = {"matmul.local/tile/i": [1, 64, 1, 16], "matmul.local/tile/j": [8, 4, 1, 32]}  # 16 x 2 vectors
    _, fitted = policy.sample(rng, {"matmul.local/resident": False, **wide})
    assert fitted["matmul.local/tile/j"] == [8, 4, 1, 32]  # the mutated vector tile is kept
    assert fitted["matmul.local/tile/i"] == [1, 64, 2, 8]  # rows moved to level 2
    _, resident = policy.sample(rng, {**fitted, "matmul.local/resident": True})
    assert resident["matmul.local/tile/i"] == [1, 128, 1, 8]  # level 2 moved out: 8 x 2 vectors in all
    assert policy.sample(random.Random(9), resident)[1] == resident  # the decisions rebuild it as is


def _whole_tensor_sums():
    from autosched import te

    x = te.placeholder((64, 96), name="x")
    i, j = te.reduce_axis((0, 64), name="i"), te.reduce_axis((0, 96), name="j")
    two = te.compute((1,), lambda z: te.sum(x[i, j] * x[i, j], axis=[i, j]), name="ss")
    y = te.placeholder((4096,), name="y")
    k = te.reduce_axis((0, 4096), name="k")
    one = te.compute((1,), lambda z: te.max(y[k], axis=k), name="mx")
    return [x, two], [y, one]


def test_whole_tensor_reduction_gets_parallel_partials() -> None:
    """Few outputs: the sketch offers partial results over an outer part of the reduction (one of
    several reduce axes, or the outer part of a split long one), in parallel, combined after."""
    for args in _whole_tensor_sums():
        out = args[-1]
        policy = SketchPolicy([out], cores=2, lanes=16)
        rng = random.Random(0)
        seen = set()
        for _ in range(40):
            s, d = policy.sample(rng)
            seen.add(d[f"{out.name}/parallel_rfactor"])
            if d[f"{out.name}/parallel_rfactor"]:
                rf = s[f"{out.name}.rf"]
                assert any(a == "parallel" for a in rf.annotations.values()), rf.annotations
        assert seen == {True, False}
    # Enough outputs to share among the cores: not offered.
    _, soft = make_softmax((64, 128))
    _, d = SketchPolicy([soft], cores=2).sample(random.Random(0))
    assert not any(k.endswith("parallel_rfactor") for k in d)
