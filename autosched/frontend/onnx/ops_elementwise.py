"""Elementwise ONNX ops: arithmetic and comparisons with numpy broadcasting, activations, Cast, Where.

Every op here is one te compute over the broadcast output shape (topi's ``broadcast_read`` picks
index 0 along size-1 dims); bools are int32 0/1, so comparisons select 1 or 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ... import te
from ...te.expr import is_float, is_int
from ...topi.elementwise import SQRT_HALF, broadcast_read
from ...topi.index import axis_names, named
from .context import Node, Out, onnx_dtype, te_dtype, te_shape
from .registry import converter


def broadcast(node: Node, fn: Callable[..., Any], dtype: str | None = None, inputs: Any = None) -> Out:
    """``fn`` of the broadcast elements of the node's inputs, as ONNX ``dtype`` (default input 0's)."""
    idx = list(range(len(node))) if inputs is None else list(inputs)
    idx = [i for i in idx if node.has(i)]
    shapes = [node.shape(i) for i in idx]
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(*shapes))
    except ValueError:
        raise node.error(f"input shapes {shapes} do not broadcast") from None
    # A one-element constant is its value in the body (context.scalar_const), not a weight read.
    operands = [node.scalar(i) for i in idx]
    tensors = [node.tensor(i) if c is None else None for i, c in zip(idx, operands, strict=True)]
    out_dtype = dtype or node.dtype(idx[0])

    def body(*i: Any) -> Any:
        return fn(*(c if t is None else broadcast_read(t, i) for c, t in zip(operands, tensors, strict=True)))

    tshape = te_shape(shape)
    name = node.op_type.lower()
    return Out(te.compute(tshape, named(body, axis_names(len(tshape))), name=name), shape, out_dtype)


def unary(op_type: str, since: int, fn: Callable[..., Any], float_only: bool = True) -> None:
    def convert(node: Node) -> Out:
        if float_only and not is_float(node.dtype(0)):
            raise node.error(f"input 0 is {node.dtype(0)}; {node.op_type} takes float32 or float64")
        return broadcast(node, lambda x: fn(node, x), inputs=[0])

    convert.__name__ = op_type.lower()
    converter(op_type, since)(convert)


def as_bool(x: Any) -> Any:
    return x != 0


def from_bool(cond: Any) -> Any:
    return te.if_then_else(cond, te.const(1, "int32"), te.const(0, "int32"))


def trunc_div(a: Any, b: Any) -> Any:
    """Integer division truncating toward zero (ONNX, C), from te's floor division."""
    q = a // b
    return te.if_then_else(te.all(a % b != 0, (a < 0) != (b < 0)), q + 1, q)


def trunc(x: Any) -> Any:
    return te.if_then_else(x >= 0, te.floor(x), te.ceil(x))


def round_half_even(x: Any) -> Any:
    r = te.floor(x + 0.5)
    is_tie = (r - x) == 0.5
    odd = te.floor(r * 0.5) * 2.0 != r
    return te.if_then_else(te.all(is_tie, odd), r - 1.0, r)


# Binary arithmetic -------------------------------------------------------------------------------
for _op, _fn in (("Add", lambda a, b: a + b), ("Sub", lambda a, b: a - b), ("Mul", lambda a, b: a * b)):
    for _since in (7, 13, 14):
        converter(_op, _since)(lambda node, f=_fn: broadcast(node, f))


@converter("Div", since=7)
@converter("Div", since=13)
@converter("Div", since=14)
def div(node: Node) -> Out:
    if is_int(te_dtype(node.dtype(0))):
        return broadcast(node, trunc_div)
    return broadcast(node, lambda a, b: a / b)


@converter("Mod", since=10)
@converter("Mod", since=13)
def mod(node: Node) -> Out:
    c_style = bool(node.attr("fmod", 0))
    if is_int(node.dtype(0)):
        if c_style:
            return broadcast(node, lambda a, b: a - trunc_div(a, b) * b)
        return broadcast(node, lambda a, b: a % b)
    if not c_style:  # ONNX asks for fmod=1 on floats; fmod=0 is numpy's sign-of-divisor remainder
        return broadcast(node, lambda a, b: a - te.floor(a / b) * b)
    return broadcast(node, lambda a, b: a - trunc(a / b) * b)


