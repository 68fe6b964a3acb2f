"""Activations in channel blocks (NCHW16c) between a CNN's tasks (issue 12): the graph pass keeps the
model's values, blocks what it should and leaves what it should, random schedules of the blocked conv
and depthwise tasks match numpy, and a tuned blocked tiny ResNet matches onnxruntime."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autosched import te, topi
from autosched.graph.channel_blocks import blocked_channels
from autosched.graph.compiled import as_graph
from autosched.graph.ir import Graph, Input, Output
from autosched.graph.tasks import extract_tasks
from autosched.graph.tune_model import ModelTuner, compare_with_onnxruntime
from autosched.search_space.sketch import SketchPolicy
from autosched.te.tensor import ComputeOp
from autosched.testing import assert_matches_numpy
from autosched.tune import TuneOptions

from .builders import random_inputs, reference_outputs, resnet_like
from .model_exporter import missing


def _same_values(a: Graph, b: Graph, seed: int = 1) -> None:
    inputs = random_inputs(a, seed)
    want, got = reference_outputs(a, inputs), reference_outputs(b, inputs)
    assert set(want) == set(got)
    for name in want:
        assert np.abs(want[name]).max() > 0  # never a comparison of zeros
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-5)


def test_a_resnet_s_activations_are_blocked_and_it_computes_the_same():
    graph = as_graph(resnet_like(blocks=1, channels=32, size=8), winograd=False)  # its 3x3 convs direct
    blocked = blocked_channels(graph)
    _same_values(graph, blocked)
    ops = {op.name: op for op in blocked.ops()}
    # the stem reads the NCHW input's pad per reduction channel: the pad stays NCHW, the stem's output not
    assert ops["pad"].shape == (1, 32, 10, 10) or any(o.shape == (1, 32, 10, 10) for o in blocked.ops())
    for name in ("stem/Conv", "layer0/conv1/Relu", "layer0/conv2/Add"):
        assert ops[name].shape == (1, 2, 8, 8, 16)
    assert ops["Flatten"].shape == (32, 64)  # not 4-d: reads the blocked tensor at [c // 16, ..., c % 16]
    # conv weights [K/16, C, R, S, 16]: one output block's weights contiguous; bn vectors [C/16, 16]
    assert ops["layer0/conv1.weight"].shape == (2, 32, 3, 3, 16)
    assert ops["layer0/conv1.gamma"].shape == (2, 16)
    # the conv reads its input channels as split reduction axes, not through // and %
    conv = ops["layer0/conv1/Conv"]
    assert isinstance(conv, ComputeOp) and [r.extent for r in conv.reduce_axis] == [2, 16, 3, 3]
    assert "//" not in repr(conv.body) and "%" not in repr(conv.body)
    # as many fused groups: bias and batch norm still fuse as broadcasts into the conv (the stem, which
    # reads the NCHW input, is no longer the same task as the block's first conv)
    assert len(extract_tasks(graph).calls) == len(extract_tasks(blocked).calls)
    assert blocked_channels(blocked) is blocked  # nothing 4-d left to block: idempotent


def _depthwise_bias(c: int = 32, size: int = 6, output_blocked_reader: bool = True) -> Graph:
    """A 1x1 stem conv, a relu of the input beside it, pad -> depthwise 3x3 + bias -> relu6, plus the relu,
    then (optionally) a 1x1 conv; the graph's output is 4-d."""
    rng = np.random.default_rng(2)
    x = te.placeholder((1, 3, size, size), "float32", name="x")
    w0 = te.placeholder((c, 3, 1, 1), "float32", name="w0")
    dw = te.placeholder((c, 1, 3, 3), "float32", name="dw")
    bias = te.placeholder((c,), "float32", name="bias")
    pw = te.placeholder((c, c, 1, 1), "float32", name="pw")
    stem = topi.conv2d(x, w0, name="stem")  # reads the input per reduction channel: blocked
    side = topi.relu(x, name="side")  # reads the NCHW input per channel: stays NCHW
    y = topi.conv2d(stem, dw, padding=1, groups=c, name="dw_conv")
    y = te.compute(
        y.shape, lambda n, k, h, w: te.min(te.max(y[n, k, h, w] + bias[k], 0.0), 6.0), name="relu6"
    )
    y = te.compute(y.shape, lambda n, k, h, w: y[n, k, h, w] + side[n, k % 3, h, w], name="mix")
    if output_blocked_reader:
        y = topi.conv2d(y, pw, name="pw_conv")
    weights = {
        w0.op: rng.standard_normal((c, 3, 1, 1)).astype("float32"),
        dw.op: rng.standard_normal((c, 1, 3, 3)).astype("float32"),
        bias.op: rng.standard_normal(c).astype("float32"),
    }
    if output_blocked_reader:
        weights[pw.op] = rng.standard_normal((c, c, 1, 1)).astype("float32")
    return Graph("dw", (Input("x", x, "float32"),), (Output("y", y, "float32"),), weights)


