"""Reduction ONNX ops: ReduceSum/Mean/Max/Min/Prod and friends, ArgMax/ArgMin.

``axes`` is an attribute before opset 13 (ReduceSum) or 18 (the others) and an input after; no axes
reduces everything unless ``noop_with_empty_axes``. topi's reductions do the work; a reduction to a
scalar keeps te's (1,) and the Value's ONNX shape ().
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import te, topi
from ...te.expr import is_float
from ...topi.index import axis_names, named
from .context import Node, Out
from .ops_tensor import int_list
from .registry import converter

prod_reducer = te.comm_reducer(lambda a, b: a * b, lambda dtype: 1, name="prod")


def reduce_axes(node: Node, input_since: int) -> list[int] | None:
    """The normalized axes to reduce; None means none at all (noop_with_empty_axes)."""
    ndim = len(node.shape(0))
    if node.opset < input_since:
        raw = node.attr("axes")
    else:
        raw = int_list(node, 1, "axes") if node.has(1) else None
        if raw == []:
            raw = None
    if raw is None:
        return None if node.attr("noop_with_empty_axes", 0) else list(range(ndim))
    return sorted({node.axis(a, ndim, "axes") for a in raw})


def reduction(node: Node, input_since: int, kind: str) -> Any:
    shape = node.shape(0)
    axes = reduce_axes(node, input_since)
    if axes is None or not shape:
        return node.input(0)
    keep = bool(node.attr("keepdims", 1))
    x = node.tensor(0)
    out_shape = (
        tuple(1 if d in axes else s for d, s in enumerate(shape))
        if keep
        else tuple(s for d, s in enumerate(shape) if d not in axes)
    )
    if kind in ("l2", "sum_square", "log_sum_exp", "l1") and not is_float(x.dtype) and kind != "l1":
        raise node.error(f"{node.op_type} on {x.dtype} is not supported")
    if kind == "sum_square" or kind == "l2":
        x = te.compute(x.shape, named(lambda *i: x[i] * x[i], axis_names(x.ndim)), name="square")
    elif kind == "l1":
        x = te.compute(x.shape, named(lambda *i: te.abs(x[i]), axis_names(x.ndim)), name="abs")
    elif kind == "log_sum_exp":
        peak = topi.max(x, axis=axes, keepdims=True, name="lse_max")
        from ...topi.elementwise import broadcast_read

        src = x
        x = te.compute(
            src.shape, named(lambda *i: te.exp(src[i] - broadcast_read(peak, i)), axis_names(src.ndim))
        )
    fns: dict[str, Callable[..., Any]] = {
        "sum": topi.sum, "mean": topi.mean, "max": topi.max, "min": topi.min, "sum_square": topi.sum,
        "l1": topi.sum, "l2": topi.sum, "log_sum": topi.sum, "log_sum_exp": topi.sum,
    }  # fmt: skip
    if kind == "prod":
        out = prod_of(x, axes, keep)
    else:
        out = fns[kind](x, axis=axes, keepdims=keep, name=f"reduce_{kind}")
    post = {"l2": te.sqrt, "log_sum": te.log, "log_sum_exp": te.log}.get(kind)
    if post is not None:
        red = out
        out = te.compute(
            red.shape, named(lambda *i: post(red[i]), axis_names(red.ndim)), name=f"reduce_{kind}_post"
        )
    if kind == "log_sum_exp":
        lse, peak_t = out, peak
        flat = peak_t if keep else topi.reshape(peak_t, lse.shape)
        out = te.compute(
            lse.shape, named(lambda *i: lse[i] + flat[i], axis_names(lse.ndim)), name="reduce_lse"
        )
    return Out(out, out_shape, node.dtype(0))


def prod_of(x: Any, axes: list[int], keep: bool) -> Any:
    from ...topi.reduction import _reduce

    return _reduce("prod", x, axes, keep, prod_reducer, "reduce_prod")[0]


_REDUCES = {
    "ReduceSum": ("sum", (1, 11, 13), 13),
    "ReduceMean": ("mean", (1, 11, 13, 18), 18),
    "ReduceMax": ("max", (1, 11, 12, 13, 18, 20), 18),
    "ReduceMin": ("min", (1, 11, 12, 13, 18, 20), 18),
    "ReduceProd": ("prod", (1, 11, 13, 18), 18),
    "ReduceSumSquare": ("sum_square", (1, 11, 13, 18), 18),
    "ReduceL1": ("l1", (1, 11, 13, 18), 18),
    "ReduceL2": ("l2", (1, 11, 13, 18), 18),
    "ReduceLogSum": ("log_sum", (1, 11, 13, 18), 18),
    "ReduceLogSumExp": ("log_sum_exp", (1, 11, 13, 18), 18),
}
for _op, (_kind, _versions, _input_since) in _REDUCES.items():
    for _v in _versions:
        converter(_op, _v)(lambda node, k=_kind, s=_input_since: reduction(node, s, k))


def arg_reduce(node: Node, largest: bool) -> Out:
    shape = node.shape(0)
    x = node.tensor(0)
    axis = node.axis(node.attr("axis", 0), len(shape))
    keep = bool(node.attr("keepdims", 1))
    last = bool(node.attr("select_last_index", 0))
    best = (topi.max if largest else topi.min)(x, axis=axis, keepdims=True, name="arg_best")
    n = shape[axis]
    r = te.reduce_axis((0, n), name="k")
    out_keep = tuple(1 if d == axis else s for d, s in enumerate(shape))

    def body(*i: Any) -> Any:
        src = (*i[:axis], r, *i[axis + 1 :])
        hit = x[src] == best[i]
        pos = te.cast("int64", r)
        if last:
            return te.max(te.if_then_else(hit, pos, te.const(-1, "int64")), axis=r)
        return te.min(te.if_then_else(hit, pos, te.const(n, "int64")), axis=r)

    index = te.compute(out_keep, named(body, axis_names(len(out_keep))), name="arg_index")
    out_shape = out_keep if keep else tuple(s for d, s in enumerate(shape) if d != axis)
    if not keep:
        index = topi.reshape(index, out_shape or (1,))
    return Out(index, out_shape, "int64")


for _v in (1, 11, 12, 13):
    converter("ArgMax", _v)(lambda node: arg_reduce(node, largest=True))
    converter("ArgMin", _v)(lambda node: arg_reduce(node, largest=False))
