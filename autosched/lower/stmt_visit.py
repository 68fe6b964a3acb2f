"""Rebuilding statements: apply a function to every expression or loop of a PrimFunc."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from ..te.expr import Expr
from .ir import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, Store


def map_stmt(s: Stmt, f_stmt: Callable[[Stmt], Stmt], f_expr: Callable[[Expr], Expr]) -> Stmt:
    """Rebuild ``s`` bottom-up: children first, then ``f_stmt`` on the rebuilt node."""
    if isinstance(s, For):
        s = dataclasses.replace(s, body=map_stmt(s.body, f_stmt, f_expr))
    elif isinstance(s, Seq):
        s = Seq(tuple(map_stmt(x, f_stmt, f_expr) for x in s.stmts))
    elif isinstance(s, IfThenElse):
        other = None if s.otherwise is None else map_stmt(s.otherwise, f_stmt, f_expr)
        then = map_stmt(s.then, f_stmt, f_expr)
        s = dataclasses.replace(s, cond=f_expr(s.cond), then=then, otherwise=other)
    elif isinstance(s, Allocate):
        s = Allocate(s.buffer, map_stmt(s.body, f_stmt, f_expr))
    elif isinstance(s, Store):
        s = Store(s.buffer, tuple(f_expr(i) for i in s.indices), f_expr(s.value))
    return f_stmt(s)


def map_stmt_exprs(f: PrimFunc, f_expr: Callable[[Expr], Expr]) -> PrimFunc:
    return dataclasses.replace(f, body=map_stmt(f.body, lambda s: s, f_expr))


def walk_stmts(s: Stmt):
    """Every statement in ``s``, parents first."""
    yield s
    if isinstance(s, (For, Allocate)):
        yield from walk_stmts(s.body)
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from walk_stmts(x)
    elif isinstance(s, IfThenElse):
        yield from walk_stmts(s.then)
        if s.otherwise is not None:
            yield from walk_stmts(s.otherwise)
