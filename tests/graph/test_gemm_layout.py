"""GEMM weights stored in [N / nb, K, nb] panels at import (issue 12): the graph pass on MatMul and Gemm
transB=1, random schedules of the rewritten tasks against numpy with their panel reads as vector loads,
the simplifier rule that makes them so, and the compiled model against onnxruntime."""

from __future__ import annotations

import random

import numpy as np
import pytest

from autosched import te
from autosched.build import build
from autosched.codegen.llvm_vector import affine_index, stmt_exprs, walk_exprs
from autosched.graph.gemm_layout import panel_weights
from autosched.graph.tasks import extract_tasks
from autosched.lower.ir import For, Load, PrimFunc, Store
from autosched.lower.simplify import simplify
from autosched.lower.stmt_visit import walk_stmts
from autosched.search_space.sketch import SketchPolicy
from autosched.testing import assert_matches_numpy

from .model_exporter import missing

needs_onnx = pytest.mark.skipif(missing("onnx") is not None, reason="onnx is not installed")


def _ffn_onnx(path, m: int = 16, k: int = 64, n: int = 128, seed: int = 0):
    """x @ W1 + b1, erf, then Gemm(transB=1) with W2 [k, n] and a bias: the weights are constants."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    arrays = {
        "W1": 0.1 * rng.standard_normal((k, n)),
        "b1": rng.standard_normal(n),
        "W2": 0.1 * rng.standard_normal((k, n)),
        "b2": rng.standard_normal(k),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Erf", ["hb"], ["e"]),
        helper.make_node("Gemm", ["e", "W2", "b2"], ["out"], transB=1),
    ]
    inits = [numpy_helper.from_array(a.astype("float32"), name) for name, a in arrays.items()]
    graph = helper.make_graph(
        nodes,
        "ffn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [m, k])],
        inits,
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path, arrays


@needs_onnx
def test_matmul_and_transposed_gemm_weights_become_panels_and_compute_the_same(tmp_path):
    from autosched.frontend.onnx import from_onnx

    from .builders import random_inputs, reference_outputs

    path, arrays = _ffn_onnx(tmp_path / "ffn.onnx")
    graph = from_onnx(path)
    paneled = panel_weights(graph, nb=32)
    shapes = sorted(tuple(op.shape) for op in paneled.weights)
    assert shapes == [(2, 128, 32), (4, 64, 32), (64,), (128,)]  # biases as they were
    by_shape = {tuple(op.shape): v for op, v in paneled.weights.items()}
    w1, w2 = arrays["W1"].astype("float32"), arrays["W2"].astype("float32")  # W2 is read transposed
    np.testing.assert_array_equal(by_shape[(4, 64, 32)][1, :, 5], w1[:, 32 + 5])
    np.testing.assert_array_equal(by_shape[(2, 128, 32)][1, :, 5], w2[32 + 5, :])
    assert panel_weights(paneled) is paneled  # the panels are rank 3: idempotent
    inputs = random_inputs(graph, seed=2)
    want, got = reference_outputs(graph, inputs), reference_outputs(paneled, inputs)
    np.testing.assert_allclose(got["out"], want["out"], rtol=1e-5, atol=1e-5)
    # the same tasks, under new keys
    a, b = extract_tasks(graph), extract_tasks(paneled)
    assert [t.weight for t in a.tasks] == [t.weight for t in b.tasks]
    assert all(x.key != y.key for x, y in zip(a.tasks, b.tasks, strict=True))


def test_a_weight_read_elementwise_or_too_narrow_keeps_its_layout():
    x = te.placeholder((8, 64), "float32", name="x")
    w = te.placeholder((64, 64), "float32", name="w")
    k = te.reduce_axis((0, 64), name="k")
    mm = te.compute((8, 64), lambda i, j: te.sum(x[i, k] * w[k, j], axis=k), name="matmul")
    also = te.compute((8, 64), lambda i, j: mm[i, j] + w[i, j], name="add")  # w read without a reduction
    from autosched.graph.ir import Graph, Input, Output

    value = np.ones((64, 64), "float32")
    g = Graph("g", (Input("x", x, "float32"),), (Output("y", also, "float32"),), {w.op: value})
    assert panel_weights(g) is g
    g2 = Graph("g2", (Input("x", x, "float32"),), (Output("y", mm, "float32"),), {w.op: value})
    assert panel_weights(g2, nb=64) is g2  # N == nb: one panel is the weight as it was
    assert tuple(next(iter(panel_weights(g2, nb=16).weights)).shape) == (4, 64, 16)


def _vector_panel_strides(func: PrimFunc, panel: str) -> list[int | None]:
    """For each load of ``panel`` inside a vectorized loop: its lanes' stride (None: not affine, a
    gather), as codegen's address analysis sees it."""
    found: list[int | None] = []
    for loop in walk_stmts(func.body):
        if not (isinstance(loop, For) and loop.kind == "vectorized"):
            continue
        for inner in walk_stmts(loop.body):
            for e in stmt_exprs(inner):
                for n in walk_exprs(e):
                    if isinstance(n, Load) and n.buffer.name == panel:
                        form = affine_index(n.buffer, n.indices, loop.var)
                        found.append(None if form is None else form.coeff)
    return found


