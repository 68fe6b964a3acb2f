"""Hoist the padding tests of a window's taps out of the loops that do not change them.

A padded convolution reads ``select(y*2 + rh >= 1 and x*2 + rw >= 1, X[...], 0)`` in its innermost
statement, inside channel and register-tile loops whose variables the test does not use. Codegen
emits the select as branches and a phi around the load (the load may be out of bounds), and LLVM's
own unswitching gives up on the larger register tiles: the taps then stay a loop, their FMAs split
into a multiply and an add, and the accumulators go to memory. This pass does the unswitching on
the loop IR instead::

    for rw in range(3):                        for rw in range(3):
        for rc in range(32):                       if x*2 + rw >= 1:            # every tap inside reads
            acc += select(x*2 + rw >= 1,  ->           for rc in range(32):     #   in bounds
                       X[...], 0) * W[...]                 acc += X[...] * W[...]
                                                   else:                        # the border: reads
                                                       for rc in range(32):     #   the padding's 0
                                                           acc += 0 * W[...]

A conjunct of a select's condition is hoisted to just inside the innermost loop it depends on, when
it depends on no loop inside that one and evaluating it early cannot fault (no load, no division by
a variable). The conjuncts hoisted at one loop form one guard, so each loop level at most doubles
its body: the fast copy with them taken as true, and the border copy, where a select that tests all
of them is its other value (the padding's zero: no load, no branch) and any other select stays.
"""

from __future__ import annotations

import dataclasses

from ..te.expr import Compare, Expr, Logical, Select, Var
from ..te.tensor import walk
from ..te.visit import rewrite
from .arith import skey
from .ir import For, IfThenElse, Load, PrimFunc, Stmt, Store
from .partition import TRUE, _safe_to_hoist, conjuncts
from .simplify import Simplifier, simplify_expr
from .stmt_visit import map_stmt, walk_stmts

KINDS = ("serial", "unrolled", "parallel")  # vectorized loops: partition_vector_loops tests lanes
ROLLED = ("rolled", 1)  # a loop annotation auto_unroll leaves alone


def _accumulates(s: Store) -> bool:
    """``s`` updates a reduction: its value reads the element it writes (``acc = acc + ...``)."""
    keys = tuple(skey(i) for i in s.indices)
    return any(
        isinstance(n, Load) and n.buffer is s.buffer and tuple(skey(i) for i in n.indices) == keys
        for n in walk(s.value)
    )


def _select_conjuncts(body: Stmt) -> list[Expr]:
    """The conjuncts of every select condition in the reduction updates of ``body`` (a stencil's
    border tests are partition_vector_loops's: its elementwise stores have no taps to unswitch)."""
    found: list[Expr] = []
    for s in walk_stmts(body):
        if isinstance(s, Store) and _accumulates(s):
            for e in (*s.indices, s.value):
                found.extend(c for n in walk(e) if isinstance(n, Select) for c in conjuncts(n.cond))
    return found


def _key(c: Expr) -> tuple:
    """Structural for comparisons (each select holds its own copy of a test), else by identity."""
    if isinstance(c, Compare):
        return (c.op, skey(c.a), skey(c.b))
    return ("id", id(c))


def _hoistable(loop: For) -> list[Expr]:
    """Conjuncts of the selects in ``loop``'s body that use its variable and no loop inside it."""
    inner = {id(s.var) for s in walk_stmts(loop.body) if isinstance(s, For)}
    out: dict[tuple, Expr] = {}
    for c in _select_conjuncts(loop.body):
        used = {id(n) for n in walk(c) if isinstance(n, Var)}
        if id(loop.var) in used and not used & inner and _safe_to_hoist(c):
            out.setdefault(_key(c), c)
    return list(out.values())


def _assume(body: Stmt, keys: set[tuple], holds: bool) -> Stmt:
    """``body`` with the conjuncts whose keys are ``keys`` known to hold all (``holds``) or not all
    (then a select that tests every one of them is false: it becomes its other value)."""

    def drop(cond: Expr) -> Expr:
        kept = [c for c in conjuncts(cond) if _key(c) not in keys]
        out = kept[0] if kept else TRUE
        for c in kept[1:]:
            out = Logical("and", out, c)
        return out

    def visit(e: Expr) -> Expr | None:
        if not isinstance(e, Select):
            return None
        if holds:
            return Select(drop(e.cond), rewrite(e.t, visit), rewrite(e.f, visit), e.dtype)
        if keys <= {_key(c) for c in conjuncts(e.cond)}:
            return rewrite(e.f, visit)
        return Select(e.cond, rewrite(e.t, visit), rewrite(e.f, visit), e.dtype)

    return map_stmt(body, lambda s: s, lambda e: rewrite(e, visit))


def _rolled(s: Stmt) -> Stmt:
    """The border copy's serial loops stay loops under auto_unroll: they run for a few taps only,
    and unrolled they took LLVM seconds (a capsule conv's candidate: 0.6 s -> 5 s to compile)."""
    if isinstance(s, For) and s.kind == "serial" and ROLLED not in s.annotations:
        return dataclasses.replace(s, annotations=(*s.annotations, ROLLED))
    return s


def unswitch_guards(f: PrimFunc) -> PrimFunc:
    """Select conditions invariant in the loops around their statement become ``if`` statements
    outside those loops, with the unconditional body as the taken branch and the original as the other.

    Example: ``for rw: for rc: acc += select(x + rw >= 1, X[x + rw - 1, rc], 0)`` becomes
    ``for rw: if x + rw >= 1: (for rc: acc += X[x + rw - 1, rc]) else: (the original for rc)``.
    """

    def visit(s: Stmt) -> Stmt:
        if not isinstance(s, For) or s.kind not in KINDS:
            return s
        hoisted = _hoistable(s)
        if not hoisted:
            return s
        guard = hoisted[0]
        for c in hoisted[1:]:
            guard = Logical("and", guard, c)
        keys = {_key(c) for c in hoisted}
        fast = Simplifier().stmt(_assume(s.body, keys, True))  # select(True, t, f) -> t
        border = Simplifier().stmt(_assume(s.body, keys, False))
        border = border and map_stmt(border, _rolled, lambda e: e)
        if fast is None or border is None:
            return s
        return dataclasses.replace(s, body=IfThenElse(simplify_expr(guard), fast, border))

    if any(isinstance(s, For) and s.kind == "thread_binding" for s in walk_stmts(f.body)):
        return f  # a GPU kernel: its barriers (inserted later) must not end up under a condition
    return dataclasses.replace(f, body=map_stmt(f.body, visit, lambda e: e))
