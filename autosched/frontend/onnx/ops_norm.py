"""Normalization ONNX ops: BatchNormalization, LayerNormalization and the other norms, Softmax.

BatchNormalization, LayerNormalization and single-axis Softmax reuse topi; the rest are a few te
stages over topi's reductions (statistics with keepdims, broadcast back by ``broadcast_read``).
"""

from __future__ import annotations

import math
from typing import Any

from ... import te, topi
from ...te.expr import is_float
from ...topi.elementwise import broadcast_read
from .context import Node
from .ops_reduce import first_best_index
from .ops_tensor import clamp, each
from .registry import converter


@converter("BatchNormalization", since=7)
@converter("BatchNormalization", since=9)
@converter("BatchNormalization", since=14)
@converter("BatchNormalization", since=15)
def batch_norm(node: Node) -> Any:
    if node.attr("training_mode", 0):
        raise node.error("training_mode=1 computes batch statistics; autosched imports inference models only")
    gamma, beta, mean, var = (node.tensor(i) for i in range(1, 5))
    return topi.batch_norm(node.tensor(0), gamma, beta, mean, var, axis=1, epsilon=node.attr("epsilon", 1e-5))


def softmax_over(x: Any, axes: tuple[int, ...], log: bool) -> Any:
    """Softmax (or log-softmax) of ``x`` over ``axes`` taken together, steadied by the max."""
    if not log and len(axes) == 1:
        return topi.softmax(x, axis=axes[0])
    peak = topi.max(x, axis=axes, keepdims=True, name="softmax_max")
    exp = te.compute(x.shape, lambda *i: te.exp(x[i] - broadcast_read(peak, i)), name="softmax_exp")
    total = topi.sum(exp, axis=axes, keepdims=True, name="softmax_sum")
    if log:
        return te.compute(
            x.shape,
            lambda *i: x[i] - broadcast_read(peak, i) - te.log(broadcast_read(total, i)),
            name="log_softmax",
        )
    return te.compute(x.shape, lambda *i: exp[i] / broadcast_read(total, i), name="softmax_norm")


def softmax_like(node: Node, log: bool) -> Any:
    shape = node.shape(0)
    x = node.tensor(0)
    if not is_float(x.dtype):
        raise node.error(f"input is {x.dtype}; {node.op_type} takes floats")
    axis = node.axis(node.attr("axis", -1 if node.opset >= 13 else 1), len(shape))
    # Before opset 13 the dims from axis on are one flattened axis.
    axes = tuple(range(axis, len(shape))) if node.opset < 13 else (axis,)
    return softmax_over(x, axes, log)


for _v in (1, 11, 13):
    converter("Softmax", _v)(lambda node: softmax_like(node, log=False))
    converter("LogSoftmax", _v)(lambda node: softmax_like(node, log=True))


@converter("LayerNormalization", since=17)
def layer_norm(node: Node) -> Any:
    shape = node.shape(0)
    x = node.tensor(0)
    axis = node.axis(node.attr("axis", -1), len(shape))
    inner = tuple(shape[axis:])

    def full(i: int, default: float) -> Any:
        """Scale or bias broadcast to the normalized dims (ONNX lets them be smaller)."""
        if not node.has(i):
            return te.compute(inner, lambda *j: te.const(default, x.dtype), name="ln_default")
        t = node.tensor(i)
        if t.shape == inner:
            return t
        return te.compute(inner, lambda *j: broadcast_read(t, j), name="ln_param")

    eps = node.attr("epsilon", 1e-5)
    if not any(node.proto.output[1:]):
        return topi.layer_norm(x, full(1, 1.0), full(2, 0.0), axis=axis, epsilon=eps)
    # Mean and InvStdDev are asked for too: the statistics as their own stages.
    axes = tuple(range(axis, len(shape)))
    mean = topi.mean(x, axis=axes, keepdims=True, name="ln_mean")
    sq = te.compute(x.shape, lambda *i: te.pow(x[i] - broadcast_read(mean, i), 2.0), name="ln_sq")
    var = topi.mean(sq, axis=axes, keepdims=True, name="ln_var")
    inv = te.compute(var.shape, lambda *i: te.rsqrt(var[i] + eps), name="ln_inv_std")
    gamma, beta = full(1, 1.0), full(2, 0.0)

    def body(*i: Any) -> Any:
        norm = (x[i] - broadcast_read(mean, i)) * broadcast_read(inv, i)
        return norm * gamma[i[axis:]] + beta[i[axis:]]

    return [te.compute(x.shape, body, name="layer_norm"), mean, inv]


@converter("InstanceNormalization", since=6)
@converter("InstanceNormalization", since=22)
def instance_norm(node: Node) -> Any:
    x = node.tensor(0)
    axes = tuple(range(2, x.ndim))
    count = float(math.prod(x.shape[2:]))
    mean = topi.mean(x, axis=axes, keepdims=True, name="in_mean")
    sq = te.compute(
        x.shape, lambda *i: (x[i] - broadcast_read(mean, i)) * (x[i] - broadcast_read(mean, i)), name="in_sq"
    )
    var = topi.sum(sq, axis=axes, keepdims=True, name="in_var")
    scale, bias = node.tensor(1), node.tensor(2)
    eps = node.attr("epsilon", 1e-5)

    def body(*i: Any) -> Any:
        norm = (x[i] - broadcast_read(mean, i)) * te.rsqrt(broadcast_read(var, i) / count + eps)
        return norm * scale[i[1]] + bias[i[1]]

    return te.compute(x.shape, body, name="instance_norm")


