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
from ...topi.elementwise import broadcast_read
from ...topi.index import axis_names, named
from ...topi.reduction import _reduce
from .context import Node, Out
from .ops_tensor import clamp, compute, each, int_list
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


# kind -> (what each element becomes before the sum, what the sum becomes after); None: as is.
_SUMS: dict[str, tuple[Callable[[Any], Any] | None, Callable[[Any], Any] | None]] = {
    "sum_square": (lambda v: v * v, None),
    "l1": (te.abs, None),
    "l2": (lambda v: v * v, te.sqrt),
    "log_sum": (None, te.log),
}
_REDUCERS = {"sum": topi.sum, "mean": topi.mean, "max": topi.max, "min": topi.min}


def reduction(node: Node, input_since: int, kind: str) -> Any:
    shape = node.shape(0)
    axes = reduce_axes(node, input_since)
    if axes is None or not shape:
        return node.input(0)
    keep = bool(node.attr("keepdims", 1))
    x = node.tensor(0)
    if keep:
        out_shape = tuple(1 if d in axes else s for d, s in enumerate(shape))
    else:
        out_shape = tuple(s for d, s in enumerate(shape) if d not in axes)
    if kind in ("l2", "log_sum", "log_sum_exp") and not is_float(x.dtype):
        raise node.error(f"{node.op_type} takes floats, got {x.dtype}")
    name = f"reduce_{kind}"
    if kind in _REDUCERS:
        out = _REDUCERS[kind](x, axis=axes, keepdims=keep, name=name)
    elif kind == "prod":
        out = _reduce("prod", x, axes, keep, prod_reducer, name)[0]  # topi's reduction, another reducer
    elif kind in _SUMS:
        before, after = _SUMS[kind]
        src = x if before is None else each(x, lambda i: before(x[i]), f"{name}_terms")
        out = topi.sum(src, axis=axes, keepdims=keep, name=name)
        if after is not None:
            total = out
            out = each(total, lambda i: after(total[i]), f"{name}_post")
    else:  # log_sum_exp: max + log(sum(exp(x - max))), steady for large x
        peak = topi.max(x, axis=axes, keepdims=True, name=f"{name}_max")
        exps = each(x, lambda i: te.exp(x[i] - broadcast_read(peak, i)), f"{name}_exp")
        total = topi.sum(exps, axis=axes, keepdims=keep, name=f"{name}_sum")
        peak_out = peak if keep else topi.reshape(peak, total.shape)
        out = each(total, lambda i: peak_out[i] + te.log(total[i]), name)
    return Out(out, out_shape, node.dtype(0))


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


def first_best_index(x: Any, axis: int, largest: bool = True, last: bool = False) -> Any:
    """The index (int64, keepdims) of the first (or ``last``) max (or min) of ``x`` along ``axis``."""
    best = (topi.max if largest else topi.min)(x, axis=axis, keepdims=True, name="arg_best")
    n = x.shape[axis]
    r = te.reduce_axis((0, n), name="k")

    def body(*i: Any) -> Any:
        hit = x[(*i[:axis], r, *i[axis + 1 :])] == best[i]
        pos = te.cast("int64", r)
        if last:
            return te.max(te.if_then_else(hit, pos, te.const(-1, "int64")), axis=r)
        return te.min(te.if_then_else(hit, pos, te.const(n, "int64")), axis=r)

    return te.compute(best.shape, named(body, axis_names(x.ndim)), name="arg_index")


def arg_reduce(node: Node, largest: bool) -> Out:
    shape = node.shape(0)
    axis = node.axis(node.attr("axis", 0), len(shape))
    keep = bool(node.attr("keepdims", 1))
    index = first_best_index(node.tensor(0), axis, largest, bool(node.attr("select_last_index", 0)))
    if keep:
        return Out(index, tuple(index.shape), "int64")
    out_shape = tuple(s for d, s in enumerate(shape) if d != axis)
    return Out(topi.reshape(index, out_shape or (1,)), out_shape, "int64")


for _v in (1, 11, 12, 13):
    converter("ArgMax", _v)(lambda node: arg_reduce(node, largest=True))
    converter("ArgMin", _v)(lambda node: arg_reduce(node, largest=False))


def cumulative(node: Node, reducer: Any) -> Out:
    """CumSum/CumProd: each element folds its predecessors along ``axis`` (a masked reduction)."""
    shape = node.shape(0)
    axis = node.axis(int_list(node, 1, "axis")[0], len(shape))
    exclusive, reverse = node.attr("exclusive", 0), node.attr("reverse", 0)
    r = te.reduce_axis((0, shape[axis]), name="k")
    x = node.tensor(0)

    def body(*i: Any) -> Any:
        j = i[axis]
        if reverse:
            cond = r > j if exclusive else r >= j
        else:
            cond = r < j if exclusive else r <= j
        return reducer(x[(*i[:axis], r, *i[axis + 1 :])], axis=r, where=cond)

    return compute(node, shape, body)


for _v in (11, 14):
    converter("CumSum", _v)(lambda node: cumulative(node, te.sum))
converter("CumProd", 26)(lambda node: cumulative(node, prod_reducer))


@converter("TopK", since=1)
@converter("TopK", since=10)
@converter("TopK", since=11)
@converter("TopK", since=24)
def top_k(node: Node) -> list[Out]:
    """Values and int64 indices of the k largest (or smallest), ties to the lower index, sorted.

    Each element's rank counts the elements that beat it; output slot t holds the element of rank t.
    Quadratic in the axis length, which suits the short axes TopK sees in models.
    """
    shape = node.shape(0)
    x = node.tensor(0)
    axis = node.axis(node.attr("axis", -1), len(shape))
    k = node.attr("k") if node.opset < 10 else int_list(node, 1, "k")[0]
    largest = bool(node.attr("largest", 1))
    n = shape[axis]
    r = te.reduce_axis((0, n), name="r")

    def at(i: Any, pos: Any) -> tuple[Any, ...]:
        return (*i[:axis], pos, *i[axis + 1 :])

    def rank_body(*i: Any) -> Any:
        mine, other = x[i], x[at(i, r)]
        beats = (other > mine) if largest else (other < mine)
        before = te.any(beats, te.all(other == mine, r < i[axis]))
        return te.sum(te.if_then_else(before, te.const(1, "int32"), te.const(0, "int32")), axis=r)

    rank = te.compute(x.shape, named(rank_body, axis_names(x.ndim)), name="topk_rank")
    r2 = te.reduce_axis((0, n), name="r")
    out_shape = (*shape[:axis], k, *shape[axis + 1 :])

    def index_body(*i: Any) -> Any:
        hit = rank[at(i, r2)] == i[axis]
        return te.max(te.if_then_else(hit, te.cast("int64", r2), te.const(0, "int64")), axis=r2)

    index = compute(node, out_shape, index_body, "int64", name="topk_index")
    it = index.tensor

    def value_body(*i: Any) -> Any:
        pos = clamp(te.cast("int32", it[i]), n)  # provably in range for lowering
        return x[at(i, pos)]

    values = compute(node, out_shape, value_body, name="topk_values")
    return [values, index]
