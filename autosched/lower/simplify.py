"""Constant folding and algebraic identities on index arithmetic (``x * 1``, ``x + 0``, ...)."""

from __future__ import annotations

from ..te.expr import Binary, Const, Expr, is_int
from ..te.visit import map_children
from .ir import PrimFunc
from .stmt_visit import map_stmt_exprs


def _int(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) and is_int(e.dtype) else None


def simplify_expr(e: Expr) -> Expr:
    e = map_children(e, simplify_expr)
    if not isinstance(e, Binary) or not is_int(e.dtype):
        return e
    a, b = _int(e.a), _int(e.b)
    op = e.op
    if a is not None and b is not None:
        if op == "+":
            return Const(a + b, e.dtype)
        if op == "-":
            return Const(a - b, e.dtype)
        if op == "*":
            return Const(a * b, e.dtype)
        if op == "//" and b != 0:
            return Const(a // b, e.dtype)
        if op == "%" and b != 0:
            return Const(a % b, e.dtype)
        if op == "min":
            return Const(min(a, b), e.dtype)
        if op == "max":
            return Const(max(a, b), e.dtype)
    if op in ("+", "-") and b == 0:
        return e.a
    if op == "+" and a == 0:
        return e.b
    if op == "*" and (a == 0 or b == 0):
        return Const(0, e.dtype)
    if op == "*" and b == 1:
        return e.a
    if op == "*" and a == 1:
        return e.b
    if op in ("//",) and b == 1:
        return e.a
    if op == "%" and b == 1:
        return Const(0, e.dtype)
    return e


def simplify(f: PrimFunc) -> PrimFunc:
    """Fold constants in every expression of ``f``."""
    return map_stmt_exprs(f, simplify_expr)
