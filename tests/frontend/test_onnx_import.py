"""ONNX import: small models built with onnx.helper, run as generated kernels, compared with onnxruntime."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from autosched.errors import AutoschedError, OnnxImportError  # noqa: E402
from autosched.frontend.onnx import from_onnx  # noqa: E402
from autosched.frontend.onnx.backend import CompiledGraph  # noqa: E402
from autosched.frontend.onnx.registry import lookup  # noqa: E402
from autosched.graph.compiled import ModelInputError  # noqa: E402
from autosched.te.tensor import ComputeOp  # noqa: E402

F = TensorProto.FLOAT
RNG = np.random.default_rng(7)


def rand(*shape: int) -> np.ndarray:
    a = RNG.uniform(-1.0, 1.0, size=shape).astype(np.float32)
    a[a == 0] = 0.5  # never zeros: a zero can hide a missing term
    return a


def init(name: str, array: np.ndarray) -> TensorProto:
    return numpy_helper.from_array(array, name)


def model(nodes, inputs, outputs, inits=(), opset=20, name="m"):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m


def vi(name: str, shape, dtype=F):
    return helper.make_tensor_value_info(name, dtype, shape)


def check_against_ort(m, feeds, rtol=1e-4, atol=1e-5, **kw):
    expected = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        None, feeds
    )
    graph = from_onnx(m, **kw)
    got = CompiledGraph(graph).run(feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return graph


def compute_names(graph) -> list[str]:
    return [op.name for op in graph.ops() if isinstance(op, ComputeOp)]


def test_cnn_with_folded_batch_norm_matches_onnxruntime():
    c = 4
    nodes = [
        helper.make_node(
            "Conv", ["x", "w", "b"], ["c"], "conv", pads=[1, 1, 1, 1], dilations=[1, 1], group=2
        ),
        helper.make_node("BatchNormalization", ["c", "g", "beta", "mu", "var"], ["bn"], "bn", epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r"], "relu"),
        helper.make_node("MaxPool", ["r"], ["p"], "pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p", "w2"], ["c2"], "conv2", auto_pad="SAME_UPPER", strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["c2"], ["gap"], "gap"),
        helper.make_node("Flatten", ["gap"], ["f"], "flatten"),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["y"], "fc", transB=1, alpha=0.5, beta=2.0),
    ]
    var = RNG.uniform(0.5, 1.5, size=c).astype(np.float32)
    inits = [init("w", rand(c, 1, 3, 3)), init("b", rand(c)), init("g", rand(c)), init("beta", rand(c)),
             init("mu", rand(c)), init("var", var), init("w2", rand(6, c, 3, 3)), init("fc", rand(5, 6)),
             init("fcb", rand(5))]  # fmt: skip
    m = model(nodes, [vi("x", [1, 2, 8, 8])], [vi("y", [1, 5])], inits)
    graph = check_against_ort(m, {"x": rand(1, 2, 8, 8)})
    assert not any("batch_norm" in n for n in compute_names(graph)), "BN after a conv is folded away"
    assert all(not k.name.startswith("x") for k in graph.weights), "the input is not a weight"


def transformer_block(seq: int = 4, dim: int = 8):
    """Attention-like block: shape subgraph -> Reshape, batched MatMul, causal Trilu/Where mask, Softmax,
    LayerNormalization, Gelu."""
    heads = 2
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["batch"], axis=0),
        helper.make_node("Unsqueeze", ["batch", "ax0"], ["batch1"]),
        helper.make_node("Concat", ["batch1", "split_shape"], ["new_shape"], axis=0),
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("Reshape", ["q", "new_shape"], ["qh"]),
        helper.make_node("Transpose", ["qh"], ["qt"], perm=[0, 2, 1, 3]),
        helper.make_node("Transpose", ["qh"], ["kt"], perm=[0, 2, 3, 1]),
        helper.make_node("MatMul", ["qt", "kt"], ["scores"]),
        helper.make_node("Trilu", ["ones"], ["causal"], upper=0),
        helper.make_node("Cast", ["causal"], ["mask"], to=TensorProto.BOOL),
        helper.make_node("Where", ["mask", "scores", "neg"], ["masked"]),
        helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
        helper.make_node("MatMul", ["probs", "qt"], ["ctx"]),
        helper.make_node("Transpose", ["ctx"], ["ctx_t"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["ctx_t", "flat_shape"], ["ctx2"]),
        helper.make_node("Add", ["ctx2", "x"], ["res"]),
        helper.make_node("LayerNormalization", ["res", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Gelu", ["ln"], ["g"]),
        helper.make_node("ReduceMean", ["g", "ax_last"], ["y"], keepdims=1),
    ]
    inits = [
        init("i0", np.array(0, np.int64)), init("ax0", np.array([0], np.int64)),
        init("split_shape", np.array([seq, heads, dim // heads], np.int64)),
        init("flat_shape", np.array([0, seq, dim], np.int64)), init("wq", rand(dim, dim)),
        init("ones", np.ones((seq, seq), np.float32)), init("neg", np.array(-1e9, np.float32)),
        init("gamma", rand(dim)), init("beta", rand(dim)), init("ax_last", np.array([-1], np.int64)),
    ]  # fmt: skip
    return model(nodes, [vi("x", ["batch", seq, dim])], [vi("y", None)], inits)


def test_transformer_block_with_shape_subgraph_matches_onnxruntime():
    m = transformer_block()
    graph = check_against_ort(m, {"x": rand(2, 4, 8)}, input_shapes={"x": (2, 4, 8)})
    names = compute_names(graph)
    # Shape -> Gather -> Unsqueeze -> Concat folded to a constant: no compute of them is left.
    assert not any(n in ("gather", "concatenate", "concat", "unsqueeze") for n in names)


def test_symbolic_dimension_without_a_size_names_input_and_dimension():
    with pytest.raises(OnnxImportError, match=r"input 'x': dimension 0 is symbolic \('batch'\)"):
        from_onnx(transformer_block())


def test_every_unsupported_op_is_listed_at_once():
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], "ok"),
        helper.make_node("Det", ["a"], ["b"], "det1"),
        helper.make_node("Det", ["b"], ["c"], "det2"),
        helper.make_node("NonMaxSuppression", ["c", "c"], ["d"], "nms"),
        helper.make_node("Foo", ["d"], ["y"], "custom", domain="com.example"),
    ]
    m = model(nodes, [vi("x", [2])], [vi("y", [2])])
    m.opset_import.append(helper.make_opsetid("com.example", 1))
    with pytest.raises(OnnxImportError) as err:
        from_onnx(m)
    text = str(err.value)
    assert "3 op type(s)" in text
    assert "Det (domain ai.onnx, opset 20; no converter): 'det1', 'det2'" in text
    assert "NonMaxSuppression" in text and "'nms'" in text
    assert "Foo (domain com.example, opset 1" in text and "'custom'" in text


def test_corrupt_and_truncated_files_are_clear_errors(tmp_path):
    good = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [4])], [vi("y", [4])]).SerializeToString()
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07\x12\xff\xff\xff\xffgarbage")
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(good[: len(good) // 2])
    for path in (corrupt, truncated):
        with pytest.raises(OnnxImportError, match=rf"{path.name}: .*(truncated or corrupt)"):
            from_onnx(str(path))
    with pytest.raises(OnnxImportError, match="no such ONNX file"):
        from_onnx(str(tmp_path / "missing.onnx"))


def test_opset_newer_than_any_converter():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [4])], [vi("y", [4])], opset=99)
    with pytest.raises(OnnxImportError, match="opset 99, newer than any converter"):
        from_onnx(m)


def test_unsupported_dtypes_name_the_tensor():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [4], TensorProto.FLOAT16)],
              [vi("y", [4], TensorProto.FLOAT16)])  # fmt: skip
    with pytest.raises(OnnxImportError, match="input 'x' has dtype FLOAT16"):
        from_onnx(m)
    m = model([helper.make_node("Add", ["x", "w"], ["y"])], [vi("x", [4])], [vi("y", [4])],
              [init("w", np.ones(4, np.int8))])  # fmt: skip
    with pytest.raises(OnnxImportError, match="initializer 'w' has dtype INT8"):
        from_onnx(m)
    m = model([helper.make_node("Cast", ["x"], ["y"], "to_half", to=TensorProto.FLOAT16)], [vi("x", [4])],
              [vi("y", [4], TensorProto.FLOAT16)])  # fmt: skip
    with pytest.raises(OnnxImportError, match=r"'to_half'.*FLOAT16"):
        from_onnx(m)


def test_shape_input_computed_from_the_model_input_is_a_clear_error():
    nodes = [
        helper.make_node("Relu", ["s"], ["s2"]),
        helper.make_node("Reshape", ["x", "s2"], ["y"], "reshape"),
    ]
    m = model(nodes, [vi("x", [2, 3]), vi("s", [2], TensorProto.INT64)], [vi("y", [3, 2])])
    with pytest.raises(
        OnnxImportError, match=r"'reshape' \(Reshape.*input 1 \(shape, 's2'\) must be a constant"
    ):
        from_onnx(m)


def test_initializer_listed_as_input_is_a_weight_unless_given_a_shape():
    nodes = [helper.make_node("Mul", ["x", "scale"], ["y"])]
    m = model(nodes, [vi("x", [3]), vi("scale", [3])], [vi("y", [3])], [init("scale", rand(3))])
    x = rand(3)
    as_weight = from_onnx(m)
    assert [i.name for i in as_weight.inputs] == ["x"] and len(as_weight.weights) == 1
    np.testing.assert_allclose(
        CompiledGraph(as_weight).run({"x": x})[0], x * numpy_helper.to_array(m.graph.initializer[0])
    )
    as_input = from_onnx(m, input_shapes={"scale": (3,)})
    assert [i.name for i in as_input.inputs] == ["x", "scale"] and not as_input.weights
    s = rand(3)
    np.testing.assert_allclose(CompiledGraph(as_input).run({"x": x, "scale": s})[0], x * s, rtol=1e-6)
    with pytest.raises(OnnxImportError, match="not inputs of the model"):
        from_onnx(m, input_shapes={"nope": (3,)})


def test_bool_and_int64_ops_and_scalar_outputs():
    nodes = [
        helper.make_node("Less", ["x", "y"], ["lt"]),
        helper.make_node("Not", ["lt"], ["ge"]),
        helper.make_node("Cast", ["ge"], ["ge_i"], to=TensorProto.INT64),
        helper.make_node("ReduceSum", ["ge_i"], ["count"], keepdims=0),
        helper.make_node("Pow", ["x", "two"], ["sq"]),
        helper.make_node("Sqrt", ["sq"], ["absx"]),
        helper.make_node("Clip", ["absx", "lo", "hi"], ["clipped"]),
        helper.make_node("HardSwish", ["clipped"], ["hs"]),
        helper.make_node("Div", ["hs", "y"], ["d"]),
        helper.make_node("Sub", ["d", "x"], ["e"]),
        helper.make_node("Erf", ["e"], ["erf"]),
        helper.make_node("HardSigmoid", ["erf"], ["hsig"], alpha=0.3),
        helper.make_node("Tanh", ["hsig"], ["out"]),
    ]
    inits = [init("two", np.array(2.0, np.float32)), init("lo", np.array(0.1, np.float32)),
             init("hi", np.array(0.8, np.float32))]  # fmt: skip
    outputs = [vi("ge", [3, 4], TensorProto.BOOL), vi("count", [], TensorProto.INT64), vi("out", [3, 4])]
    m = model(nodes, [vi("x", [3, 4]), vi("y", [4])], outputs, inits)
    check_against_ort(m, {"x": rand(3, 4), "y": rand(4)})


def test_import_error_is_an_autosched_error():
    assert issubclass(OnnxImportError, AutoschedError)


@pytest.mark.parametrize("opset", [11, 13])
def test_converter_is_the_newest_at_or_below_the_model_opset(opset):
    # Softmax flattens the dims from axis on before opset 13, and takes one axis from 13 on.
    m = model([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [vi("x", [2, 3, 4])], [vi("y", [2, 3, 4])],
              opset=opset)  # fmt: skip
    check_against_ort(m, {"x": rand(2, 3, 4)})
    assert lookup("Softmax", "", opset).since == opset
    assert lookup("Softmax", "ai.onnx", 12).since == 11
    assert lookup("Softmax", "", 10) is not None and lookup("Attention", "", 22) is None


def test_squeeze_axes_attribute_before_opset_13_and_input_after():
    x, y = [vi("x", [3, 1, 2])], [vi("y", [3, 2])]
    old = model([helper.make_node("Squeeze", ["x"], ["y"], axes=[1])], x, y, opset=11)
    axes = [init("axes", np.array([1], np.int64))]
    new = model([helper.make_node("Squeeze", ["x", "axes"], ["y"])], x, y, axes, opset=13)
    for m in (old, new):
        check_against_ort(m, {"x": rand(3, 1, 2)})


def test_model_from_path_and_bytes(tmp_path):
    m = model([helper.make_node("Sigmoid", ["x"], ["y"])], [vi("x", [5])], [vi("y", [5])])
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    x = rand(5)
    for source in (str(path), path, m.SerializeToString()):
        np.testing.assert_allclose(
            CompiledGraph(from_onnx(source)).run({"x": x})[0], 1 / (1 + np.exp(-x)), rtol=1e-5
        )


def test_import_autosched_does_not_import_onnx():
    code = (
        "import sys, autosched; assert 'onnx' not in sys.modules and 'autosched.frontend' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_weight_passed_through_identity_is_stored_once():
    nodes = [helper.make_node("Identity", ["w"], ["w2"]), helper.make_node("Add", ["x", "w2"], ["z"]),
             helper.make_node("Mul", ["z", "w"], ["y"])]  # fmt: skip
    w = rand(4)
    m = model(nodes, [vi("x", [4])], [vi("y", [4])], [init("w", w)])
    graph = check_against_ort(m, {"x": rand(4)})
    assert len(graph.weights) == 1


@pytest.mark.parametrize(
    ("op", "low", "high", "reference"),
    [("Sin", -100.0, 100.0, np.sin), ("Cos", -100.0, 100.0, np.cos), ("Tan", -1.5, 1.5, np.tan),
     ("Atan", -50.0, 50.0, np.arctan), ("Asin", -1.0, 1.0, np.arcsin), ("Acos", -1.0, 1.0, np.arccos)],
)  # fmt: skip
def test_trigonometry_built_from_arithmetic_is_float32_accurate(op, low, high, reference):
    x = np.linspace(low, high, 4001, dtype=np.float32)
    m = model([helper.make_node(op, ["x"], ["y"])], [vi("x", [x.size])], [vi("y", [x.size])])
    got = CompiledGraph(from_onnx(m)).run({"x": x})[0]
    np.testing.assert_allclose(got, reference(x.astype(np.float64)), rtol=2e-6, atol=2e-6)


def test_wrong_inputs_at_run_name_the_input():
    m = model([helper.make_node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y", [2, 3])])
    compiled = CompiledGraph(from_onnx(m))
    with pytest.raises(ModelInputError, match=r"input 'x': expected float32\[2, 3\], got float32\[3, 2\]"):
        compiled.run({"x": rand(3, 2)})
    with pytest.raises(ModelInputError, match=r"\['z'\] are unknown and \['x'\] missing"):
        compiled.run({"z": rand(2, 3)})


@pytest.mark.parametrize("inverse", [0, 1])
def test_dft_of_a_complex_signal_matches_numpy(inverse):
    x = rand(2, 12, 2)
    m = model([helper.make_node("DFT", ["x", "", "axis"], ["y"], inverse=inverse)], [vi("x", [2, 12, 2])],
              [vi("y", [2, 12, 2])], [init("axis", np.array(1, np.int64))])  # fmt: skip
    got = CompiledGraph(from_onnx(m)).run({"x": x})[0]
    signal = x[..., 0].astype(np.float64) + 1j * x[..., 1]
    want = np.fft.ifft(signal, axis=1) if inverse else np.fft.fft(signal, axis=1)
    np.testing.assert_allclose(got, np.stack([want.real, want.imag], axis=-1), rtol=1e-5, atol=1e-5)