@converter("Pow", since=7)
@converter("Pow", since=12)
@converter("Pow", since=13)
@converter("Pow", since=15)
def pow_(node: Node) -> Out:
    dtype = node.dtype(0)
    if is_float(dtype):
        return broadcast(node, lambda a, b: te.pow(a, te.cast(dtype, b)))
    # An integer power: computed in float64 (exact below 2^53), rounded back.
    return broadcast(
        node,
        lambda a, b: te.cast(dtype, te.floor(te.pow(te.cast("float64", a), te.cast("float64", b)) + 0.5)),
    )


def variadic(op_type: str, combine: Callable[[Any, Any], Any], since: tuple[int, ...]) -> None:
    def convert(node: Node) -> Out:
        def body(*xs: Any) -> Any:
            acc = xs[0]
            for x in xs[1:]:
                acc = combine(acc, x)
            return acc / float(len(xs)) if op_type == "Mean" else acc

        return broadcast(node, body)

    for v in since:
        converter(op_type, v)(convert)


variadic("Sum", lambda a, b: a + b, (8, 13))
variadic("Mean", lambda a, b: a + b, (8, 13))
variadic("Max", te.max, (8, 12, 13))
variadic("Min", te.min, (8, 12, 13))


# Comparisons and logic (bools are int32 0/1) --------------------------------------------------------
_COMPARE = {
    "Equal": (lambda a, b: a == b, (11, 13, 19)),
    "Less": (lambda a, b: a < b, (9, 13)),
    "Greater": (lambda a, b: a > b, (9, 13)),
    "LessOrEqual": (lambda a, b: a <= b, (12, 16)),
    "GreaterOrEqual": (lambda a, b: a >= b, (12, 16)),
}
for _op, (_cmp, _versions) in _COMPARE.items():
    for _since in _versions:
        converter(_op, _since)(lambda node, c=_cmp: broadcast(node, lambda a, b: from_bool(c(a, b)), "bool"))

for _op, _logic in (
    ("And", lambda a, b: a * b),
    ("Or", te.max),
    ("Xor", lambda a, b: from_bool(a != b)),
):
    converter(_op, 7)(lambda node, f=_logic: broadcast(node, f, "bool"))

converter("Not", 1)(lambda node: broadcast(node, lambda a: 1 - a, "bool"))


@converter("Where", since=9)
@converter("Where", since=16)
def where(node: Node) -> Out:
    return broadcast(node, lambda c, x, y: te.if_then_else(as_bool(c), x, y), node.dtype(1))


# Unary activations -------------------------------------------------------------------------------
def _selu(node: Node, x: Any) -> Any:
    alpha = node.attr("alpha", 1.67326319217681884765625)
    gamma = node.attr("gamma", 1.05070102214813232421875)
    return te.if_then_else(x > 0, gamma * x, gamma * alpha * (te.exp(x) - 1.0))


def _hard_sigmoid(node: Node, x: Any) -> Any:
    return te.max(te.min(node.attr("alpha", 0.2) * x + node.attr("beta", 0.5), 1.0), 0.0)


def _celu(node: Node, x: Any) -> Any:
    alpha = node.attr("alpha", 1.0)
    return te.max(x, 0.0) + te.min(0.0, alpha * (te.exp(x / alpha) - 1.0))


def _shrink(node: Node, x: Any) -> Any:
    lambd, bias = node.attr("lambd", 0.5), node.attr("bias", 0.0)
    zero = te.const(0, x.dtype)
    return te.if_then_else(x < -lambd, x + bias, te.if_then_else(x > lambd, x - bias, zero))


def _sign(x: Any) -> Any:
    one, zero = te.const(1, x.dtype), te.const(0, x.dtype)
    return te.if_then_else(x > 0, one, te.if_then_else(x < 0, zero - one, zero))


def _softplus(x: Any) -> Any:
    # log(1 + e^x) without overflow: max(x, 0) + log(1 + e^-|x|).
    return te.max(x, 0.0) + te.log(1.0 + te.exp(-te.abs(x)))


