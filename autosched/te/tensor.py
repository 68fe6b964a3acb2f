"""Tensors and the operations that define them: placeholders and computes (with reductions)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .expr import Expr, ExprLike, IterVar, Var, as_expr, check_dtype, children, const


@dataclass(frozen=True, eq=False)
class Reducer:
    """A commutative reducer: ``combine(lhs, rhs)`` as an expression template and its identity."""

    name: str
    lhs: Var
    rhs: Var
    combined: Expr
    identity: Any  # Python number, for the reducer's dtype

    def identity_const(self) -> Expr:
        return const(self.identity, self.lhs.dtype)


@dataclass(frozen=True, eq=False)
class Reduce(Expr):
    """A reduction of ``source`` over ``axes``; only allowed at the top of a compute's body."""

    reducer: Reducer
    source: Expr
    axes: tuple[IterVar, ...]
    condition: Expr | None
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return (self.source,) if self.condition is None else (self.source, self.condition)

    def __repr__(self) -> str:
        axes = ", ".join(a.name for a in self.axes)
        where = "" if self.condition is None else f", where={self.condition!r}"
        return f"{self.reducer.name}({self.source!r}, axis=[{axes}]{where})"


@dataclass(frozen=True, eq=False)
class TensorRead(Expr):
    tensor: Tensor
    indices: tuple[Expr, ...]
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def __repr__(self) -> str:
        return f"{self.tensor.name}[{', '.join(map(repr, self.indices))}]"


class Operation:
    name: str
    shape: tuple[int, ...]
    dtype: str

    def output(self) -> Tensor:
        return Tensor(self)

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        return ()


@dataclass(frozen=True, eq=False)
class PlaceholderOp(Operation):
    name: str
    shape: tuple[int, ...]
    dtype: str


@dataclass(frozen=True, eq=False)
class ComputeOp(Operation):
    name: str
    axis: tuple[IterVar, ...]
    body: Expr
    dtype: str
    tag: str = ""

    @property
    def shape(self) -> tuple[int, ...]:  # type: ignore[override]
        return tuple(a.extent for a in self.axis)

    @property
    def reduce_axis(self) -> tuple[IterVar, ...]:
        return self.body.axes if isinstance(self.body, Reduce) else ()

    @property
    def input_tensors(self) -> tuple[Tensor, ...]:
        found: dict[Operation, Tensor] = {}
        for e in walk(self.body):
            if isinstance(e, TensorRead) and e.tensor.op not in found:
                found[e.tensor.op] = e.tensor
        return tuple(found.values())


@dataclass(frozen=True, eq=False)
class Tensor:
    op: Operation

    @property
    def name(self) -> str:
        return self.op.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.op.shape

    @property
    def dtype(self) -> str:
        return self.op.dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: Any) -> TensorRead:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) != len(self.shape):
            raise IndexError(
                f"tensor {self.name!r} has {len(self.shape)} dimension(s) {self.shape}, "
                f"indexed with {len(indices)}"
            )
        exprs = tuple(as_expr(i, "int32") for i in indices)
        for e in exprs:
            if e.dtype not in ("int32", "int64"):
                raise TypeError(f"index {e!r} of tensor {self.name!r} must be an integer, got {e.dtype}")
        return TensorRead(self, exprs, self.dtype)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, {self.shape}, {self.dtype})"


def walk(e: Expr):
    """Every node of ``e``, parents before children."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(children(node)))


def _check_shape(shape: Any, where: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        dims = tuple(shape)
    except TypeError:
        raise TypeError(f"{where}: shape must be a tuple of positive ints, got {shape!r}") from None
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"{where}: shape must be a tuple of positive ints, got {shape!r}")
    return dims


def placeholder(shape: Sequence[int], dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor. Example: ``A = te.placeholder((M, K), "float32", name="A")``."""
    check_dtype(dtype, f"placeholder {name!r}")
    if dtype == "bool":
        raise TypeError(f"placeholder {name!r}: bool tensors are not supported; use int32")
    return Tensor(PlaceholderOp(name, _check_shape(shape, f"placeholder {name!r}"), dtype))