@needs_onnx
@pytest.mark.parametrize("which", [0, 1])
def test_random_schedules_of_panel_gemms_match_numpy_and_read_panels_as_vectors(tmp_path, which: int):
    """Every sampled schedule computes the task (inputs random, not zeros), offers no pack decision for
    the panel, keeps the vector tile within a panel, and indexes the panel's lanes without // or %."""
    from autosched.frontend.onnx import from_onnx

    path, _ = _ffn_onnx(tmp_path / "ffn.onnx")
    task = extract_tasks(panel_weights(from_onnx(path), nb=32)).tasks[which]
    args = list(task.instance.tensors)
    panel = next(a for a in args if len(a.shape) == 3)
    policy, rng = SketchPolicy([args[-1]], lanes=16), random.Random(which)
    for seed in range(5):
        sch, d = policy.sample(rng, {})
        assert not any(key.endswith("/pack") for key in d), d
        vector_tiles = [v[-1] for key, v in d.items() if key.startswith("s0_contract/tile/i1")]
        vector_tiles += [v[-1] for key, v in d.items() if key.startswith("s0_contract/tile/j")]
        assert vector_tiles and all(32 % t == 0 for t in vector_tiles), d
        assert_matches_numpy(sch, args, seed=seed)
        func = build(sch, args, "llvm-cpu", "k").func
        panel_param = func.params[args.index(panel)].name
        strides = _vector_panel_strides(func, panel_param)
        assert strides and set(strides) <= {0, 1}, (d, strides)  # whole vectors or a broadcast


def test_simplify_keeps_a_16_lane_index_within_a_32_wide_panel_affine():
    """``(x * 16 + j) // 32`` is ``(x * 16) // 32`` and ``% 32`` is ``(x * 16) % 32 + j`` for j < 16;
    with j < 32 the rest may carry, and both stay as they were."""
    from autosched.lower.ir import Buffer
    from autosched.te.expr import Var

    for extent, folded in ((16, True), (32, False)):
        x, j = Var("x", "int32"), Var("j", "int32")
        buf = Buffer("out", (32,), "int32")
        e = x * 16 + j
        body = Store(buf, (j,), (e // 32) * 1000 + e % 32)
        text = str(simplify(PrimFunc("f", (buf,), For(x, 8, "serial", For(j, extent, "vectorized", body)))))
        if folded:
            assert "(((x * 16) // 32) * 1000) + (((x * 16) % 32) + j)" in text, text
        else:
            assert "(((x * 16) + j) // 32)" in text, text


@pytest.mark.skipif(missing("onnx", "onnxruntime") is not None, reason="onnx or onnxruntime is not installed")
@pytest.mark.filterwarnings("ignore:2 of 2 tasks have no tuned record")
def test_compiled_ffn_with_panel_weights_matches_onnxruntime(tmp_path):
    import autosched
    from autosched.graph.tune_model import ort_session

    path, _ = _ffn_onnx(tmp_path / "ffn.onnx")
    model = autosched.compile_model(path)  # as_graph stores the panels
    rng = np.random.default_rng(5)
    x = rng.standard_normal((16, 64)).astype("float32")
    (want,) = ort_session(str(path), threads=1).run(None, {"x": x})
    np.testing.assert_allclose(model.run({"x": x})["out"], want, rtol=1e-4, atol=1e-4)
