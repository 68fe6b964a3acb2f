"""Depthwise and grouped convs: the sketch may materialize their padding (``pad/inline`` = False)
so that the window reads plain vectors instead of evaluating the pad's condition on every tap."""

from __future__ import annotations

import random

from autosched.search_space.sketch import SketchPolicy, window_read
from autosched.topi.workloads import make_conv2d, make_depthwise_conv2d


def _samples(out, n: int = 20, given=None) -> list[dict]:
    policy, rng = SketchPolicy([out], lanes=16), random.Random(0)
    return [policy.sample(rng, given)[1] for _ in range(n)]


def test_depthwise_and_grouped_convs_offer_a_materialized_pad() -> None:
    grouped = (make_conv2d(C=16, K=16, groups=16), make_conv2d(C=8, K=8, groups=2))
    for args in (make_depthwise_conv2d(C=16), *grouped):
        assert {d.get("pad/inline") for d in _samples(args[-1])} == {True, False}


def test_a_plain_conv_offers_a_materialized_pad_too() -> None:
    """Its taps slide over the pad (``yy + ry``): inlined, the tiles at the border test every tap
    (ResNet-18's 56x56 conv: 2.05 ms inlined, 1.62 ms materialized; issue 12)."""
    *_, out = make_conv2d(C=8, K=16)
    assert {d.get("pad/inline") for d in _samples(out)} == {True, False}


def test_window_read_looks_at_structure() -> None:
    data, weight, out = make_depthwise_conv2d(C=8)
    (pad,) = [st.op for st in SketchPolicy([out]).sample(random.Random(0))[0].stages if st.name == "pad"]
    assert window_read(out.op, pad)
    assert not window_read(out.op, weight.op)  # read without the spatial axes yy, xx
    assert not window_read(pad, data.op)  # the pad is no reduction


def test_a_materialized_pad_is_placed_inside_the_convs_tile_or_at_the_root() -> None:
    *_, out = make_depthwise_conv2d(C=16, H=16, W=16)
    for d in _samples(out, given={"pad/inline": False}):
        assert d["pad/inline"] is False
        assert "pad/vector" in d
    assert {d["pad/location"] > 0 for d in _samples(out, given={"pad/inline": False})} == {True, False}


def test_a_small_window_has_no_outer_reduction_level() -> None:
    """9 taps: the accumulator tile stays in registers across all of them (one split per tap axis
    by its whole extent), while a conv over 8 channels x 9 taps keeps its reduction tiles."""
    *_, out = make_depthwise_conv2d(C=16, H=16, W=16)
    sch, d = SketchPolicy([out], lanes=16).sample(random.Random(3))
    assert not any(k.endswith(("/tile/ry", "/tile/rx")) for k in d)
    local_splits = [st for st in sch.trace if st.primitive == "split" and st.stage.endswith("local")]
    splits = {st.args[0]: st.args[1] for st in local_splits}
    assert splits["ry"] == 3 and splits["rx"] == 3
    *_, conv = make_conv2d(C=8, K=16)
    assert all("conv2d.local/tile/rc" in d for d in _samples(conv, n=5))
