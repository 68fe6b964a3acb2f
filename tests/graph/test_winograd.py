"""Winograd F(2x2, 3x3) for the blocked 3x3 stride-1 convs of a CNN (issue 12): the pass keeps the
model's values, takes exactly the convs it can, splits each into three tasks whose random schedules
match numpy, and the per-task table still finds each conv's calls."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from autosched import te, topi
from autosched.graph.compiled import as_graph, compile_model
from autosched.graph.ir import Graph, Input, Output
from autosched.graph.ort_profile import moved_keys
from autosched.graph.tasks import extract_tasks
from autosched.graph.tune_model import ModelTuner, compare_with_onnxruntime
from autosched.graph.winograd import G, _filter_transform, winograd_convs
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy
from autosched.tune import TuneOptions

from .builders import random_inputs, reference_outputs
from .model_exporter import missing


def _chain(c: int = 64, k: int = 64, size: int = 6, **conv: object) -> Graph:
    """A 1x1 stem + relu (its output is blocked: it feeds a conv), then the conv under test with a
    bias, a relu and (where the shapes agree) a residual add of its input, then a global sum."""
    rng = np.random.default_rng(3)
    x = te.placeholder((1, 16, size, size), "float32", name="x")
    w0 = te.placeholder((c, 16, 1, 1), "float32", name="w0")
    kernel = conv.pop("kernel", 3)
    w1 = te.placeholder((k, c, kernel, kernel), "float32", name="w1")
    b1 = te.placeholder((k,), "float32", name="b1")
    stem = topi.relu(topi.conv2d(x, w0, name="stem_conv"), name="stem")
    out = topi.conv2d(stem, w1, name="conv", **conv)
    skip = stem if out.shape == stem.shape else None

    def act(n, f, h, w):
        z = out[n, f, h, w] + b1[f]
        return te.max(z if skip is None else z + skip[n, f, h, w], 0.0)

    y = te.compute(out.shape, act, name="act")
    ry, rx = te.reduce_axis((0, out.shape[2]), name="ry"), te.reduce_axis((0, out.shape[3]), name="rx")
    pooled = te.compute((1, k), lambda n, f: te.sum(y[n, f, ry, rx], axis=[ry, rx]), name="pool")
    weights = {t.op: rng.standard_normal(t.shape).astype("float32") for t in (w0, w1, b1)}
    return Graph("chain", (Input("x", x, "float32"),), (Output("y", pooled, "float32"),), weights)


def _names(graph: Graph) -> list[str]:
    return [t.instance.name for t in extract_tasks(graph).tasks]


def test_a_blocked_3x3_conv_becomes_three_tasks_and_computes_the_same():
    direct = as_graph(_chain(), winograd=False)
    fast = winograd_convs(direct)
    inputs = random_inputs(direct, seed=1)
    want, got = reference_outputs(direct, inputs)["y"], reference_outputs(fast, inputs)["y"]
    assert np.abs(want).max() > 1
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    names = _names(fast)
    assert any(n.endswith("winograd_input") for n in names), names  # with the conv's pad inlined
    assert any(n.endswith("winograd_bgemm") for n in names), names
    # the output transform takes the bias, residual and relu; it does not run into the pooling
    assert any("winograd_output" in n and "act" in n and "pool" not in n for n in names), names
    assert "fused_conv_act" in _names(direct) and "fused_conv_act" not in names
    assert winograd_convs(fast) is fast  # nothing left to take: idempotent
    assert as_graph(fast) is not None and _names(as_graph(fast)) == names


@pytest.mark.parametrize(
    "conv",
    [
        {"stride": 2, "padding": 1},  # strided: the tiles would skip outputs
        {"padding": 1, "dilation": 2},
        {"kernel": 1},
        {"padding": 0},  # 6 -> 4 is even and stride 1: taken (the control case)
        {"padding": 2},  # 6 -> 8: taken
    ],
)
def test_only_3x3_stride_1_convs_with_an_even_output_are_taken(conv):
    graph = as_graph(_chain(**dict(conv)))
    taken = any("winograd" in n for n in _names(graph))
    plain = conv.get("stride", 1) == 1 and conv.get("dilation", 1) == 1 and conv.get("kernel", 3) == 3
    assert taken == plain


@pytest.mark.parametrize(
    ("c", "k", "size", "taken"),
    [(64, 64, 7, False), (32, 64, 6, False), (64, 32, 6, False), (64, 128, 6, True)],
)
def test_odd_outputs_and_narrow_convs_stay_direct(c, k, size, taken):
    names = _names(as_graph(_chain(c=c, k=k, size=size, padding=1)))
    assert any("winograd" in n for n in names) == taken, names


def test_the_filter_transform_is_g_g_gt_per_channel_pair():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((2, 5, 3, 3, 16)).astype("float32")  # [kb, c, 3, 3, b]: any sizes
    u = _filter_transform(w)
    assert u.shape == (16, 2, 5, 16) and u.dtype == np.float32
    for kb, c, ki in [(0, 0, 0), (1, 4, 15), (1, 2, 7)]:
        want = G @ w[kb, c, :, :, ki].astype(np.float64) @ G.T
        np.testing.assert_allclose(u[:, kb, c, ki].reshape(4, 4), want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("step", ["winograd_input", "winograd_bgemm", "winograd_output"])
def test_random_schedules_of_the_winograd_tasks_match_numpy(step: str) -> None:
    tasks = extract_tasks(as_graph(_chain(size=8, padding=1))).tasks
    task = next(t for t in tasks if step in t.instance.name)
    args = list(task.instance.tensors)
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(step)
    for seed in range(3):
        sch, _ = policy.sample(rng)
        assert_matches_numpy(sch, args, seed=seed)


def test_a_compiled_winograd_model_matches_the_direct_one():
    graph = _chain(size=8, padding=1)
    inputs = random_inputs(graph, seed=2)
    want = reference_outputs(as_graph(graph, winograd=False), inputs)["y"]
    with pytest.warns(UserWarning):  # no log: every task on its default schedule
        model = compile_model(graph)
    assert any("winograd" in t["name"] for t in model.plan["tasks"])
    got = model.run(inputs)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_per_task_table_counts_a_winograd_conv_s_three_calls_on_its_row():
    raw = extract_tasks(as_graph(_chain(size=8, padding=1), winograd=False))
    moved = extract_tasks(as_graph(_chain(size=8, padding=1)))
    keys = moved_keys(raw, moved)
    assert len(keys) == len(raw.calls)
    conv_row = [ks for call, ks in zip(raw.calls, keys) if raw.tasks[call.task].name == "fused_pad_conv_act"]
    assert len(conv_row) == 1 and len(conv_row[0]) == 3  # output, GEMM, input transform
    assert sorted(len(ks) for ks in keys) == [1] * (len(keys) - 1) + [3]


@pytest.mark.skipif(missing("onnx", "onnxruntime") is not None, reason="onnx or onnxruntime is not installed")
def test_a_tuned_winograd_tiny_resnet_matches_onnxruntime(tmp_path):
    from .test_ort_profile import _tiny_resnet

    path = _tiny_resnet(tmp_path / "tiny_resnet.onnx", c=64)
    log = tmp_path / "tiny.jsonl"
    opts = TuneOptions(trials=10, batch_size=2, strategy="random", baseline=False, seed=0, num_threads=1)
    mt = ModelTuner(str(path), "llvm-cpu", log, opts)  # real builds and runs: a batch per task
    # both convs share their input-transform and GEMM tasks; their outputs differ (one adds the residual)
    assert sum("winograd" in t.inst.name for t in mt.states) == 4
    mt.load_previous()
    states = mt.run()
    assert all(math.isfinite(t.best_cost) for t in states)
    race = compare_with_onnxruntime(path, graph=mt.graph, log=log, repeat=2, threads=1)
    assert race.max_rel_err is not None and race.max_rel_err < 1e-4


def test_an_exported_winograd_model_loads_and_matches(tmp_path):
    import autosched
    from autosched.graph.export import export_model

    graph = _chain(size=8, padding=1)
    with pytest.warns(UserWarning):  # no log: default schedules
        res = export_model(graph, tmp_path / "model")
    model = autosched.load(res.directory)
    assert any("winograd" in t["name"] for t in model.manifest["plan"]["tasks"])
    inputs = random_inputs(graph, seed=4)
    want = reference_outputs(as_graph(graph, winograd=False), inputs)["y"]
    np.testing.assert_allclose(model.run(inputs)["y"], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
