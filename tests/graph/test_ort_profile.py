"""onnxruntime's profile mapped onto autosched's tasks (issue 12): attribution rules and the real profiler."""

import io
import math
from pathlib import Path

import numpy as np
import pytest

from autosched.graph.ort_profile import attribute, onnx_task_graph, per_task_comparison, print_per_task

from .model_exporter import missing


def test_layout_nodes_go_to_the_kernel_needing_or_making_the_layout():
    # onnxruntime's NCHWc rewrite of conv -> conv(+add+relu) -> pool, as its optimized graph names it
    graph = {
        "ReorderInput": ("ReorderInput", ["x"], ["t0"]),
        "/c1/Relu_output_0_nchwc": ("Conv", ["t0", "w1r", "b1"], ["t1"]),
        "/c2/Conv_output_0_nchwc": ("Conv", ["t1", "w2r", "b2", "t0"], ["t2"]),
        "ReorderOutput": ("ReorderOutput", ["t2"], ["/relu2/Relu_output_0"]),
        "/pool/GlobalAveragePool": ("GlobalAveragePool", ["/relu2/Relu_output_0"], ["p"]),
        "/fc/Gemm_fused": ("Gemm", ["p", "w3"], ["y"]),
        "Mystery": ("Mystery", ["a"], ["b"]),
    }
    value_call = {"/c1/Relu_output_0": 0, "/c2/Conv_output_0": 1, "/relu2/Relu_output_0": 1, "y": 3}
    node_call = {"/pool/GlobalAveragePool": 2}
    got = attribute(graph, value_call, node_call)
    assert got == {
        "ReorderInput": 0,  # read by the first conv
        "/c1/Relu_output_0_nchwc": 0,  # the value the NCHWc node is named after
        "/c2/Conv_output_0_nchwc": 1,
        "ReorderOutput": 1,  # what it converts back was made by the second conv's group (its output too)
        "/pool/GlobalAveragePool": 2,  # an ONNX node's own name
        "/fc/Gemm_fused": 3,  # by its output, an ONNX value
        "Mystery": None,
    }


def test_reorder_output_without_an_onnx_output_goes_to_its_producer():
    graph = {
        "/p/GlobalAveragePool_output_0_nchwc": ("GlobalAveragePool", ["t"], ["t1"]),
        "ReorderOutput": ("ReorderOutput", ["t1"], ["t2"]),
        "/Flatten": ("Flatten", ["t2"], ["f"]),
    }
    got = attribute(graph, {"/p/GlobalAveragePool_output_0": 4, "f": 5}, {})
    assert got == {"/p/GlobalAveragePool_output_0_nchwc": 4, "ReorderOutput": 4, "/Flatten": 5}


