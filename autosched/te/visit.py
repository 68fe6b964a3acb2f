"""Rebuilding expressions: substitution and bottom-up rewriting of the frozen nodes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

from .expr import Binary, Call, Cast, Compare, Expr, Logical, Not, Select, Var
from .tensor import Reduce, TensorRead


def map_children(e: Expr, f: Callable[[Expr], Expr]) -> Expr:
    """``e`` with ``f`` applied to each direct child; ``e`` itself when nothing changed."""
    if isinstance(e, (Binary, Compare, Logical)):
        a, b = f(e.a), f(e.b)
        return e if (a is e.a and b is e.b) else dataclasses.replace(e, a=a, b=b)
    if isinstance(e, Not):
        a = f(e.a)
        return e if a is e.a else dataclasses.replace(e, a=a)
    if isinstance(e, Select):
        c, t, fl = f(e.cond), f(e.t), f(e.f)
        return e if (c is e.cond and t is e.t and fl is e.f) else dataclasses.replace(e, cond=c, t=t, f=fl)
    if isinstance(e, Cast):
        v = f(e.value)
        return e if v is e.value else dataclasses.replace(e, value=v)
    if isinstance(e, Call):
        args = tuple(f(a) for a in e.args)
        return e if all(x is y for x, y in zip(args, e.args)) else dataclasses.replace(e, args=args)
    if isinstance(e, Reduce):
        src = f(e.source)
        cond = None if e.condition is None else f(e.condition)
        if src is e.source and cond is e.condition:
            return e
        return dataclasses.replace(e, source=src, condition=cond)
    if isinstance(e, TensorRead) or hasattr(e, "indices"):
        idx = tuple(f(i) for i in e.indices)  # type: ignore[attr-defined]
        if all(x is y for x, y in zip(idx, e.indices)):  # type: ignore[attr-defined]
            return e
        return dataclasses.replace(e, indices=idx)  # type: ignore[call-arg,type-var]
    return e


def rewrite(e: Expr, fn: Callable[[Expr], Expr | None]) -> Expr:
    """Replace nodes top-down: where ``fn(node)`` returns an expression it is used as is."""
    memo: dict[int, Expr] = {}

    def go(node: Expr) -> Expr:
        hit = memo.get(id(node))
        if hit is not None:
            return hit
        out = fn(node)
        if out is None:
            out = map_children(node, go)
        memo[id(node)] = out
        return out

    return go(e)


def substitute(e: Expr, mapping: Mapping[Var, Expr]) -> Expr:
    """``e`` with each variable in ``mapping`` replaced (by identity)."""
    if not mapping:
        return e
    by_id = {id(v): x for v, x in mapping.items()}
    return rewrite(e, lambda n: by_id.get(id(n)) if isinstance(n, Var) else None)
