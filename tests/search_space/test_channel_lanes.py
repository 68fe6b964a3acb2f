"""Channels in vector lanes for MobileNet's convs (issue 12): a depthwise conv may vectorize its channel
axis (its data and weight packed channels-last, the 3x3 window unrolled over whole vectors), and a conv
with a fused epilogue (bias, ReLU6, a residual add) may vectorize its output channels as a conv
without one does. Sketch decisions here; tests/codegen/test_channel_lanes_samples.py runs them."""

from __future__ import annotations

import random

import pytest

from autosched import te
from autosched.search_space.sketch import SketchPolicy
from autosched.search_space.sketch_base import plain_index
from autosched.te.tensor import ComputeOp, Tensor
from autosched.topi.workloads import make_conv2d, make_depthwise_conv2d


def with_epilogue(args: list[Tensor], residual: bool = False) -> list[Tensor]:
    """A model's fused group: conv + per-channel bias, then ReLU6 (MobileNet's clip) or a residual add."""
    *ins, conv = args
    bias = te.placeholder((conv.shape[1],), conv.dtype, name="bias")
    biased = te.compute(conv.shape, lambda n, c, y, x: conv[n, c, y, x] + bias[c], name="bias_add")
    if residual:
        skip = te.placeholder(conv.shape, conv.dtype, name="skip")
        out = te.compute(conv.shape, lambda *i: biased[i] + skip[i], name="add")
        return [*ins, bias, skip, out]
    out = te.compute(conv.shape, lambda *i: te.min(te.max(biased[i], 0.0), 6.0), name="clip")
    return [*ins, bias, out]


def depthwise(C: int = 32, H: int = 10, W: int = 10, stride: int = 1, onnx: bool = False) -> list[Tensor]:
    """A 3x3 depthwise conv with padding 1: topi's, or ONNX's form (a conv with groups = C)."""
    if onnx:
        return make_conv2d(C=C, H=H, W=W, K=C, R=3, S=3, stride=stride, padding=1, groups=C)
    return make_depthwise_conv2d(C=C, H=H, W=W, stride=stride, padding=1)


def _vector_axes(args: list[Tensor], key: str, n: int = 30) -> set[str]:
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(0)
    return {policy.sample(rng)[1].get(key, "-") for _ in range(n)}


@pytest.mark.parametrize("onnx", [False, True])
def test_depthwise_offers_its_channel_as_the_vector_axis(onnx: bool) -> None:
    args = depthwise(onnx=onnx)
    conv = args[-1].name
    channel = "ff" if onnx else "cc"
    assert _vector_axes(args, f"{conv}.local/vector_axis") == {"last", channel}
    # in a model's task the conv has an epilogue (bias + ReLU6): the choice is still there
    assert _vector_axes(with_epilogue(args), f"{conv}.local/vector_axis") == {"last", channel}


def test_a_pointwise_conv_offers_its_output_channels_only() -> None:
    """A 1x1 conv reads its data at ``yy + ry`` with ``ry`` of extent 1: a row, not a channel; rows in
    lanes would gather the data (MobileNetV2's 28x28 pointwise ran 6-15 ms so)."""
    args = with_epilogue(make_conv2d(C=32, H=28, W=28, K=32, R=1, S=1, stride=1, padding=0))
    assert _vector_axes(args, "conv2d.local/vector_axis") == {"last", "ff"}


@pytest.mark.parametrize(
    "args",
    [
        make_depthwise_conv2d(C=24, H=8, W=8),  # 24 channels: a vector and a half, no whole vectors
        make_depthwise_conv2d(C=16, M=2, H=8, W=8),  # channel multiplier 2: data read at cc // 2
        make_conv2d(C=32, K=32, H=8, W=8, groups=2),  # grouped: read at ff // Kg
    ],
)
def test_no_channel_lanes_where_lanes_would_not_be_whole_plain_vectors(args) -> None:
    assert _vector_axes(args, f"{args[-1].name}.local/vector_axis") <= {"-", "last"}


def test_depthwise_channel_lanes_pack_data_and_weight_channels_last() -> None:
    """Each tap is then one vector load of 16 channels, and the padded input is read without a
    condition per lane: the padding is tested once per element, in the copy."""
    args = depthwise(C=32, H=10, W=10)
    given = {"depthwise_conv2d.local/vector_axis": "cc", "pad/inline": True}
    sch, d = SketchPolicy([args[-1]], lanes=16).sample(random.Random(1), given)
    assert d["depthwise_conv2d.local/vector_axis"] == "cc" and d["depthwise_conv2d.local/pack"] is True
    packs = {st.stage: st.args for st in sch.trace if st.primitive == "cache_read"}
    assert packs["pad"][-1] == (0, 2, 3, 1)  # pad[n, c, y, x] packed as [n, y, x, c]
    assert packs["weight"][-1] == (1, 2, 3, 0)  # weight[c, m, r, s] packed as [m, r, s, c]
    (write,) = [st for st in sch.trace if st.primitive == "cache_write"]
    assert write.args == ("local", (0, 2, 3, 1))
    local = sch["depthwise_conv2d.local"]
    assert isinstance(local.op, ComputeOp)
    assert [a.name for a in local.op.axis] == ["nn", "yy", "xx", "cc"]
    last = local.leaves[-1]
    assert last.name.startswith("cc") and local.annotations[last.name] == "vectorized"
    assert last.extent % 16 == 0  # whole vectors of channels
    # the window is no outer reduction level: all 9 taps inside, on the accumulators in registers
    splits = {
        st.args[0]: st.args[1] for st in sch.trace if st.primitive == "split" and st.stage == local.name
    }
    assert splits["ry"] == 3 and splits["rx"] == 3


