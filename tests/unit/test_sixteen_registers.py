"""Tiles that fit a chip with 16 vector registers (AVX2: 8 float32 lanes), not only AVX-512's 32.

On a Zen 3 the AVX-512-sized tiles spilled: the peak loop's 24 FMA chains measured half the peak,
the flash kernel's 6 x 4 tiles of 16-lane vectors (48 registers) ran at 27 GFLOP/s a core against
65-73 with tiles that fit, and a 56-wide 1x1 conv's whole-row tile left room for one channel."""

from __future__ import annotations

import random

import pytest

from autosched import te, topi
from autosched.hai.cpu_facts import _peak_module, fma_chains
from autosched.search_space.default import default_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.sketch_attention import (
    default_config,
    register_budget,
    shape_of,
    tile_registers,
)
from autosched.testing import assert_matches_numpy

AVX2_LANES = 8


def test_peak_loop_keeps_its_chains_in_registers():
    assert fma_chains(8) <= 16 - 2 and fma_chains(16) == 24
    assert _peak_module(8).count("call <8 x float> @llvm.fma") == fma_chains(8)


def _attention(S=64, D=64, causal=False):
    q = te.placeholder((1, 2, S, D), "float32", name="q")
    k = te.placeholder((1, 2, S, D), "float32", name="k")
    v = te.placeholder((1, 2, S, D), "float32", name="v")
    return [q, k, v, topi.scaled_dot_product_attention(q, k, v, causal=causal)]


@pytest.mark.parametrize("causal", [False, True])
def test_flash_default_tiles_fit_sixteen_registers(causal):
    args = _attention(causal=causal)
    s = default_schedule(args[-1], cores=2, lanes=AVX2_LANES)
    (config,) = s.flash.values()
    pattern = config.pattern
    E = shape_of(s, pattern)[5]
    flash = (config.block_q, config.block_k, config.rows, config.cols, config.pv_rows, config.pv_cols)
    assert (
        max(tile_registers(flash, E, AVX2_LANES))
        <= register_budget(SketchPolicy([], lanes=AVX2_LANES).registers)
        == 12
    )
    assert_matches_numpy(s, args, seed=1)
    # AVX-512 keeps its measured tiles: 6 x 4 vectors of 16 lanes
    assert default_config(s, pattern)[2:4] == ((4, 4) if causal else (6, 4))


def test_flash_sampled_tiles_fit_sixteen_registers():
    args = _attention(S=100)
    policy = SketchPolicy([args[-1]], cores=2, lanes=AVX2_LANES)
    rng = random.Random(0)
    seen = set()
    for i in range(24):
        s, _ = policy.sample(rng)
        (config,) = s.flash.values()
        flash = (config.block_q, config.block_k, config.rows, config.cols, config.pv_rows, config.pv_cols)
        assert max(tile_registers(flash, 64, AVX2_LANES)) <= 12, flash
        seen.add(flash[2:])
        if i < 3:
            assert_matches_numpy(s, args, seed=i)
    assert len(seen) > 3  # still a space to search, not one fixed tile


def _conv(c, h, k, r):
    x = te.placeholder((1, c, h, h), name="x")
    w = te.placeholder((k, c, r, r), name="w")
    return [x, w, topi.conv2d(x, w, stride=1, padding=r // 2)]


def _register_tile(s, stage):
    """The factor of each of the conv's spatial axes split in ``stage`` (the accumulator stage splits
    each once: its register tile)."""
    spatial = {"nn", "ff", "yy", "xx"}
    factors = {}
    for st in s.trace:
        if st.stage == stage and st.primitive == "split" and st.args[0] in spatial:
            factors[st.args[0]] = st.args[1]
    return factors


@pytest.mark.parametrize(
    "c, h, k, r, rows",
    [
        (16, 7, 32, 3, 7),  # 7 rows have no divisor up to 6: 7 x 1 vector, not 1 x 2
        (32, 14, 32, 1, 7),  # 14 rows: 7 x 1 vector (2 x 2 fills 4 registers)
    ],
)
def test_conv_register_tile_fits_sixteen_registers(c, h, k, r, rows):
    args = _conv(c, h, k, r)
    s = default_schedule(args[-1], cores=2, lanes=AVX2_LANES)
    assert_matches_numpy(s, args, seed=2)
    factors = _register_tile(s, "conv2d.local")
    assert factors["ff"] == AVX2_LANES and factors["xx"] == rows, factors


def test_wide_pointwise_conv_leaves_room_for_channels():
    """56 wide is 7 vectors of 8 lanes: as a whole-row tile only one channel fits beside it, so the
    default tiles channels instead (12 accumulators)."""
    args = _conv(16, 56, 24, 1)
    s = default_schedule(args[-1], cores=2, lanes=AVX2_LANES)
    assert_matches_numpy(s, args, seed=3)
    factors = _register_tile(s, "conv2d.local")
    vectors = factors.get("xx", 1) * factors.get("yy", 1) * factors.get("ff", 1) // AVX2_LANES
    assert vectors <= 12 and factors.get("ff", 1) > 1, factors