def test_a_depthwise_weight_and_bias_are_blocked_and_the_4d_output_keeps_its_layout():
    graph = as_graph(_depthwise_bias())
    blocked = blocked_channels(graph)
    _same_values(graph, blocked)
    ops = {op.name: op for op in blocked.ops()}
    assert ops["side"].shape == (1, 3, 6, 6)  # 3 channels: not a multiple of 16
    assert ops["stem"].shape == ops["relu6"].shape == (1, 2, 6, 6, 16)
    assert ops["mix"].shape == (1, 32, 6, 6)  # reads x's relu per channel: blocking it would gather lanes
    assert ops["dw"].shape == (2, 1, 3, 3, 16) and ops["bias"].shape == (2, 16)
    assert tuple(blocked.outputs[0].tensor.shape) == (1, 32, 6, 6)  # the output: NCHW, as the model says


def test_channels_that_are_not_a_multiple_of_the_block_stay_nchw():
    graph = as_graph(resnet_like(blocks=1, channels=8, size=8))
    assert blocked_channels(graph) is graph


def _conv_chain(c: int = 32, size: int = 6) -> Graph:
    """A 3x3 stem conv + relu, a 3x3 conv + bias + the stem (a residual) + relu, then a global pool."""
    rng = np.random.default_rng(3)
    x = te.placeholder((1, 3, size, size), "float32", name="x")
    w0 = te.placeholder((c, 3, 3, 3), "float32", name="w0")
    w1 = te.placeholder((c, c, 3, 3), "float32", name="w1")
    b1 = te.placeholder((c,), "float32", name="b1")
    stem = topi.relu(topi.conv2d(x, w0, padding=1, name="stem_conv"), name="stem")
    conv = topi.conv2d(stem, w1, padding=1, name="conv")
    y = te.compute(conv.shape, lambda n, k, h, w: te.max(conv[n, k, h, w] + b1[k] + stem[n, k, h, w], 0.0))
    ry, rx = te.reduce_axis((0, size), name="ry"), te.reduce_axis((0, size), name="rx")
    pooled = te.compute((1, c), lambda n, k: te.sum(y[n, k, ry, rx], axis=[ry, rx]), name="pool")
    weights = {t.op: rng.standard_normal(t.shape).astype("float32") for t in (w0, w1, b1)}
    return Graph("chain", (Input("x", x, "float32"),), (Output("y", pooled, "float32"),), weights)


def _task_args(graph: Graph, kind: str) -> list:
    """The arguments of the first task named ``kind`` that reads a blocked tensor."""
    tasks = extract_tasks(blocked_channels(as_graph(graph, winograd=False))).tasks
    hits = [t for t in tasks if kind in t.instance.name and any(len(x.shape) == 5 for x in t.instance.inputs)]
    assert hits, [t.instance.name for t in tasks]
    return list(hits[0].instance.tensors)


@pytest.mark.parametrize("kind", ["conv2d", "dw_conv"])
def test_random_schedules_of_blocked_tasks_match_numpy(kind: str) -> None:
    graph = _conv_chain() if kind == "conv2d" else _depthwise_bias()
    args = _task_args(graph, "conv")
    assert len(args[-1].shape) == 5 and args[-1].shape[-1] == 16
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(kind)
    for seed in range(4):
        sch, _ = policy.sample(rng)
        assert_matches_numpy(sch, args, seed=seed)


@pytest.mark.skipif(missing("onnx", "onnxruntime") is not None, reason="onnx or onnxruntime is not installed")
def test_a_tuned_blocked_tiny_resnet_matches_onnxruntime(tmp_path):
    from .test_ort_profile import _tiny_resnet

    path = _tiny_resnet(tmp_path / "tiny_resnet.onnx")
    graph = blocked_channels(as_graph(str(path)))
    assert any(len(op.shape) == 5 for op in graph.ops())
    log = tmp_path / "tiny.jsonl"
    opts = TuneOptions(trials=8, batch_size=2, strategy="random", baseline=False, seed=0, num_threads=1)
    mt = ModelTuner(graph, "llvm-cpu", log, opts)  # real builds and runs: one batch per task
    mt.load_previous()
    states = mt.run()
    assert all(math.isfinite(t.best_cost) for t in states)
    race = compare_with_onnxruntime(path, graph=mt.graph, log=log, repeat=2, threads=1)
    assert race.max_rel_err is not None and race.max_rel_err < 1e-4
