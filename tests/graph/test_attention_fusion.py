"""A model's attention is one task, rebuilt so that its default schedule is the flash-attention rewrite.

Hand-built encoders (builders.py), ONNX ``Attention`` nodes (opset 23) and, where torch and
transformers are installed, the exported small BERT and GPT-2: one attention task each, whose default
schedule holds a ``flash_attention`` step, and the compiled model still matches the reference or
onnxruntime on random inputs.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from autosched import te, topi
from autosched.graph.attention import canonical_attention, match_chain
from autosched.graph.compiled import compile_model
from autosched.graph.ir import Graph, Input, Output
from autosched.graph.tasks import TaskGraph, extract_tasks
from autosched.search_space.attention_pattern import find_attentions
from autosched.search_space.default import default_schedule

from .builders import Weights, bert_like, random_inputs, reference_outputs
from .model_exporter import load_exporter, missing


def flash_tasks(tg: TaskGraph) -> list[int]:
    """Indices of the tasks whose default schedule applies the flash rewrite."""
    found = []
    for n, task in enumerate(tg.tasks):
        sch = default_schedule(list(task.instance.tensors))
        if any(step.primitive == "flash_attention" for step in sch.trace):
            found.append(n)
    return found


def compiled_matches_reference(graph: Graph, rtol: float = 1e-4) -> None:
    inputs = random_inputs(graph)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks
        got = compile_model(graph).run(inputs)
    for name, want in reference_outputs(graph, inputs).items():
        err = np.abs(got[name] - want).max() / np.abs(want).max()
        assert err < rtol, f"{name}: max relative error {err:.2e}"


def test_encoder_attention_is_one_flash_task_and_matches():
    graph = bert_like(layers=2, seq=20, hidden=32, heads=2)  # 20 queries: no block size divides them
    tg = extract_tasks(graph)
    flash = flash_tasks(tg)
    assert len(flash) == 1 and tg.tasks[flash[0]].weight == 2  # one task, run by both layers
    names = [op.name for op in tg.calls[[c.task for c in tg.calls].index(flash[0])].group.ops]
    assert names[-1] == "layer.0/context/MatMul" and "layer.0/Softmax_maxelem" in names
    # Before this rule the scores, the softmax and the product with v were three tasks per layer.
    assert not any("Softmax" in op.name for c in tg.calls if c.task != flash[0] for op in c.group.ops)
    compiled_matches_reference(graph)


def _attention_graph(softmax_axis: int = -1, mask: bool = True) -> Graph:
    """(1, heads, seq, d) attention as exporters write it: MatMul with K^T, Mul, Add mask, Softmax, MatMul."""
    w = Weights(3)
    q = te.placeholder((1, 2, 12, 8), "float32", name="q")
    kt = te.placeholder((1, 2, 8, 12), "float32", name="kt")  # K transposed, (batch, heads, d, keys)
    v = te.placeholder((1, 2, 12, 8), "float32", name="v")
    d = te.reduce_axis((0, 8), name="d")
    scores = te.compute(
        (1, 2, 12, 12), lambda b, h, i, j: te.sum(q[0, h, i, d] * kt[0, h, d, j], axis=d), name="MatMul"
    )
    x = topi.multiply(scores, 0.35, name="scores/Mul")
    if mask:
        x = topi.add(x, w((1, 1, 1, 12), "mask", -2.0, 0.0), name="scores/Add")
    probs = topi.softmax(x, axis=softmax_axis, name="Softmax")
    kv = te.reduce_axis((0, 12), name="kv")
    out = te.compute(
        (1, 2, 12, 8), lambda b, h, i, e: te.sum(probs[0, h, i, kv] * v[0, h, kv, e], axis=kv), name="ctx"
    )
    inputs = tuple(Input(t.name, t, "float32") for t in (q, kt, v))
    return Graph("attention", inputs, (Output("out", out, "float32"),), w.values)


@pytest.mark.parametrize("mask", [True, False])
def test_4d_attention_with_mask_and_scale_is_flash(mask):
    graph = _attention_graph(mask=mask)
    tg = extract_tasks(graph)
    assert len(tg.tasks) == 1 and flash_tasks(tg) == [0]
    compiled_matches_reference(graph)


def test_softmax_over_queries_is_not_attention():
    graph = _attention_graph(softmax_axis=2)  # normalized over the wrong axis: not a softmax over keys
    assert match_chain(graph.outputs[0].tensor.op) is None
    tg = extract_tasks(graph)
    assert flash_tasks(tg) == [] and len(tg.tasks) > 1
    compiled_matches_reference(graph)


def test_canonical_form_is_what_the_flash_matcher_takes():
    from autosched.search_space.schedule import create_schedule

    out = extract_tasks(_attention_graph()).tasks[0].instance.outputs[0]
    (pattern,) = find_attentions(create_schedule([out]))
    assert pattern.out == out.op.name and pattern.k_stage == "attention_k"
    again = canonical_attention(out)  # the canonical form is an attention of its own: idempotent
    assert again is not None and [t.shape for t in again.op.input_tensors] == [
        t.shape for t in out.op.input_tensors
    ]


# ONNX Attention (opset 23) ---------------------------------------------------------------------------

onnx_cases = [
    dict(),
    dict(is_causal=1),
    dict(three_d=True),
    dict(kv_heads=1, is_causal=1),  # multi-query
    dict(masked=True),  # a mask input: the zero-row softmax (a row may be all masked), one flash task
]


def _onnx_attention(three_d=False, kv_heads=2, is_causal=0, masked=False):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    heads, seq, d = 2, 19, 16
    shapes = {"Q": (1, heads, seq, d), "K": (1, kv_heads, seq, d), "V": (1, kv_heads, seq, d)}
    attrs: dict = {"is_causal": is_causal}
    if three_d:
        shapes = {n: (1, seq, s[1] * d) for n, s in shapes.items()}
        attrs.update(q_num_heads=heads, kv_num_heads=kv_heads)
    names = ["Q", "K", "V"] + (["M"] if masked else [])
    if masked:
        shapes["M"] = (seq, seq)
    node = helper.make_node("Attention", names, ["Y"], **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, shapes[n]) for n in names]
    y_shape = (1, seq, heads * d) if three_d else (1, heads, seq, d)
    outputs = [helper.make_tensor_value_info("Y", TensorProto.FLOAT, y_shape)]
    graph = helper.make_graph([node], "attention", inputs, outputs)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    rng = np.random.default_rng(5)
    feeds = {n: rng.standard_normal(shapes[n]).astype("float32") for n in names}
    if masked:
        feeds["M"] = np.where(rng.random((seq, seq)) < 0.3, -np.inf, 0.0).astype("float32")
        feeds["M"][3, :] = -np.inf  # one query sees no key: ONNX gives zeros
    return m, feeds


@pytest.mark.parametrize(
    "case", onnx_cases, ids=lambda c: "-".join(f"{k}{v}" for k, v in c.items()) or "plain"
)
def test_onnx_attention_node_is_one_flash_task_and_matches_onnxruntime(case):
    ort = pytest.importorskip("onnxruntime")
    from autosched.frontend.onnx import from_onnx

    m, feeds = _onnx_attention(**case)
    try:
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # an older onnxruntime without opset 23
        pytest.skip(f"onnxruntime cannot run Attention-23: {e}")
    (want,) = session.run(None, feeds)
    graph = from_onnx(m)
    tg = extract_tasks(graph)
    flash = flash_tasks(tg)
    # masked: the zero-row softmax (a fully masked row gives zeros) is fused too
    assert len(flash) == 1 and tg.tasks[flash[0]].weight == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_model(graph).run(feeds)["Y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# Exported transformers -------------------------------------------------------------------------------


def _exporter():
    absent = missing("torch", "transformers", "onnx", "onnxruntime")
    if absent is not None:
        pytest.skip(f"{absent} is not installed")
    return load_exporter()


@pytest.mark.parametrize("name", ["bert", "gpt2"])
def test_exported_transformer_attention_is_one_flash_task(name, tmp_path):
    import onnxruntime as ort

    from autosched.frontend.onnx import from_onnx

    exporter = _exporter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        path = exporter.export_model(name, tmp_path, small=True)
    tg = extract_tasks(from_onnx(path))
    flash = flash_tasks(tg)
    assert len(flash) == 1 and tg.tasks[flash[0]].weight == 2  # both layers' attention: one task
    assert not any("softmax" in t.name for t in tg.tasks)  # no softmax task of its own is left
    inputs = exporter.example_inputs(name, small=True, seed=7)
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_model(path).run(inputs)["last_hidden_state"]
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4


@pytest.mark.parametrize("dialect", ["opencl", "cuda"])
def test_attention_task_lowers_for_gpu_targets(dialect):
    """GPU-style targets keep the unfused stages inside the one task: it lowers and renders kernels."""
    from autosched.codegen.c_like import CUDA, OPENCL, render_c_like
    from autosched.lower.pipeline import lower, run_gpu_passes
    from autosched.search_space.gpu_sketch import default_gpu_schedule

    tg = extract_tasks(bert_like(layers=1, seq=20, hidden=32, heads=2))
    (n,) = flash_tasks(tg)
    inst = tg.tasks[n].instance
    sch = default_gpu_schedule(list(inst.outputs))
    assert all(step.primitive != "flash_attention" for step in sch.trace)
    program = render_c_like(
        run_gpu_passes(lower(sch, inst.tensors, "att")), OPENCL if dialect == "opencl" else CUDA
    )
    assert "exp" in program.source and len(program.kernels) >= 5  # qk, max, sum, ... each a kernel


def test_a_deep_chain_reading_its_input_twice_does_not_hang_the_matcher():
    x = te.placeholder((4, 8), "float32", name="x")
    w = te.placeholder((8, 8), "float32", name="w")
    h = x

    def square(t: te.Tensor, n: int) -> te.Tensor:
        return te.compute(t.shape, lambda i, j: t[i, j] * t[i, j] + 0.5, name=f"poly{n}")

    for n in range(40):  # inlined naively: 2**24 reads
        h = square(h, n)
    y = topi.matmul(h, w)
    assert match_chain(y.op) is None
    graph = Graph(
        "poly", (Input("x", x, "float32"),), (Output("y", y, "float32"),), {w.op: np.eye(8, dtype="float32")}
    )
    assert len(extract_tasks(graph).tasks) >= 1


def test_where_masked_attention_of_batch_two_is_one_flash_task():
    """Trilu -> Where(mask, scores, -1e9) -> Softmax -> MatMul, batch 2 (test_onnx_import's block)."""
    ort = pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    from autosched.frontend.onnx import from_onnx

    from ..frontend.test_onnx_import import rand, transformer_block

    m = transformer_block()
    feeds = {"x": rand(2, 4, 8)}
    (want,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    graph = from_onnx(m, input_shapes={"x": (2, 4, 8)})
    tg = extract_tasks(graph)
    assert len(flash_tasks(tg)) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_model(graph).run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_nan_zeroed_softmax_is_the_zero_row_form():
    """torch exports scaled_dot_product_attention as Softmax, then Where(IsNaN(p), 0, p): with a constant
    0 that is the zero-row softmax, fused as one flash task; a wholly masked query gives zeros."""
    q = te.placeholder((1, 2, 21, 8), "float32", name="q")
    k = te.placeholder((1, 2, 21, 8), "float32", name="k")
    v = te.placeholder((1, 2, 21, 8), "float32", name="v")
    mask = te.placeholder((1, 1, 21, 21), "float32", name="mask")
    d = te.reduce_axis((0, 8), name="d")
    qk = te.compute(
        (1, 2, 21, 21), lambda b, h, i, j: te.sum(q[0, h, i, d] * k[0, h, j, d], axis=d), name="MatMul"
    )
    x = topi.add(topi.multiply(qk, 0.35, name="Mul"), mask, name="Add")
    p = topi.softmax(x, name="Softmax")
    zeroed = te.compute(p.shape, lambda *i: te.if_then_else(p[i] != p[i], te.const(0.0), p[i]), name="Where")
    kv = te.reduce_axis((0, 21), name="kv")
    out = te.compute(
        (1, 2, 21, 8), lambda b, h, i, e: te.sum(zeroed[0, h, i, kv] * v[0, h, kv, e], axis=kv), name="ctx"
    )
    hidden = np.where(np.random.default_rng(2).random((1, 1, 21, 21)) < 0.3, -np.inf, 0.0)
    hidden[..., 4, :] = -np.inf
    graph = Graph(
        "sdpa",
        tuple(Input(t.name, t, "float32") for t in (q, k, v)),
        (Output("out", out, "float32"),),
        {mask.op: hidden.astype("float32")},
    )
    chain = match_chain(out.op)
    assert chain is not None and chain.zero_rows
    tg = extract_tasks(graph)
    assert len(tg.tasks) == 1 and flash_tasks(tg) == [0]
    inputs = random_inputs(graph)
    want = reference_outputs(graph, inputs)["out"]
    assert not want[0, :, 4].any() and not np.isnan(want).any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_model(graph).run(inputs)["out"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
