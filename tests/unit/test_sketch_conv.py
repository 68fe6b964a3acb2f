"""Convolutions may vectorize over output channels: the sketch's ``vector_axis`` decision computes
the accumulator with K last (``cache_write(layout=...)``) and packs the weight with K contiguous."""

from __future__ import annotations

import json
import random

import pytest

from autosched.errors import ScheduleError
from autosched.search_space.schedule import create_schedule
from autosched.search_space.sketch import SketchPolicy
from autosched.topi.workloads import (
    make_conv1d,
    make_conv2d,
    make_conv2d_transpose,
    make_depthwise_conv2d,
    make_matmul,
)


def _options(out) -> set[str]:
    policy, rng = SketchPolicy([out], lanes=16), random.Random(0)
    return {d.get(f"{out.name}.local/vector_axis", "-") for d in (policy.sample(rng)[1] for _ in range(30))}


def test_conv_offers_both_vector_axes() -> None:
    *_, out = make_conv2d(C=8, H=12, W=12, K=32)
    assert _options(out) == {"last", "ff"}
    *_, out1 = make_conv1d(C=8, W=32, K=16)
    assert _options(out1) == {"last", "ff"}


@pytest.mark.parametrize(
    "args",
    [
        make_matmul(32, 32, 32),  # one reduction axis: not a convolution
        make_conv2d(K=8),  # fewer output channels than a vector
        make_conv2d(C=32, K=32, groups=2),  # a grouped conv reads its input at ff // Kg
        make_depthwise_conv2d(C=24),  # depthwise: channels in lanes only as whole vectors (issue 12)
        make_depthwise_conv2d(C=16, M=2),  # a channel multiplier reads the data at cc // M
    ],
)
def test_no_channel_axis_where_it_cannot_be_a_vector(args) -> None:
    assert _options(args[-1]) <= {"-", "last"}


def test_channel_vector_packs_the_weight_and_accumulates_with_k_last() -> None:
    *_, out = make_conv2d(C=8, H=12, W=12, K=32)
    given = {"conv2d.local/vector_axis": "ff", "conv2d.local/pack": True}
    sch, decisions = SketchPolicy([out], lanes=16).sample(random.Random(1), given)
    assert decisions["conv2d.local/vector_axis"] == "ff"
    steps = {st.primitive: st for st in sch.trace}
    assert steps["cache_write"].args == ("local", (0, 2, 3, 1))
    assert steps["cache_read"].args[-1] == (1, 2, 3, 0)  # W[k, c, r, s] packed as [c, r, s, k]
    local = sch["conv2d.local"]
    assert [a.name for a in local.op.axis] == ["nn", "yy", "xx", "ff"]
    assert local.leaves[-1].name.startswith("ff") and local.annotations[local.leaves[-1].name] == "vectorized"


def test_cache_write_layout_replays_from_json_and_is_checked() -> None:
    *_, out = make_conv2d(C=8, H=12, W=12, K=32)
    s = create_schedule(out)
    s.cache_write(out.name, "local", (0, 2, 3, 1))
    (step,) = [st for st in s.trace if st.primitive == "cache_write"]
    again = create_schedule(out)
    for st in s.trace:
        again.apply(type(st).from_json(json.loads(json.dumps(st.to_json()))))
    assert [a.name for a in again["conv2d.local"].op.axis] == ["nn", "yy", "xx", "ff"]
    with pytest.raises(ScheduleError, match="not a permutation"):
        create_schedule(out).cache_write(out.name, "local", (0, 1, 1, 2))


def test_transposed_conv_samples_build_a_schedule() -> None:
    *_, out = make_conv2d_transpose(C=4, K=16)
    policy, rng = SketchPolicy([out], lanes=16), random.Random(2)
    for _ in range(10):
        sch, _ = policy.sample(rng)
        assert sch.trace


def test_channel_vector_always_packs_the_weight() -> None:
    """Unpacked, the weight's K has stride C*R*S: every tap would gather."""
    *_, out = make_conv2d(C=8, H=12, W=12, K=32)
    policy, rng = SketchPolicy([out], lanes=16), random.Random(5)
    for _ in range(10):
        _, d = policy.sample(rng, {"conv2d.local/vector_axis": "ff", "conv2d.local/pack": False})
        assert d["conv2d.local/pack"] is True
