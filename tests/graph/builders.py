"""Graphs built by hand from autosched.topi, standing in for imported models in the graph tests."""

from __future__ import annotations

import numpy as np

from autosched import te, topi
from autosched.graph.ir import Graph, Input, Output


class Weights:
    """Makes weight placeholders with fresh random values (never zeros), keyed by their op."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.values: dict = {}

    def __call__(self, shape: tuple[int, ...], name: str, low: float = -1.0, high: float = 1.0) -> te.Tensor:
        t = te.placeholder(shape, "float32", name=name)
        self.values[t.op] = self.rng.uniform(low, high, shape).astype("float32")
        return t


def conv_bn_relu(x: te.Tensor, w: Weights, channels: int, name: str, residual: te.Tensor | None = None):
    c_in = x.shape[1]
    conv = topi.conv2d(
        x, w((channels, c_in, 3, 3), f"{name}.weight", -0.3, 0.3), padding=1, name=f"{name}/Conv"
    )
    params = [w((channels,), f"{name}.{p}") for p in ("gamma", "beta", "mean")]
    var = w((channels,), f"{name}.var", 0.5, 2.0)
    y = topi.batch_norm(conv, *params, var, name=f"{name}/BatchNormalization")
    if residual is not None:
        y = topi.add(y, residual, name=f"{name}/Add")
    return topi.relu(y, name=f"{name}/Relu")


def resnet_like(blocks: int = 3, channels: int = 8, size: int = 8, seed: int = 0) -> Graph:
    """A stem conv+bn+relu, ``blocks`` identical residual blocks, then flatten + softmax."""
    w = Weights(seed)
    x = te.placeholder((1, channels, size, size), "float32", name="input")
    h = conv_bn_relu(x, w, channels, "stem")
    for b in range(blocks):
        inner = conv_bn_relu(h, w, channels, f"layer{b}/conv1")
        h = conv_bn_relu(inner, w, channels, f"layer{b}/conv2", residual=h)
    flat = topi.reshape(h, (channels, size * size), name="Flatten")
    y = topi.softmax(flat, name="Softmax")
    return Graph("resnet_like", (Input("input", x, "float32"),), (Output("probs", y, "float32"),), w.values)


def encoder_layer(x: te.Tensor, w: Weights, heads: int, name: str) -> te.Tensor:
    """One BERT-style layer: attention (q, k, v, softmax), projection, residual, layer norm, gelu FFN."""
    seq, hidden = x.shape
    d = hidden // heads

    def dense(t: te.Tensor, n_out: int, part: str, activation: str | None = None) -> te.Tensor:
        weight = w((n_out, t.shape[1]), f"{name}.{part}.weight", -0.2, 0.2)
        return topi.dense(
            t, weight, w((n_out,), f"{name}.{part}.bias"), activation, name=f"{name}/{part}/MatMul"
        )

    def split_heads(t: te.Tensor, part: str) -> te.Tensor:
        r = topi.reshape(t, (seq, heads, d), name=f"{name}/{part}/Reshape")
        return topi.transpose(r, (1, 0, 2), name=f"{name}/{part}/Transpose")

    q, k, v = (split_heads(dense(x, hidden, p), p) for p in ("query", "key", "value"))
    scores = topi.batch_matmul(q, k, transpose_b=True, name=f"{name}/scores/MatMul")
    scaled = topi.multiply(scores, 1.0 / d**0.5, name=f"{name}/scores/Mul")
    probs = topi.softmax(scaled, name=f"{name}/Softmax")
    ctx = topi.batch_matmul(probs, v, name=f"{name}/context/MatMul")
    merged = topi.reshape(topi.transpose(ctx, (1, 0, 2), name=f"{name}/merge/Transpose"), (seq, hidden))
    attn = topi.add(dense(merged, hidden, "output"), x, name=f"{name}/attention/Add")
    h = topi.layer_norm(attn, w((hidden,), f"{name}.ln1.gamma"), w((hidden,), f"{name}.ln1.beta"))
    ffn = dense(dense(h, 2 * hidden, "intermediate", "gelu"), hidden, "ffn_out")
    out = topi.add(ffn, h, name=f"{name}/ffn/Add")
    return topi.layer_norm(out, w((hidden,), f"{name}.ln2.gamma"), w((hidden,), f"{name}.ln2.beta"))


def bert_like(layers: int = 2, seq: int = 8, hidden: int = 16, heads: int = 2, seed: int = 0) -> Graph:
    w = Weights(seed)
    x = te.placeholder((seq, hidden), "float32", name="hidden_states")
    h = x
    for n in range(layers):
        h = encoder_layer(h, w, heads, f"layer.{n}")
    return Graph(
        "bert_like", (Input("hidden_states", x, "float32"),), (Output("out", h, "float32"),), w.values
    )


def reference_outputs(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The te reference evaluator's answer for every output of ``graph``."""
    from autosched.te.reference import evaluate

    feed = {i.tensor: inputs[i.name] for i in graph.inputs}
    feed.update({op.output(): value for op, value in graph.weights.items()})
    values = evaluate([o.tensor for o in graph.outputs], feed)
    return {o.name: v for o, v in zip(graph.outputs, values, strict=True)}


def random_inputs(graph: Graph, seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {i.name: rng.standard_normal(i.tensor.shape).astype(i.dtype) for i in graph.inputs}