for _op, _since, _f, _float in (
    ("Relu", 6, lambda n, x: te.max(x, 0), False),
    ("Relu", 13, lambda n, x: te.max(x, 0), False),
    ("Relu", 14, lambda n, x: te.max(x, 0), False),
    ("Neg", 6, lambda n, x: -x, False),
    ("Neg", 13, lambda n, x: -x, False),
    ("Abs", 6, lambda n, x: te.abs(x), False),
    ("Abs", 13, lambda n, x: te.abs(x), False),
    ("Sign", 9, lambda n, x: _sign(x), False),
    ("Sign", 13, lambda n, x: _sign(x), False),
    ("Exp", 6, lambda n, x: te.exp(x), True),
    ("Exp", 13, lambda n, x: te.exp(x), True),
    ("Log", 6, lambda n, x: te.log(x), True),
    ("Log", 13, lambda n, x: te.log(x), True),
    ("Sqrt", 6, lambda n, x: te.sqrt(x), True),
    ("Sqrt", 13, lambda n, x: te.sqrt(x), True),
    ("Reciprocal", 6, lambda n, x: 1.0 / x, True),
    ("Reciprocal", 13, lambda n, x: 1.0 / x, True),
    ("Floor", 6, lambda n, x: te.floor(x), True),
    ("Floor", 13, lambda n, x: te.floor(x), True),
    ("Ceil", 6, lambda n, x: te.ceil(x), True),
    ("Ceil", 13, lambda n, x: te.ceil(x), True),
    ("Round", 11, lambda n, x: round_half_even(x), True),
    ("Sigmoid", 6, lambda n, x: te.sigmoid(x), True),
    ("Sigmoid", 13, lambda n, x: te.sigmoid(x), True),
    ("Tanh", 6, lambda n, x: te.tanh(x), True),
    ("Tanh", 13, lambda n, x: te.tanh(x), True),
    ("Erf", 9, lambda n, x: te.erf(x), True),
    ("Erf", 13, lambda n, x: te.erf(x), True),
    ("LeakyRelu", 6, lambda n, x: te.if_then_else(x >= 0, x, n.attr("alpha", 0.01) * x), True),
    ("LeakyRelu", 16, lambda n, x: te.if_then_else(x >= 0, x, n.attr("alpha", 0.01) * x), True),
    ("Elu", 6, lambda n, x: te.if_then_else(x >= 0, x, n.attr("alpha", 1.0) * (te.exp(x) - 1.0)), True),
    ("Celu", 12, _celu, True),
    ("Selu", 6, _selu, True),
    ("ThresholdedRelu", 10, lambda n, x: te.if_then_else(x > n.attr("alpha", 1.0), x, 0.0), True),
    ("HardSigmoid", 6, _hard_sigmoid, True),
    ("HardSwish", 14, lambda n, x: x * te.max(te.min(x / 6.0 + 0.5, 1.0), 0.0), True),
    ("Softplus", 1, lambda n, x: _softplus(x), True),
    ("Softsign", 1, lambda n, x: x / (1.0 + te.abs(x)), True),
    ("Mish", 18, lambda n, x: x * te.tanh(_softplus(x)), True),
    ("Swish", 24, lambda n, x: x * te.sigmoid(n.attr("alpha", 1.0) * x), True),
    ("Shrink", 9, _shrink, True),
    ("Sinh", 9, lambda n, x: (te.exp(x) - te.exp(-x)) * 0.5, True),
    ("Cosh", 9, lambda n, x: (te.exp(x) + te.exp(-x)) * 0.5, True),
    ("Asinh", 9, lambda n, x: te.log(x + te.sqrt(x * x + 1.0)), True),
    ("Acosh", 9, lambda n, x: te.log(x + te.sqrt(x * x - 1.0)), True),
    ("Atanh", 9, lambda n, x: 0.5 * te.log((1.0 + x) / (1.0 - x)), True),
):  # fmt: skip
    unary(_op, _since, _f, _float)


