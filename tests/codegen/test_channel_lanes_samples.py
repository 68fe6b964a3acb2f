"""Random sketch samples of MobileNet's conv kinds with their channels in vector lanes, or with their
last axis there, compiled and compared with numpy on random inputs: depthwise 3x3 (stride 1 and 2,
padded; topi's and ONNX's form), with the model's epilogue (bias + ReLU6), and pointwise 1x1 convs
with a bias and a residual add (issue 12)."""

from __future__ import annotations

import random

import pytest

from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.topi.workloads import make_conv2d, make_dense
from tests.search_space.test_channel_lanes import depthwise, with_epilogue


def pointwise(C: int, HW: int, K: int) -> list:
    return make_conv2d(C=C, H=HW, W=HW, K=K, R=1, S=1, stride=1, padding=0)


CASES = {
    "depthwise": (lambda: depthwise(C=32, H=9, W=10), "depthwise_conv2d", "cc"),
    "depthwise_stride2": (lambda: depthwise(C=16, H=12, W=11, stride=2), "depthwise_conv2d", "cc"),
    "depthwise_onnx_relu6": (lambda: with_epilogue(depthwise(C=32, H=8, W=8, onnx=True)), "conv2d", "ff"),
    "depthwise_onnx_stride2_relu6": (
        lambda: with_epilogue(depthwise(C=16, H=10, W=10, stride=2, onnx=True)), "conv2d", "ff",
    ),
    "pointwise_relu6": (
        lambda: with_epilogue(pointwise(24, 7, 32)), "conv2d", "ff",
    ),
    "pointwise_residual": (
        lambda: with_epilogue(pointwise(32, 6, 16), residual=True),
        "conv2d", "ff",
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("lanes", ["channel", "last"])
def test_sketch_samples_match_numpy(name: str, lanes: str) -> None:
    make, conv, channel = CASES[name]
    args = make()
    key = f"{conv}.local/vector_axis"
    axis = channel if lanes == "channel" else "last"
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(name)
    for seed in range(3):
        sch, d = policy.sample(rng, {key: axis})
        assert d[key] == axis
        assert_matches_numpy(sch, args, seed=seed)


@pytest.mark.parametrize("row_by_row", [True, False])
def test_classifier_samples_match_numpy(row_by_row: bool) -> None:
    """Batch-1 dense + bias (MobileNetV2's classifier), reduced row by row in lanes or tiled."""
    args = make_dense(1, 40, 96, bias=True, activation=None)
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(3)
    for seed in range(4):
        sch, d = policy.sample(rng, {"dense/matrix_vector": row_by_row})
        assert d["dense/matrix_vector"] is row_by_row
        assert_matches_numpy(sch, args, seed=seed)


def test_new_decisions_replay_from_a_logged_trace() -> None:
    """A tuning log keeps traces: channel lanes under an epilogue (the conv's copy inlined after its
    cache_write) and a row-by-row classifier rebuild from JSON and still match numpy."""
    import json

    from autosched.search_space.schedule import replay
    from autosched.search_space.trace import trace_from_json, trace_to_json

    cases: list[tuple[list, dict[str, object]]] = [
        (with_epilogue(depthwise(C=32, H=8, W=8, onnx=True)), {"conv2d.local/vector_axis": "ff"}),
        (make_dense(1, 40, 96, bias=True, activation=None), {"dense/matrix_vector": True}),
    ]
    for args, given in cases:
        sch, _ = SketchPolicy([args[-1]], lanes=16).sample(random.Random(1), given)
        trace = trace_from_json(json.loads(json.dumps(trace_to_json(sch.trace))))
        assert_matches_numpy(replay([args[-1]], trace), args, seed=3)
