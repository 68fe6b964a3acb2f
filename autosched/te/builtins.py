"""The functions of the te language: reducers, conditions, casts and math intrinsics."""

from __future__ import annotations

import functools
from typing import Any

from . import expr as E
from .tensor import comm_reducer


def _lowest(dtype: str) -> Any:
    return float("-inf") if E.is_float(dtype) else -(2 ** (31 if dtype == "int32" else 63))


def _highest(dtype: str) -> Any:
    return float("inf") if E.is_float(dtype) else 2 ** (31 if dtype == "int32" else 63) - 1


sum = comm_reducer(lambda x, y: x + y, lambda dtype: 0, name="sum")
_max_reduce = comm_reducer(lambda x, y: E.binary("max", x, y), _lowest, name="max")
_min_reduce = comm_reducer(lambda x, y: E.binary("min", x, y), _highest, name="min")


def max(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> E.Expr:
    """``te.max(x, axis=k)`` reduces; ``te.max(a, b)`` is the elementwise maximum."""
    if axis is not None:
        if b is not None:
            raise TypeError("te.max: give either two expressions or one expression and axis=")
        return _max_reduce(a, axis=axis, where=where)
    if b is None:
        raise TypeError("te.max needs two expressions, or one expression and axis=")
    return E.binary("max", a, b)


def min(a: Any, b: Any = None, axis: Any = None, where: Any = None) -> E.Expr:
    """``te.min(x, axis=k)`` reduces; ``te.min(a, b)`` is the elementwise minimum."""
    if axis is not None:
        if b is not None:
            raise TypeError("te.min: give either two expressions or one expression and axis=")
        return _min_reduce(a, axis=axis, where=where)
    if b is None:
        raise TypeError("te.min needs two expressions, or one expression and axis=")
    return E.binary("min", a, b)


def if_then_else(cond: Any, t: Any, f: Any) -> E.Expr:
    """``t`` where ``cond`` holds, else ``f``; only the taken branch is evaluated."""
    return E.select(cond, t, f)


def all(*conds: Any) -> E.Expr:
    """True when every condition holds (``te.all(i >= 0, i < n)``)."""
    if not conds:
        return E.const(True)
    return functools.reduce(lambda a, b: E.logical("and", a, b), conds)


def any(*conds: Any) -> E.Expr:
    """True when some condition holds."""
    if not conds:
        return E.const(False)
    return functools.reduce(lambda a, b: E.logical("or", a, b), conds)


def logical_not(cond: Any) -> E.Expr:
    c = E.as_expr(cond)
    if c.dtype != "bool":
        raise TypeError(f"te.logical_not takes a condition, got {c!r}")
    return E.Not(c)


def cast(dtype: str, value: Any) -> E.Expr:
    """Convert ``value`` to ``dtype`` (float to int truncates toward zero, as in C)."""
    return E.cast(dtype, value)


def const(value: Any, dtype: str | None = None) -> E.Expr:
    return E.const(value, dtype)


def exp(x: Any) -> E.Expr:
    return E.call("exp", x)


def log(x: Any) -> E.Expr:
    return E.call("log", x)


def sqrt(x: Any) -> E.Expr:
    return E.call("sqrt", x)


def rsqrt(x: Any) -> E.Expr:
    return E.call("rsqrt", x)


def tanh(x: Any) -> E.Expr:
    return E.call("tanh", x)


def sigmoid(x: Any) -> E.Expr:
    return E.call("sigmoid", x)


def erf(x: Any) -> E.Expr:
    return E.call("erf", x)


def abs(x: Any) -> E.Expr:
    return E.call("abs", x)


def pow(x: Any, y: Any) -> E.Expr:
    return E.call("pow", x, y)


def floor(x: Any) -> E.Expr:
    return E.call("floor", x)


def ceil(x: Any) -> E.Expr:
    return E.call("ceil", x)