def _tiny_resnet(path: Path, c: int = 16) -> Path:
    """A stem conv+relu, one residual block (conv+relu, conv+add+relu), global pool, gemm: torch's names."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    w = {
        "w0": rng.standard_normal((c, 3, 3, 3)) * 0.3,
        "b0": rng.standard_normal(c) * 0.1,
        "w1": rng.standard_normal((c, c, 3, 3)) * 0.1,
        "b1": rng.standard_normal(c) * 0.1,
        "w2": rng.standard_normal((c, c, 3, 3)) * 0.1,
        "b2": rng.standard_normal(c) * 0.1,
        "wf": rng.standard_normal((10, c)) * 0.3,
        "bf": rng.standard_normal(10) * 0.1,
    }
    conv = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}

    def node(op: str, name: str, ins: list[str], outs: list[str], **attrs: object) -> object:
        return helper.make_node(op, ins, outs, name=name, **attrs)

    nodes = [
        node("Conv", "/conv1/Conv", ["input", "w0", "b0"], ["/conv1/Conv_output_0"], **conv),
        node("Relu", "/relu/Relu", ["/conv1/Conv_output_0"], ["/relu/Relu_output_0"]),
        node(
            "Conv", "/l1/conv1/Conv", ["/relu/Relu_output_0", "w1", "b1"], ["/l1/conv1/Conv_output_0"], **conv
        ),
        node("Relu", "/l1/relu/Relu", ["/l1/conv1/Conv_output_0"], ["/l1/relu/Relu_output_0"]),
        node(
            "Conv",
            "/l1/conv2/Conv",
            ["/l1/relu/Relu_output_0", "w2", "b2"],
            ["/l1/conv2/Conv_output_0"],
            **conv,
        ),
        node("Add", "/l1/Add", ["/l1/conv2/Conv_output_0", "/relu/Relu_output_0"], ["/l1/Add_output_0"]),
        node("Relu", "/l1/relu_1/Relu", ["/l1/Add_output_0"], ["/l1/relu_1/Relu_output_0"]),
        node("GlobalAveragePool", "/avgpool/GlobalAveragePool", ["/l1/relu_1/Relu_output_0"], ["/gap"]),
        node("Flatten", "/Flatten", ["/gap"], ["/flat"]),
        node("Gemm", "/fc/Gemm", ["/flat", "wf", "bf"], ["output"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_resnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 10])],
        [numpy_helper.from_array(v.astype("float32"), k) for k, v in w.items()],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


@pytest.mark.skipif(missing("onnx", "onnxruntime") is not None, reason="onnx or onnxruntime is not installed")
def test_every_profiled_node_of_a_tiny_resnet_lands_on_its_task(tmp_path):
    path = _tiny_resnet(tmp_path / "tiny_resnet.onnx")
    rows, rest = per_task_comparison(path, {}, threads=1, runs=3)
    assert rest == []  # every kernel onnxruntime ran is some task's
    by_name = {r.name: r for r in rows}
    residual = next(r for r in rows if r.name == "fused_pad_conv2d_bias_add_add")  # conv2, add, relu
    # one kernel of onnxruntime (NCHWc conv with the add and relu fused in), named after conv2
    assert len(residual.ort_nodes) == 1 and "/l1/conv2/" in residual.ort_nodes[0]
    assert all(r.ort_s > 0 and r.ort_nodes for r in rows), by_name
    assert all(math.isnan(r.ours_s) and math.isnan(r.ratio) for r in rows)  # no results given
    # with results: the ratio is onnxruntime's over ours, and the table names every task
    tg, _, _ = onnx_task_graph(path)
    best = {task.key: 1e-3 for task in tg.tasks}
    rows, rest = per_task_comparison(path, best, threads=1, runs=3)
    for r in rows:
        assert r.ours_s == pytest.approx(r.weight * 1e-3) and r.ratio == pytest.approx(r.ort_s / r.ours_s)
    out = io.StringIO()
    print_per_task(rows, rest, file=out)
    text = out.getvalue()
    assert all(r.name[:34] in text for r in rows) and "total" in text


@pytest.mark.skipif(missing("onnx", "onnxruntime") is not None, reason="onnx or onnxruntime is not installed")
def test_each_task_races_onnxruntime_on_its_own_nodes(tmp_path):
    from autosched.graph.task_race import print_races, race_tasks
    from autosched.hai.registry import get_adapter
    from autosched.search_space.default import default_trace
    from autosched.target import parse_target

    path = _tiny_resnet(tmp_path / "tiny_resnet.onnx")
    tg, _, _ = onnx_task_graph(path)
    adapter = get_adapter(parse_target("llvm-cpu"))
    traces = {t.key: default_trace(list(t.instance.outputs), adapter, 1) for t in tg.tasks[1:]}
    rows = race_tasks(path, traces, threads=1, rounds=2, block=1)
    assert [r.name for r in rows] == [t.name for t in tg.tasks]
    assert all(r.ort_s > 0 for r in rows)
    assert math.isnan(rows[0].ours_s) and all(r.ours_s > 0 and r.ratio > 0 for r in rows[1:])  # no trace: nan
    out = io.StringIO()
    print_races(rows, file=out)
    assert "weighted sum" in out.getvalue()