def reduce_axis(dom: Any, name: str = "k") -> IterVar:
    """A reduction axis over ``range(begin, end)``; ``begin`` must be 0 (shift the index instead)."""
    if isinstance(dom, int):
        dom = (0, dom)
    try:
        begin, end = dom
    except (TypeError, ValueError):
        raise TypeError(f"reduce_axis {name!r}: expected (0, extent), got {dom!r}") from None
    if begin != 0 or not isinstance(end, int) or end <= 0:
        raise ValueError(f"reduce_axis {name!r}: expected (0, extent) with extent > 0, got {dom!r}")
    return IterVar(name, "int32", end, "reduce")


def _param_names(fcompute: Callable[..., Any], ndim: int, name: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):
        params = []
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(ndim)]
    if len(params) != ndim:
        raise TypeError(
            f"compute {name!r}: shape has {ndim} dimension(s) but the lambda takes {len(params)} argument(s)"
        )
    return [p.name for p in params]


def compute(
    shape: Sequence[int], fcompute: Callable[..., ExprLike], name: str = "compute", tag: str = ""
) -> Tensor:
    """A tensor defined elementwise by ``fcompute(*indices)``.

    Example: ``C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")``.
    """
    dims = _check_shape(shape, f"compute {name!r}")
    names = _param_names(fcompute, len(dims), name)
    axis = tuple(IterVar(n, "int32", d, "spatial") for n, d in zip(names, dims, strict=True))
    body = as_expr(fcompute(*axis))
    if body.dtype == "bool":
        raise TypeError(f"compute {name!r}: body is a condition; wrap it in te.if_then_else or te.cast")
    for node in walk(body):
        if isinstance(node, Reduce) and node is not body:
            raise ValueError(
                f"compute {name!r}: a reduction must be the whole body (as in TVM); "
                f"compute {node!r} in its own te.compute"
            )
    if isinstance(body, Reduce):
        seen = set(names)
        for ax in body.axes:
            if ax.name in seen:
                raise ValueError(f"compute {name!r}: axis name {ax.name!r} is used twice")
            seen.add(ax.name)
    # An axis of another compute (or a reduce axis missing from axis=) has no loop here.
    bound = {id(a) for a in (*axis, *(body.axes if isinstance(body, Reduce) else ()))}
    for node in walk(body):
        if isinstance(node, Var) and id(node) not in bound:
            raise ValueError(
                f"compute {name!r}: uses variable {node.name!r}, which is neither one of its axes "
                "nor reduced by it (pass reduce axes in axis=)"
            )
    return Tensor(ComputeOp(name, axis, body, body.dtype, tag))


def comm_reducer(
    fcombine: Callable[[Expr, Expr], ExprLike], fidentity: Callable[[str], Any], name: str = "reduce"
) -> Callable[..., Expr]:
    """A custom commutative reducer, e.g. ``comm_reducer(lambda x, y: x * y, lambda t: 1, "prod")``.

    The result is called like ``te.sum``: ``prod(expr, axis=k, where=cond)``.
    """

    def reduce(expr: ExprLike, axis: IterVar | Sequence[IterVar], where: ExprLike | None = None) -> Expr:
        source = as_expr(expr)
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"te.{name}: axis is empty")
        for ax in axes:
            if not isinstance(ax, IterVar) or ax.kind != "reduce":
                raise TypeError(f"te.{name}: axis must be made by te.reduce_axis, got {ax!r}")
        lhs, rhs = Var("lhs", source.dtype), Var("rhs", source.dtype)
        combined = as_expr(fcombine(lhs, rhs), source.dtype)
        if combined.dtype != source.dtype:
            raise TypeError(f"te.{name}: combine gives {combined.dtype}, source is {source.dtype}")
        reducer = Reducer(name, lhs, rhs, combined, fidentity(source.dtype))
        cond = None if where is None else as_expr(where)
        if cond is not None and cond.dtype != "bool":
            raise TypeError(f"te.{name}: where= must be a condition, got {cond!r}")
        return Reduce(reducer, source, axes, cond, source.dtype)

    reduce.__name__ = name
    return reduce