@converter("GroupNormalization", since=18)
@converter("GroupNormalization", since=21)
def group_norm(node: Node) -> Any:
    x = node.tensor(0)
    groups = node.attr("num_groups")
    n, c = x.shape[0], x.shape[1]
    if c % groups:
        raise node.error(f"num_groups={groups} does not divide the {c} channels")
    per = c // groups
    # Statistics per (sample, group) over the group's channels and every spatial position.
    grouped = topi.reshape(x, (n, groups, per * math.prod(x.shape[2:])), name="gn_grouped")
    mean = topi.mean(grouped, axis=2, keepdims=True, name="gn_mean")
    sq = each(grouped, lambda i: te.pow(grouped[i] - mean[i[0], i[1], 0], 2.0), "gn_sq")
    var = topi.mean(sq, axis=2, keepdims=True, name="gn_var")
    scale, bias = node.tensor(1), node.tensor(2)
    eps = node.attr("epsilon", 1e-5)
    per_channel = scale.shape[0] == c  # opset 21; opset 18's scale and bias are per group

    def body(*i: Any) -> Any:
        g = i[1] // per
        norm = (x[i] - mean[i[0], g, 0]) * te.rsqrt(var[i[0], g, 0] + eps)
        p = i[1] if per_channel else g
        return norm * scale[p] + bias[p]

    return te.compute(x.shape, body, name="group_norm")


@converter("RMSNormalization", since=23)
def rms_norm(node: Node) -> Any:
    x = node.tensor(0)
    axis = node.axis(node.attr("axis", -1), x.ndim)
    axes = tuple(range(axis, x.ndim))
    sq = each(x, lambda i: x[i] * x[i], "rms_sq")
    ms = topi.mean(sq, axis=axes, keepdims=True, name="rms_mean")
    scale = node.tensor(1)
    eps = node.attr("epsilon", 1e-5)
    return each(
        x,
        lambda i: x[i] * te.rsqrt(broadcast_read(ms, i) + eps) * broadcast_read(scale, i),
        "rms_norm",
    )


@converter("LpNormalization", since=1)
@converter("LpNormalization", since=22)
def lp_norm(node: Node) -> Any:
    x = node.tensor(0)
    axis = node.axis(node.attr("axis", -1), x.ndim)
    p = node.attr("p", 2)
    if p not in (1, 2):
        raise node.error(f"p={p}; LpNormalization takes p=1 or p=2")
    terms = each(x, lambda i: te.abs(x[i]) if p == 1 else x[i] * x[i], "lp_terms")
    total = topi.sum(terms, axis=axis, keepdims=True, name="lp_sum")
    norm = total if p == 1 else each(total, lambda i: te.sqrt(total[i]), "lp_norm")
    zero = te.const(0, x.dtype)
    return each(
        x, lambda i: te.if_then_else(broadcast_read(norm, i) == 0, zero, x[i] / broadcast_read(norm, i)), "lp"
    )


@converter("MeanVarianceNormalization", since=9)
@converter("MeanVarianceNormalization", since=13)
def mean_variance_norm(node: Node) -> Any:
    x = node.tensor(0)
    axes = tuple(node.axis(a, x.ndim, "axes") for a in node.attr("axes", [0, 2, 3]))
    mean = topi.mean(x, axis=axes, keepdims=True, name="mvn_mean")
    sq = each(x, lambda i: x[i] * x[i], "mvn_sq")
    sq_mean = topi.mean(sq, axis=axes, keepdims=True, name="mvn_sq_mean")

    def body(i: Any) -> Any:
        m = broadcast_read(mean, i)
        std = te.sqrt(te.max(broadcast_read(sq_mean, i) - m * m, 0.0))  # E[x^2] - E[x]^2, as ONNX
        return (x[i] - m) / (std + 1e-9)

    return each(x, body, "mvn")


@converter("LRN", since=1)
@converter("LRN", since=13)
def lrn(node: Node) -> Any:
    x = node.tensor(0)
    size = node.attr("size")
    alpha, beta, bias = node.attr("alpha", 1e-4), node.attr("beta", 0.75), node.attr("bias", 1.0)
    lo, c = (size - 1) // 2, x.shape[1]
    r = te.reduce_axis((0, size), name="r")

    def square_sum(*i: Any) -> Any:
        ch = i[1] + r - lo
        inside = te.all(ch >= 0, ch < c)
        v = x[(i[0], clamp(ch, c), *i[2:])]
        return te.sum(te.if_then_else(inside, v * v, te.const(0, x.dtype)), axis=r)

    sums = te.compute(x.shape, square_sum, name="lrn_square_sum")
    return each(x, lambda i: x[i] / te.pow(bias + (alpha / size) * sums[i], beta), "lrn")


def hardmax(node: Node) -> Any:
    x = node.tensor(0)
    axis = node.axis(node.attr("axis", -1 if node.opset >= 13 else 1), x.ndim)
    if node.opset < 13 and axis != x.ndim - 1:  # the dims from axis on are one flattened axis
        flat = topi.reshape(x, (math.prod(x.shape[:axis]), math.prod(x.shape[axis:])))
        out = te.compute(flat.shape, _hardmax_body(flat, 1, first_best_index(flat, 1)), name="hardmax")
        return topi.reshape(out, x.shape)
    return te.compute(x.shape, _hardmax_body(x, axis, first_best_index(x, axis)), name="hardmax")


def _hardmax_body(x: Any, axis: int, index: Any) -> Any:
    one, zero = te.const(1, x.dtype), te.const(0, x.dtype)

    def body(*i: Any) -> Any:
        at = (*i[:axis], 0, *i[axis + 1 :])
        return te.if_then_else(te.cast("int64", i[axis]) == index[at], one, zero)

    return body


for _v in (1, 11, 13):
    converter("Hardmax", _v)(hardmax)
