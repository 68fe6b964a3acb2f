"""Give the tiles of a split that does not divide its axis a copy without the bounds tests.

A tile size that does not divide the axis (6 rows of a 1024-row matmul: 170 full tiles and a tail of
4 rows) leaves the tiles' bounds test in the innermost statement, inside the register tile::

    for io in range(171):
        for k in range(1024):
            for ii in range(6):  # unrolled
                if io*6 + ii < 1024:
                    acc[ii, :] += A[io*6 + ii, k] * B[k, :]

The test on each row keeps the accumulators in memory and the FMAs from being scheduled together
(a 6x64 tile ran at 50 GFLOP/s against 123 for 4x64 without it). This pass versions the body of the
tile loop: when the test holds for every iteration of the loops inside it, which for a test affine
in those loops is one test at their extreme values, the body runs with the tests taken as true::

    for io in range(171):
        if io*6 + 5 < 1024:                    # the whole tile is in bounds: 170 of 171 times
            body without the tests
        else:
            body as it was                     # the tail tile, each row tested

TVM's LoopPartition and Halide's tail strategies make the same split; here it is decided at run
time, once per tile, which costs one compare. Only ``if`` statements without an ``else`` are versioned
(the bounds tests that splits produce); a select's condition is padding, for ``unswitch_guards`` and
``partition_vector_loops``.
"""

from __future__ import annotations

import dataclasses

from ..te.expr import Compare, Const, Expr, Var, is_int
from ..te.tensor import walk
from ..te.visit import substitute
from .arith import affine_of, coefficient
from .ir import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt
from .partition import MONOTONE, _depends, _safe_to_hoist, all_of, conjuncts
from .simplify import simplify_expr
from .stmt_visit import map_stmt, walk_stmts

_LOOP_KINDS = ("serial", "parallel")  # loops whose body is versioned; inner loops may be any kind


def _inner_extents(loop: For) -> dict[int, tuple[Var, int]]:
    """The variables of the loops inside ``loop``, with their extents."""
    return {id(s.var): (s.var, s.extent) for s in walk_stmts(loop.body) if isinstance(s, For)}


def _worst_case(c: Expr, loop: For, inner: dict[int, tuple[Var, int]]) -> Expr | None:
    """``c`` at the iteration of the inner loops where it is hardest to satisfy, so that it holds
    on all of them when that holds; None when ``c`` is not a test this pass versions on ``loop``.

    ``c`` must compare integers, depend on ``loop``'s variable (in any way: it is fixed in the body)
    and be affine in each inner loop variable it uses, whose extreme then sits at 0 or extent - 1.
    """
    if not (isinstance(c, Compare) and c.op in MONOTONE and is_int(c.a.dtype) and is_int(c.b.dtype)):
        return None
    if not _depends(c, loop.var) or not _safe_to_hoist(c):
        return None
    diff = affine_of(c.a) - affine_of(c.b)  # the test bounds diff from above for "<", "<="
    extremes: dict[int, Expr] = {}
    for n in walk(c):
        if isinstance(n, Var) and id(n) in inner and id(n) not in extremes:
            var, extent = inner[id(n)]
            coef = coefficient(diff, var)
            if coef is None:
                return None
            harder_when_larger = (coef > 0) == (c.op in ("<", "<="))
            extremes[id(n)] = Const(extent - 1 if harder_when_larger else 0, var.dtype)
    return substitute(c, {inner[k][0]: v for k, v in extremes.items()})


def _split(loop: For) -> tuple[Expr, Stmt] | None:
    """(the guard, ``loop``'s body without the tests it implies), or None when there is nothing to
    version: no such test, or a guard that folds to a constant."""
    inner = _inner_extents(loop)
    hoisted: dict[int, Expr] = {}  # id of a test -> its worst case
    for s in walk_stmts(loop.body):
        if isinstance(s, IfThenElse) and s.otherwise is None:
            for c in conjuncts(s.cond):
                worst = _worst_case(c, loop, inner)
                if worst is not None:
                    hoisted[id(c)] = worst
    if not hoisted:
        return None
    guard = simplify_expr(all_of(list({repr(w): w for w in hoisted.values()}.values())))
    if isinstance(guard, Const):
        return None

    def without_tests(s: Stmt) -> Stmt:
        if isinstance(s, IfThenElse) and s.otherwise is None:
            tests = conjuncts(s.cond)
            kept = [c for c in tests if id(c) not in hoisted]
            if len(kept) < len(tests):
                return IfThenElse(all_of(kept), s.then) if kept else s.then
        return s

    return guard, map_stmt(loop.body, without_tests, lambda e: e)


def version_tail_tiles(f: PrimFunc) -> PrimFunc:
    """Version every tile loop whose body tests bounds that hold on all but its tail tiles. A GPU
    kernel (loops bound to threads) is left as it is: each thread tests its own element."""
    stmts = list(walk_stmts(f.body))
    if any(isinstance(s, For) and s.thread_tag for s in stmts):
        return f
    if not any(isinstance(s, IfThenElse) and s.otherwise is None for s in stmts):
        return f  # tiles that divide their axes (most candidates): nothing to version, no walk per loop

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, For):
            split = _split(s) if s.kind in _LOOP_KINDS else None
            if split is None:
                return dataclasses.replace(s, body=visit(s.body))
            guard, fast = split  # the tail copy keeps its tests and is not versioned again
            return dataclasses.replace(s, body=IfThenElse(guard, visit(fast), s.body, likely=True))
        if isinstance(s, Seq):
            return Seq(tuple(visit(x) for x in s.stmts))
        if isinstance(s, Allocate):
            return Allocate(s.buffer, visit(s.body))
        if isinstance(s, IfThenElse):
            other = None if s.otherwise is None else visit(s.otherwise)
            return dataclasses.replace(s, then=visit(s.then), otherwise=other)
        return s

    return dataclasses.replace(f, body=visit(f.body))