def test_an_epilogue_reads_the_channels_last_accumulator() -> None:
    """With a fusion host, channel lanes compute the conv into a channels-last local buffer; the
    conv's own stage (a copy back) is inlined into the host, which writes the NCHW output."""
    args = with_epilogue(make_conv2d(C=16, H=7, W=7, K=32, R=1, S=1, stride=1, padding=0), residual=True)
    given = {"conv2d.local/vector_axis": "ff"}
    sch, d = SketchPolicy([args[-1]], lanes=16).sample(random.Random(2), given)
    assert d["conv2d.local/vector_axis"] == "ff"
    assert sch["conv2d"].attach[0] == "inline"
    assert sch["conv2d.local"].attach[:2] == ("at", "add")
    sch2, d2 = SketchPolicy([args[-1]], lanes=16).sample(
        random.Random(2), {"conv2d.local/vector_axis": "last"}
    )
    assert "conv2d.local" not in {st.name for st in sch2.stages}  # as before: the host's own tile


def test_plain_index_sees_through_onnx_depthwise_indexing() -> None:
    *_, out = make_conv2d(C=16, K=16, H=6, W=6, groups=16)
    op = out.op
    assert isinstance(op, ComputeOp)
    nn, ff = op.axis[0], op.axis[1]
    (data_read,) = [r for r in _reads(op) if r.tensor.op.name == "pad"]
    assert plain_index(data_read.indices[1], ff)  # ((ff // 1) * 1) + rc, rc of extent 1
    assert plain_index(ff, ff) and not plain_index(nn, ff)
    *_, grouped = make_conv2d(C=32, K=32, H=6, W=6, groups=2)
    g_op = grouped.op
    assert isinstance(g_op, ComputeOp)
    (g_read,) = [r for r in _reads(g_op) if r.tensor.op.name == "pad"]
    assert not plain_index(g_read.indices[1], g_op.axis[1])  # (ff // 16) * 16 + rc


def _reads(op):
    from autosched.te.tensor import TensorRead, walk

    return [n for n in walk(op.body) if isinstance(n, TensorRead)]


def test_narrow_widths_vectorize_whole_rows() -> None:
    """A width of 14 (or 28, 7) is tiled by its whole row in lanes, never 2 (or 4, 1) lanes a vector:
    MobileNetV2's 14x14 pointwise convs ran up to 1.8 ms with 2-lane tiles, 0.23-0.46 ms without."""
    from autosched.search_space.sketch_tiling import vector_multiple

    assert [vector_multiple(w, 16) for w in (7, 14, 28, 56, 112, 98)] == [7, 14, 28, 8, 16, 14]
    args = with_epilogue(make_conv2d(C=32, H=14, W=14, K=64, R=1, S=1, stride=1, padding=0))
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(5)
    for _ in range(20):
        _, d = policy.sample(rng, {"conv2d.local/vector_axis": "last"})
        assert d["conv2d/tile/xx"][-1] == 14


def test_a_matrix_vector_product_may_reduce_row_by_row() -> None:
    """A classifier (batch 1): each output a dot product in vector lanes over the contiguous K (its
    bias epilogue then an elementwise stage), or tiled as a GEMM as before."""
    from autosched.topi.workloads import make_dense

    x, w, b, out = make_dense(1, 64, 256, bias=True)
    policy, rng = SketchPolicy([out], lanes=16), random.Random(0)
    seen = set()
    for _ in range(20):
        sch, d = policy.sample(rng)
        (key,) = [k for k in d if k.endswith("/matrix_vector")]
        seen.add(d[key])
        rfactored = any(st.primitive == "rfactor" for st in sch.trace)
        tiled = any(st.primitive == "cache_write" for st in sch.trace) or any(
            k.endswith("/tile/j") for k in d
        )
        assert (d[key] and not tiled) or (not d[key] and tiled and not rfactored)
    assert seen == {True, False}
    *_, square = make_dense(8, 64, 256, bias=True)  # 8 rows reuse each weight: no such choice
    assert not any(k.endswith("/matrix_vector") for k in SketchPolicy([square]).sample(rng)[1])
