"""Conv weights stored output-channel last at build (issue 12): the graph pass, random schedules of the
rewritten convs against numpy (packed or read in place), and a tuned tiny ResNet against onnxruntime."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autosched import te
from autosched.graph.ir import Graph, Input, Output
from autosched.graph.tasks import extract_tasks
from autosched.graph.tune_model import ModelTuner, compare_with_onnxruntime, random_model_inputs
from autosched.graph.weight_layout import channels_last_weights
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.tune import TuneOptions

from .builders import reference_outputs, resnet_like
from .model_exporter import missing


def test_conv_weights_move_output_channel_last_and_the_model_computes_the_same():
    graph = resnet_like(blocks=1, channels=8, size=8)
    moved = channels_last_weights(graph)
    before = [op for op in graph.weights if len(op.shape) == 4]
    after = [op for op in moved.weights if len(op.shape) == 4]
    assert len(before) == len(after) == 3  # the stem and the block's two convs
    for old, new in zip(before, after, strict=True):
        k, c, r, s = old.shape
        assert tuple(new.shape) == (c, r, s, k)
        np.testing.assert_array_equal(moved.weights[new], graph.weights[old].transpose(1, 2, 3, 0))
    others = [op.shape for op in graph.weights if len(op.shape) != 4]
    assert others == [op.shape for op in moved.weights if len(op.shape) != 4]  # bn, dense: as they were
    inputs = random_model_inputs(graph, seed=3)
    want, got = reference_outputs(graph, inputs), reference_outputs(moved, inputs)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-6, atol=1e-6)
    assert channels_last_weights(moved) is moved  # the moved weights no longer match: idempotent
    # the same tasks (deduplicated alike), under new keys for the convs
    a, b = extract_tasks(graph), extract_tasks(moved)
    assert [t.weight for t in a.tasks] == [t.weight for t in b.tasks]
    assert sum(x.key != y.key for x, y in zip(a.tasks, b.tasks, strict=True)) >= 2


def test_a_depthwise_weight_and_a_weight_also_read_elementwise_keep_their_layout():
    x = te.placeholder((1, 16, 6, 6), "float32", name="x")
    dw = te.placeholder((16, 1, 3, 3), "float32", name="dw")
    pad = te.compute(
        (1, 16, 8, 8),
        lambda n, c, y, z: te.if_then_else(te.all(y >= 1, y < 7, z >= 1, z < 7), x[n, c, y - 1, z - 1], 0.0),
        name="pad",
    )
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    out = te.compute(
        (1, 16, 6, 6),
        lambda n, c, y, z: te.sum(pad[n, c, y + ry, z + rx] * dw[c, 0, ry, rx], axis=[ry, rx]),
        name="depthwise",
    )
    rng = np.random.default_rng(0)
    graph = Graph("dw", (Input("x", x, "float32"),), (Output("y", out, "float32"),),
                  {dw.op: rng.standard_normal((16, 1, 3, 3)).astype("float32")})  # fmt: skip
    assert channels_last_weights(graph) is graph


def _residual_block(c: int = 16, size: int = 6) -> Graph:
    """relu(conv3x3(x) + bias + x), as the ONNX frontend writes ResNet's second conv of a block."""
    x = te.placeholder((1, c, size, size), "float32", name="x")
    w = te.placeholder((c, c, 3, 3), "float32", name="w")
    b = te.placeholder((c,), "float32", name="b")
    inside = lambda y, z: te.all(y >= 1, y < size + 1, z >= 1, z < size + 1)  # noqa: E731
    pad = te.compute(
        (1, c, size + 2, size + 2),
        lambda n, ch, y, z: te.if_then_else(inside(y, z), x[n, ch, y - 1, z - 1], 0.0),
        name="pad",
    )
    rc = te.reduce_axis((0, c), name="rc")
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    conv = te.compute(
        (1, c, size, size),
        lambda nn, ff, yy, xx: te.sum(pad[nn, rc, yy + ry, xx + rx] * w[ff, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv2d",
    )
    out = te.compute(conv.shape, lambda n, f, y, z: te.max(conv[n, f, y, z] + b[f] + x[n, f, y, z], 0.0))
    rng = np.random.default_rng(1)
    weights = {
        w.op: rng.standard_normal((c, c, 3, 3)).astype("float32"),
        b.op: rng.standard_normal(c).astype("float32"),
    }
    return Graph("block", (Input("x", x, "float32"),), (Output("y", out, "float32"),), weights)


def _klast_conv_task() -> list:
    """The block's one task (pad, conv, bias, add, relu) after the pass: its weight is [c, ry, rx, k]."""
    (task,) = extract_tasks(channels_last_weights(_residual_block())).tasks
    assert tuple(task.instance.inputs[1].shape) == (16, 3, 3, 16)
    return list(task.instance.tensors)


@pytest.mark.parametrize("pad_inline", [True, False])
@pytest.mark.parametrize("pack", [False, True])
@pytest.mark.parametrize("axis", ["ff", "last"])
def test_random_schedules_of_a_k_last_conv_match_numpy(axis: str, pack: bool, pad_inline: bool) -> None:
    """Channels or W in lanes, the weight packed or read in place, the pad inlined or materialized."""
    args = _klast_conv_task()
    conv = "s1_contract"  # the conv stage of the task (s0 is its pad)
    keys = {f"{conv}.local/vector_axis": axis, f"{conv}.local/pack": pack, f"{conv}/pack": pack}
    keys["s0_inject/inline"] = pad_inline
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(f"{axis}{pack}")
    seen = set()
    for seed in range(3):
        sch, d = policy.sample(rng, dict(keys))
        assert d[f"{conv}.local/vector_axis"] == axis and d["s0_inject/inline"] is pad_inline
        seen.add(d.get(f"{conv}.local/pack", d.get(f"{conv}/pack")))
        assert_matches_numpy(sch, args, seed=seed)
    assert seen == {pack}  # read in place is offered with channels in lanes too (the weight is K-last)


@pytest.mark.skipif(missing("onnx", "onnxruntime") is not None, reason="onnx or onnxruntime is not installed")
def test_tuned_tiny_resnet_with_k_last_weights_matches_onnxruntime(tmp_path):
    from autosched.frontend.onnx import from_onnx

    from .test_ort_profile import _tiny_resnet

    path = _tiny_resnet(tmp_path / "tiny_resnet.onnx")
    graph = channels_last_weights(from_onnx(path))
    log = tmp_path / "tiny.jsonl"
    opts = TuneOptions(trials=10, batch_size=2, strategy="random", baseline=False, seed=0, num_threads=1)
    mt = ModelTuner(graph, "llvm-cpu", log, opts)  # real builds and runs: one batch per task
    mt.load_previous()
    states = mt.run()
    assert all(math.isfinite(t.best_cost) for t in states)
    race = compare_with_onnxruntime(path, graph=mt.graph, log=log, repeat=2, threads=1)
    assert race.tuned_tasks == len(states) and race.max_rel_err is not None and race.max_rel_err < 1e-4
