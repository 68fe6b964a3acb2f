"""One-element ONNX constants are te constants in elementwise bodies, so an sdpa-exported BERT fuses.

transformers exports attention with ``attn_implementation="sdpa"`` (its default) through torch's
``scaled_dot_product_attention``, which writes ``Where(IsNaN(p), Constant 0, p)`` after the softmax.
The 0 must reach the matcher as ``const(0)``, not as a read of a 1-element weight, for each layer's
attention to be one flash task. Larger constants stay weights even when all their elements are equal.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from autosched.graph.compiled import compile_model
from autosched.graph.tasks import extract_tasks
from autosched.te.expr import Const, Select
from autosched.te.tensor import ComputeOp, walk

from .model_exporter import load_exporter, missing
from .test_attention_fusion import flash_tasks

pytest.importorskip("onnx")
import onnx
from onnx import TensorProto, helper


def _where_isnan_model(zero: np.ndarray, dtype: int = TensorProto.FLOAT) -> onnx.ModelProto:
    """y = Where(IsNaN(x), zero, x) * 2 with ``zero`` a Constant node and 2 an initializer."""
    nodes = [
        helper.make_node("IsNaN", ["x"], ["nan"]),
        helper.make_node(
            "Constant", [], ["zero"], value=helper.make_tensor("z", dtype, zero.shape, zero.ravel())
        ),
        helper.make_node("Where", ["nan", "zero", "x"], ["clean"]),
        helper.make_node("Mul", ["clean", "two"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "where_isnan",
        [helper.make_tensor_value_info("x", dtype, [3, 5])],
        [helper.make_tensor_value_info("y", dtype, None)],
        [helper.make_tensor("two", dtype, [], [2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]  # type: ignore[no-any-return]


def _run(graph, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # untuned tasks
        return compile_model(graph).run(feeds)["y"]  # type: ignore[no-any-return]


@pytest.mark.parametrize("shape", [(), (1,), (1, 1)])
@pytest.mark.parametrize("dtype", [TensorProto.FLOAT, TensorProto.DOUBLE])
def test_one_element_constants_are_te_constants_and_match_onnxruntime(shape, dtype):
    from autosched.frontend.onnx import from_onnx

    np_dtype = helper.tensor_dtype_to_np_dtype(dtype)
    model = _where_isnan_model(np.full(shape, 0.25, np_dtype), dtype)
    graph = from_onnx(model)
    assert graph.weights == {}  # neither the Constant nor the scalar initializer is a weight
    where = next(op for op in graph.ops() if isinstance(op, ComputeOp) and op.name == "where")
    select = next(n for n in walk(where.body) if isinstance(n, Select))
    assert (
        isinstance(select.t, Const) and select.t.value == 0.25 and select.t.dtype == np.dtype(np_dtype).name
    )
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np_dtype)
    x[0, 1] = x[2, 4] = np.nan
    want = _ort(model, {"x": x})
    got = _run(graph, {"x": x})
    assert got.shape == want.shape and got.dtype == want.dtype and not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_integer_and_bool_scalars_keep_their_dtype():
    from autosched.frontend.onnx import from_onnx

    nodes = [
        helper.make_node("Add", ["i", "k"], ["s"]),  # int64 + int64 scalar 3
        helper.make_node("Greater", ["s", "k"], ["gt"]),
        helper.make_node("And", ["gt", "t"], ["both"]),  # bool scalar True
        helper.make_node("Cast", ["both"], ["y"], to=TensorProto.INT64),
    ]
    graph = helper.make_graph(
        nodes,
        "ints",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [7])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [7])],
        [
            helper.make_tensor("k", TensorProto.INT64, [], [3]),
            helper.make_tensor("t", TensorProto.BOOL, [1], [True]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    imported = from_onnx(model)
    assert imported.weights == {}
    consts = {
        (n.value, n.dtype)
        for op in imported.ops()
        if isinstance(op, ComputeOp) and op.name in ("add", "and")
        for n in walk(op.body)
        if isinstance(n, Const)
    }
    assert (3, "int64") in consts and (1, "int32") in consts  # bool held as int32 0/1
    feeds = {"i": np.arange(-3, 4, dtype=np.int64)}
    np.testing.assert_array_equal(_run(imported, feeds), _ort(model, feeds))


def test_a_larger_all_equal_constant_stays_a_weight():
    from autosched.frontend.onnx import from_onnx

    model = _where_isnan_model(np.zeros((1, 5), np.float32))
    graph = from_onnx(model)
    (array,) = graph.weights.values()  # the (1, 5) zeros; the scalar 2 is folded
    assert array.shape == (1, 5) and not array.any()
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    x[1, 2] = np.nan
    np.testing.assert_allclose(_run(graph, {"x": x}), _ort(model, {"x": x}), rtol=1e-6)


# An sdpa-exported BERT ------------------------------------------------------------------------------


def _export_sdpa_bert(out: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """benchmarks/models/export.py's small BERT (2 layers, hidden 64, 4 heads, sequence 16, padded tail),
    random weights from a config, exported with transformers' default sdpa attention."""
    absent = missing("torch", "transformers", "onnxruntime")
    if absent is not None:
        pytest.skip(f"{absent} is not installed")
    exporter = load_exporter()
    exporter._skip_torchvision_ops()
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(  # type: ignore[call-arg]
        vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=256, max_position_embeddings=512, attn_implementation="sdpa",
    )  # fmt: skip
    model = BertModel(config, add_pooling_layer=False).eval()
    assert model.config._attn_implementation == "sdpa"
    inputs = exporter._token_inputs(16, config.vocab_size)
    path = out / "bert_sdpa.onnx"
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            exporter._LastHidden(model).eval(), tuple(torch.from_numpy(a) for a in inputs.values()),
            str(path), input_names=list(inputs), output_names=["last_hidden_state"],
            opset_version=exporter.OPSET, do_constant_folding=True, dynamo=False,
        )  # fmt: skip
    return path, inputs


def test_sdpa_exported_bert_fuses_each_layer_attention_and_matches_onnxruntime(tmp_path):
    import onnxruntime as ort

    from autosched.frontend.onnx import from_onnx

    path, example = _export_sdpa_bert(tmp_path)
    ops = [n.op_type for n in onnx.load(str(path)).graph.node]
    assert ops.count("IsNaN") == 2  # the sdpa form, one per layer (eager exports have none)
    tg = extract_tasks(from_onnx(path))
    flash = flash_tasks(tg)
    assert len(flash) == 1 and tg.tasks[flash[0]].weight == 2  # both layers' attention: one task
    calls = [c for c in tg.calls if c.task == flash[0]]
    assert len(calls) == 2 and not set(calls[0].group.ops) & set(calls[1].group.ops)  # one per layer
    for call in calls:  # the whole chain, the NaN guard included: QK through the product with V
        names = [op.name for op in call.group.ops]
        assert names.count("matmul") == 2 and "isnan" in names and "softmax_norm" in names
    assert not any("softmax" in t.name for t in tg.tasks)  # no softmax task of its own is left
    rng = np.random.default_rng(7)
    feeds = {
        "input_ids": rng.integers(0, 1000, example["input_ids"].shape, dtype=np.int64),
        "attention_mask": example["attention_mask"],  # a padded tail: the mask matters
    }
    (want,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = compile_model(path).run(feeds)["last_hidden_state"]
    assert np.abs(got - want).max() / np.abs(want).max() < 1e-4
