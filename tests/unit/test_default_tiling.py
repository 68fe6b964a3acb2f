"""The default schedule of every conv kind MobileNetV2 and ResNet-18 have (and of a matmul): right on
random inputs, vectorized along an axis that fills whole vectors where one exists, the accumulator tile
inside the reduction loops, the outer loop parallel."""

from __future__ import annotations

import math
import re

import pytest

from autosched import te, topi
from autosched.lower.pipeline import lower
from autosched.lower.printer import format_func
from autosched.search_space.default import default_schedule
from autosched.testing import assert_matches_numpy

LOOP = re.compile(r"^(\s*)for (\S+) in range\((\d+)\):(.*)$")


def _conv(c, h, k, r, stride, depthwise=False, residual=False):
    x = te.placeholder((1, c, h, h), name="x")
    if depthwise:
        w = te.placeholder((c, 1, r, r), name="w")
        y = topi.depthwise_conv2d(x, w, stride=stride, padding=r // 2)
    else:
        w = te.placeholder((k, c, r, r), name="w")
        y = topi.conv2d(x, w, stride=stride, padding=r // 2)
    b = te.placeholder((k,), name="b")
    if residual:
        z = te.placeholder(y.shape, name="z")
        out = te.compute(y.shape, lambda n, f, i, j: y[n, f, i, j] + b[f] + z[n, f, i, j], name="add")
        return [x, w, b, z, out]
    out = te.compute(y.shape, lambda n, f, i, j: te.min(te.max(y[n, f, i, j] + b[f], 0.0), 6.0), name="relu6")
    return [x, w, b, out]


# (channels, width, output channels, kernel, stride, depthwise, residual), the vector extent expected
KINDS = {
    "pointwise_7": ((32, 7, 32, 1, 1, False, False), 32),  # MobileNetV2's 7x7 expansion / projection
    "pointwise_14_residual": ((24, 14, 48, 1, 1, False, True), 16),  # projection with the residual add
    "pointwise_28": ((16, 28, 32, 1, 1, False, False), 32),
    "pointwise_56_narrow": ((16, 56, 24, 1, 1, False, False), 16),  # 24 channels: 2 rows of 56, 7 vectors
    "pointwise_width_32": ((8, 32, 24, 1, 1, False, False), 32),  # the width fills two vectors
    # a depthwise conv keeps the width in lanes: channels there would repack its data on every call
    "depthwise_s1_14": ((32, 14, 32, 3, 1, True, False), 14),
    "depthwise_s2_14": ((16, 14, 16, 3, 2, True, False), 7),
    "depthwise_s1_32": ((16, 32, 16, 3, 1, True, False), 32),
    "stem_s2": ((3, 32, 16, 3, 2, False, False), 16),  # 16 wide out: the width
    "resnet_3x3_7": ((16, 7, 32, 3, 1, False, False), 32),
    "resnet_7x7_s2": ((3, 28, 16, 7, 2, False, False), 16),  # 14 wide out, 16 channels
    "resnet_down_1x1_s2": ((16, 14, 32, 1, 2, False, False), 32),
}


def _vector_loops(text: str) -> list[tuple[int, str, int]]:
    """(indent, name, extent) of each vectorized loop in printed loops."""
    out = []
    for line in text.splitlines():
        m = LOOP.match(line)
        if m and "vectorized" in m.group(4):
            out.append((len(m.group(1)), m.group(2), int(m.group(3))))
    return out


def _matmul(m: int, n: int, kk: int) -> list:
    A = te.placeholder((m, kk), name="A")
    B = te.placeholder((kk, n), name="B")
    k = te.reduce_axis((0, kk), "k")
    return [A, B, te.compute((m, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]


@pytest.mark.parametrize("kind", list(KINDS))
def test_default_conv_matches_numpy_and_vectorizes(kind):
    shape, extent = KINDS[kind]
    args = _conv(*shape)
    s = default_schedule(args[-1], cores=2)
    assert_matches_numpy(s, args, seed=5)
    text = format_func(lower(s, args, kind))
    lines = text.splitlines()
    vec = _vector_loops(text)
    assert any(e == extent for _, _, e in vec), f"{kind}: no vectorized loop of {extent}:\n{text}"
    # The accumulation (the vectorized loop whose body reads the weight) is inside the reduction loops.
    red = [i for i, ln in enumerate(lines) if re.match(r"^\s*for r[cyx]\S* in range", ln)]
    assert red, text
    first = red[0]
    indent = len(lines[first]) - len(lines[first].lstrip())
    assert any(i > first and d > indent and e == extent for i, (d, _, e) in _index_vec(lines)), text
    # The outermost loop runs in parallel, with work for both cores.
    assert "parallel" in next(ln for ln in lines if LOOP.match(ln)), text
    par = [int(m.group(3)) for ln in lines if (m := LOOP.match(ln)) and "parallel" in m.group(4)]
    assert par and min(par) >= 2, text


def _index_vec(lines: list[str]) -> list[tuple[int, tuple[int, str, int]]]:
    out = []
    for i, line in enumerate(lines):
        m = LOOP.match(line)
        if m and "vectorized" in m.group(4):
            out.append((i, (len(m.group(1)), m.group(2), int(m.group(3)))))
    return out


def test_narrow_pointwise_vectorizes_output_channels():
    """A 7-wide 1x1 conv with 32 output channels keeps its accumulators channels-last (a transposed
    cache_write), the weight packed with channels contiguous."""
    args = _conv(32, 7, 32, 1, 1)
    trace = default_schedule(args[-1], cores=2).trace
    assert any(st.primitive == "cache_write" and len(st.args) > 1 and st.args[1] for st in trace)
    assert any(st.primitive == "cache_read" for st in trace)


def test_default_matmul_register_tile():
    A, B, C = _matmul(64, 64, 64)
    s = default_schedule(C, cores=2)
    assert_matches_numpy(s, [A, B, C], seed=2)
    text = format_func(lower(s, [A, B, C], "mm"))
    assert any(e == 64 for _, _, e in _vector_loops(text)), text  # 4 vectors a row of the GEMM tile
    assert any(st.primitive == "cache_write" for st in s.trace)


@pytest.mark.parametrize(
    "mcpu, rows, width", [("skylake-avx512", 100, 64), ("haswell", 100, 16), ("skylake-avx512", 96, 64)]
)
def test_default_gemm_tile_is_six_rows_the_last_partial_and_the_sketch_replays_it(mcpu, rows, width):
    """A GEMM's default register tile is 6 rows of the widest row that fills the registers (6 x 64 on
    AVX-512, BLIS's 6 x 16 on AVX2), whole over the reduction; 100 rows end in a partial tile of 4. Its
    decisions are the sketch's own: the search starts from exactly the default, not a resampled one."""
    import random

    from autosched.hai.registry import get_adapter
    from autosched.search_space.default import default_candidate
    from autosched.search_space.schedule import replay
    from autosched.search_space.sketch import SketchPolicy

    A, B, C = _matmul(rows, 128, 96)
    adapter = get_adapter(f"llvm-cpu -mcpu={mcpu}")
    trace, decisions = default_candidate([C], adapter, cores=2)
    *outer, inner = decisions["C.local/tile/i"]
    assert inner == 6 and outer[2] == 1 and math.prod(outer) == -(-rows // 6)  # 17 tiles for 100 rows
    assert decisions["C.local/tile/j"][-1] == width and decisions["C.local/tile/k"] == [24, 4]
    assert_matches_numpy(replay([C], trace), [A, B, C], seed=4)
    lanes = 16 if width == 64 else 8
    _, used = SketchPolicy([C], cores=2, lanes=lanes).sample(random.Random(0), dict(decisions))
    assert {k: used[k] for k in decisions} == decisions


def test_default_gemm_keeps_to_divisors_where_a_partial_tile_wastes_too_much():
    """16 rows in tiles of 6 would compute 18 (12% more): the divisors' 4 rows stay."""
    from autosched.search_space.default import _default

    A, B, C = _matmul(16, 128, 96)
    _, decisions = _default([C], 2, 16)
    assert 16 % decisions["C.local/tile/i"][-1] == 0


def test_default_is_deterministic():
    args = _conv(32, 7, 32, 1, 1)
    assert default_schedule(args[-1], cores=2).trace == default_schedule(args[-1], cores=2).trace


@pytest.mark.parametrize("c, h, k, r", [(32, 7, 32, 1), (16, 14, 32, 3)])
def test_k_last_weight_is_not_transposed(c, h, k, r):
    """A conv weight stored output-channel last (graph/weight_layout.py), ``w[rc, ry, rx, k]``, is whole
    vectors of channels as it is: vectorized over the channels, its tile copied as it is (no transpose)."""
    x = te.placeholder((1, c, h, h), name="x")
    w = te.placeholder((c, r, r, k), name="w")
    p = r // 2
    pad = te.compute(
        (1, c, h + 2 * p, h + 2 * p),
        lambda n, cc, i, j: te.if_then_else(
            te.all(i >= p, i < h + p, j >= p, j < h + p), x[n, cc, i - p, j - p], 0.0
        ),
        name="pad",
    )
    rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, r), "ry"), te.reduce_axis((0, r), "rx")
    y = te.compute(
        (1, k, h, h),
        lambda n, f, i, j: te.sum(pad[n, rc, i + ry, j + rx] * w[rc, ry, rx, f], axis=[rc, ry, rx]),
        name="conv",
    )
    out = te.compute(y.shape, lambda n, f, i, j: te.max(y[n, f, i, j], 0.0), name="relu")
    s = default_schedule(out, cores=2)
    assert_matches_numpy(s, [x, w, out], seed=7)
    [copy] = [st for st in s.trace if st.primitive == "cache_read"]
    assert not any(isinstance(a, tuple) and a and all(isinstance(d, int) for d in a) for a in copy.args)
    text = format_func(lower(s, [x, w, out], "conv"))
    assert any(e == 32 for _, _, e in _vector_loops(text)), text


def test_default_dense_packs_its_strided_weight():
    """dense's ``W[j, k]`` read with ``j`` in lanes is a gather: the default packs it transposed."""
    x = te.placeholder((16, 64), name="x")
    w = te.placeholder((48, 64), name="w")
    r = te.reduce_axis((0, 64), "r")
    y = te.compute((16, 48), lambda i, j: te.sum(x[i, r] * w[j, r], axis=r), name="y")
    s = default_schedule(y, cores=2)
    assert_matches_numpy(s, [x, w, y], seed=4)
    assert [st.args[-1] for st in s.trace if st.primitive == "cache_read"] == [(1, 0)]


def test_default_gemm_sweeps_long_k_in_chunks():
    """A GEMM's K over 256 is swept in chunks over a producer tile of several register tiles."""
    A, B, C = _matmul(32, 64, 512)
    s = default_schedule(C, cores=2)
    assert_matches_numpy(s, [A, B, C], seed=3)
    text = format_func(lower(s, [A, B, C], "mm"))
    assert re.search(r"for k\.outer in range\(2\)", text), text
    assert re.search(r"for k\.inner in range\(256\)", text), text


@pytest.mark.parametrize("rows, packed", [(128, True), (64, True), (16, False)])
def test_default_gemm_packs_b_where_enough_rows_reuse_it(rows, packed):
    """matmul's row-major ``B[k, j]`` is copied into panels (a cache_read) where 64 or more rows reuse
    it, and read in place below that, where the copy would be most of the work."""
    A, B, C = _matmul(rows, 64, 512)
    s = default_schedule(C, cores=2)
    assert_matches_numpy(s, [A, B, C], seed=5)
    assert any(st.primitive == "cache_read" for st in s.trace) == packed, s.trace


def test_default_trace_takes_the_targets_vector_width():
    """An AVX2 target's default tiles 8-lane vectors, as its tuning sketch does (not AVX-512's 16)."""
    from autosched.hai.registry import get_adapter
    from autosched.search_space.default import default_trace
    from autosched.search_space.schedule import replay

    A, B, C = _matmul(64, 64, 64)
    wide = default_trace([C], get_adapter("llvm-cpu -mcpu=skylake-avx512"), cores=2)
    narrow = default_trace([C], get_adapter("llvm-cpu -mcpu=haswell"), cores=2)
    widths = []
    for trace in (wide, narrow):
        s = replay([C], trace)
        assert_matches_numpy(s, [A, B, C], seed=3)
        widths.append(max(e for _, _, e in _vector_loops(format_func(lower(s, [A, B, C], "mm")))))
    assert widths == [64, 16], widths  # 6 rows of 4 vectors (AVX-512) or of 2 (AVX2) fill the registers


@pytest.mark.parametrize("n, width", [(1000, 40), (24, 24), (72, 36)])
def test_default_vector_tile_fills_its_vectors_where_16_does_not_divide(n, width):
    """A width that 16 does not divide (a 1000-class layer) is tiled by the divisor whose vectors are
    fullest (40: 2.5 vectors, 83% of the lanes), not by half vectors of 8; the kernel stays correct."""
    A, B, C = _matmul(32, n, 48)
    s = default_schedule(C, cores=2)
    assert_matches_numpy(s, [A, B, C], seed=7)
    assert max(e for _, _, e in _vector_loops(format_func(lower(s, [A, B, C], "mm")))) == width