@converter("Gelu", since=20)
def gelu(node: Node) -> Out:
    if node.attr("approximate", "none") == "tanh":
        c = math.sqrt(2.0 / math.pi)
        return broadcast(
            node, lambda x: 0.5 * x * (1.0 + te.tanh(c * (x + 0.044715 * x * x * x))), inputs=[0]
        )
    return broadcast(node, lambda x: 0.5 * x * (1.0 + te.erf(x * SQRT_HALF)), inputs=[0])


@converter("PRelu", since=9)
@converter("PRelu", since=16)
def prelu(node: Node) -> Out:
    return broadcast(node, lambda x, slope: te.if_then_else(x < 0, slope * x, x))


@converter("Clip", since=6)
def clip_v6(node: Node) -> Out:
    lo, hi = node.attr("min", -3.4028234663852886e38), node.attr("max", 3.4028234663852886e38)
    return broadcast(node, lambda x: te.min(te.max(x, lo), hi), inputs=[0])


@converter("Clip", since=11)
@converter("Clip", since=12)
@converter("Clip", since=13)
def clip(node: Node) -> Out:
    # min and max are optional scalar inputs; they broadcast like any other operand.
    def body(x: Any, *bounds: Any) -> Any:
        it = iter(bounds)
        if node.has(1):
            x = te.max(x, next(it))
        if node.has(2):
            x = te.min(x, next(it))
        return x

    return broadcast(node, body, inputs=[0, 1, 2])


# Identity-like and Cast ----------------------------------------------------------------------------
@converter("Identity", since=1)
@converter("Identity", since=13)
@converter("Identity", since=14)
@converter("Identity", since=16)
@converter("Identity", since=19)
@converter("Identity", since=21)
def identity(node: Node) -> Any:
    return node.input(0)


@converter("Dropout", since=7)
@converter("Dropout", since=10)
@converter("Dropout", since=12)
@converter("Dropout", since=13)
@converter("Dropout", since=22)
def dropout(node: Node) -> Any:
    """Inference: the identity. The optional mask output is all ones (nothing dropped)."""
    if node.has(2) and bool(np.asarray(node.const(2, "training_mode")).item()):
        raise node.error("training_mode=True drops at random; autosched imports inference models only")
    if len(node.proto.output) > 1 and node.proto.output[1]:
        ones = broadcast(node, lambda x: te.const(1, "int32"), "bool", inputs=[0])
        return [node.input(0), ones]
    return [node.input(0)]


def cast_expr(x: Any, src: str, dst: str) -> Any:
    if dst == "bool":
        return from_bool(x != 0)
    return te.cast(te_dtype(dst), x)


@converter("Cast", since=6)
@converter("Cast", since=9)
@converter("Cast", since=13)
@converter("Cast", since=19)
@converter("Cast", since=21)
def cast(node: Node) -> Out:
    dst = onnx_dtype(node.attr("to"), f"node {node.name!r} (Cast): attribute 'to'")
    src = node.dtype(0)
    return broadcast(node, lambda x: cast_expr(x, src, dst), dst, inputs=[0])


@converter("CastLike", since=15)
@converter("CastLike", since=19)
@converter("CastLike", since=21)
def cast_like(node: Node) -> Out:
    src, dst = node.dtype(0), node.dtype(1)
    return broadcast(node, lambda x: cast_expr(x, src, dst), dst, inputs=[0])


@converter("IsNaN", since=9)
@converter("IsNaN", since=13)
@converter("IsNaN", since=20)
def is_nan(node: Node) -> Out:
    return broadcast(node, lambda x: from_bool(x != x), "bool", inputs=[0])  # NaN alone is unequal to itself


@converter("IsInf", since=10)
@converter("IsInf", since=20)
def is_inf(node: Node) -> Out:
    neg, pos = node.attr("detect_negative", 1), node.attr("detect_positive", 1)

    def body(x: Any) -> Any:
        checks = ([x == float("inf")] if pos else []) + ([x == float("-inf")] if neg else [])
        return from_bool(te.any(*checks)) if checks else te.const(0, "int32")

    return broadcast(node, body, "bool", inputs=[0])
