"""Split vectorized loops whose body tests the vector axis into a guarded vector part and a fallback.

Padding along the vector axis (a stencil's borders, a padded conv's input read along the output
width) puts a condition on the vector variable ``v`` into the body: ``select(x*2 + v - 1 >= 0,
X[x*2 + v - 1], 0)``. A body whose lanes disagree on a condition that guards a load cannot run as
one vector body, so codegen would emit it lane by lane, everywhere. This pass rewrites::

    for v in range(L):  # vectorized
        body(cond(v))

into::

    if cond(0) and cond(L - 1):           # every lane agrees: the condition holds for all of them
        for v in range(L):  # vectorized
            body(True)                    # no condition on v left: one vector body
    else:
        for v in range(L):  # vectorized
            body(cond(v))                 # the border vectors: the original loop, lane by lane

A conjunct ``a < b`` (``<=``, ``>``, ``>=``) with ``a - b`` affine in ``v`` is monotone in ``v``, so it
holds on every lane exactly when it holds on the first and the last: two scalar checks per vector.
This is the index-set splitting of TVM's LoopPartition and Halide's boundary splitting, decided at
run time instead of by solving bounds, because the loops around a vector loop are often fused
(``i.j.fused // 8``) and their ranges cannot be solved for in closed form; a guard tested once per
vector costs two compares against a body of vector loads. Conjuncts that do not depend on ``v`` stay
in the body: they are the same on every lane. The guard is hoisted out of the serial and unrolled
loops around it that do not change it, so a window loop tests it once, not once per tap.
"""

from __future__ import annotations

import dataclasses

from ..te.expr import Binary, Compare, Const, Expr, Logical, Select, Var, is_int
from ..te.tensor import walk
from ..te.visit import rewrite, substitute
from .arith import affine_of, coefficient, skey
from .ir import Allocate, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from .simplify import Simplifier, simplify, simplify_expr
from .stmt_visit import map_stmt, walk_stmts

MONOTONE = ("<", "<=", ">", ">=")
TRUE = Const(True, "bool")


def conjuncts(cond: Expr) -> list[Expr]:
    """The terms of ``a and b and ...``."""
    if isinstance(cond, Logical) and cond.op == "and":
        return conjuncts(cond.a) + conjuncts(cond.b)
    return [cond]


def all_of(terms: list[Expr]) -> Expr:
    """``a and b and ...`` of ``terms`` (true when there are none): :func:`conjuncts` undone."""
    out = terms[0] if terms else TRUE
    for t in terms[1:]:
        out = Logical("and", out, t)
    return out


def _depends(e: Expr, var: Var) -> bool:
    return any(n is var for n in walk(e))


def _safe_to_hoist(e: Expr) -> bool:
    """Evaluating ``e`` eagerly cannot fault: no load, no division by something that may be zero."""
    for n in walk(e):
        if isinstance(n, Load):
            return False
        if isinstance(n, Binary) and n.op in ("//", "%") and not (isinstance(n.b, Const) and n.b.value):
            return False
    return True


def _monotone_in(c: Expr, var: Var) -> bool:
    """``c`` compares integers whose difference is affine in ``var``: true on an interval of lanes."""
    if not (isinstance(c, Compare) and c.op in MONOTONE and is_int(c.a.dtype) and is_int(c.b.dtype)):
        return False
    return coefficient(affine_of(c.a) - affine_of(c.b), var) is not None and _safe_to_hoist(c)


def _key(c: Expr) -> tuple:
    assert isinstance(c, Compare)
    return (c.op, skey(c.a), skey(c.b))


def _conditions(body: Stmt) -> list[Expr]:
    """Every condition in ``body``: of its selects and of its if statements."""
    found: list[Expr] = []
    for s in walk_stmts(body):
        if isinstance(s, IfThenElse):
            found.append(s.cond)
        exprs = (
            (*s.indices, s.value) if isinstance(s, Store) else (s.cond,) if isinstance(s, IfThenElse) else ()
        )
        for e in exprs:
            found.extend(n.cond for n in walk(e) if isinstance(n, Select))
    return found


def _only_on(c: Expr, var: Var) -> bool:
    """``c`` compares ``var`` with constants only: its truth is known on each lane at compile time."""
    return _monotone_in(c, var) and all(n is var or not isinstance(n, Var) for n in walk(c))


def _drop_conditions(body: Stmt, var: Var, which) -> Stmt:
    """``body`` with the conjuncts ``c`` of its conditions for which ``which(c, var)`` taken as true."""

    def drop(cond: Expr) -> Expr:
        return all_of([c for c in conjuncts(cond) if not which(c, var)])

    def no_var_conditions(e: Expr) -> Expr | None:
        if isinstance(e, Select) and any(which(c, var) for c in conjuncts(e.cond)):
            t, f = rewrite(e.t, no_var_conditions), rewrite(e.f, no_var_conditions)
            return Select(drop(e.cond), t, f, e.dtype)
        return None

    def rebuild(s: Stmt) -> Stmt:
        if isinstance(s, IfThenElse) and any(which(c, var) for c in conjuncts(s.cond)):
            return IfThenElse(drop(s.cond), s.then, s.otherwise)
        return s

    return map_stmt(body, rebuild, lambda e: rewrite(e, no_var_conditions))


def _split_loop(loop: For) -> tuple[Expr, For] | None:
    """``(guard, unconditional loop)`` for a vectorized loop with conditions on its variable, or None
    when it has none or one of them is not a conjunction of monotone comparisons."""
    var = loop.var
    if any(isinstance(s, (For, Allocate)) for s in walk_stmts(loop.body)):
        return None  # codegen vectorizes flat bodies only
    on_var: dict[tuple, Expr] = {}
    for cond in _conditions(loop.body):
        for c in conjuncts(cond):
            if not _depends(c, var):
                continue
            if not _monotone_in(c, var):
                return None
            on_var.setdefault(_key(c), c)
    if not on_var:
        return None
    ends = [substitute(c, {var: Const(k, var.dtype)}) for c in on_var.values() for k in (0, loop.extent - 1)]
    guard = all_of(ends)

    def drop(cond: Expr) -> Expr:
        return all_of([c for c in conjuncts(cond) if not _depends(c, var)])

    def no_var_conditions(e: Expr) -> Expr | None:
        if isinstance(e, Select) and _depends(e.cond, var):
            return Select(
                drop(e.cond), rewrite(e.t, no_var_conditions), rewrite(e.f, no_var_conditions), e.dtype
            )
        return None

    def rebuild(s: Stmt) -> Stmt:
        if isinstance(s, IfThenElse) and _depends(s.cond, var):
            return IfThenElse(drop(s.cond), s.then, s.otherwise)
        return s

    body = map_stmt(loop.body, rebuild, lambda e: rewrite(e, no_var_conditions))
    main = Simplifier().stmt(dataclasses.replace(loop, body=body))  # select(True, t, f) -> t
    if not isinstance(main, For):
        return None
    return simplify_expr(guard), main


def _lanes_where(conds: list[Expr], loop: For) -> tuple[int, int] | None:
    """The lanes ``[lo, hi)`` of ``loop`` on which every condition of ``conds`` holds, where each is
    a constant on every lane; None when one is not."""
    var, ok = loop.var, []
    for k in range(loop.extent):
        truths = [simplify_expr(substitute(c, {var: Const(k, var.dtype)})) for c in conds]
        if not all(isinstance(t, Const) for t in truths):
            return None
        ok.append(all(bool(t.value) for t in truths))  # type: ignore[attr-defined]
    if True not in ok:
        return None
    lo = ok.index(True)
    hi = lo + ok[lo:].index(False) if False in ok[lo:] else loop.extent
    return (lo, hi) if all(ok[lo:hi]) and not any(ok[hi:]) else None


def _lanes(loop: For, lo: int, hi: int) -> For:
    """``loop`` over its lanes ``[lo, hi)`` only."""
    var = loop.var
    shifted = map_stmt(loop.body, lambda s: s, lambda e: substitute(e, {var: var + lo}) if lo else e)
    return dataclasses.replace(loop, extent=hi - lo, body=shifted)


def _peel(loop: For) -> Stmt:
    """Lanes where the conditions on ``var`` alone hold for certain (``j >= 1 and j < 47`` of a row of
    48) run as their own loop, between the lanes before and after them (as they were)."""
    var = loop.var
    fixed = [c for cond in _conditions(loop.body) for c in conjuncts(cond) if _only_on(c, var)]
    lanes = _lanes_where(fixed, loop) if fixed else None
    if lanes is None or lanes == (0, loop.extent):
        return loop
    lo, hi = lanes
    main = _lanes(loop, lo, hi)
    middle = Simplifier().stmt(dataclasses.replace(main, body=_drop_conditions(main.body, var, _only_on)))
    assert middle is not None
    parts = [
        _lanes(loop, 0, lo) if lo else None,
        middle,
        _lanes(loop, hi, loop.extent) if hi < loop.extent else None,
    ]
    return Seq(tuple(p for p in parts if p is not None))


def partition_vector_loops(f: PrimFunc) -> PrimFunc:
    """Vectorized loops with conditions on their lanes become a guarded vector loop plus the original.

    Example: ``for j in range(16): B[j] = select(x*16 + j >= 1, A[x*16 + j - 1], 0)`` becomes
    ``if x*16 >= 1 and x*16 + 15 >= 1: <the loop with B[j] = A[x*16 + j - 1]> else: <the original>``.
    """
    guards: dict[int, IfThenElse] = {}  # the IfThenElse nodes this pass made (kept alive: ids stay unique)

    def guarded(s: For) -> Stmt:
        split = _split_loop(s)
        if split is None:
            return s
        out = IfThenElse(split[0], split[1], s)
        guards[id(out)] = out
        return out

    def visit(s: Stmt) -> Stmt:
        if isinstance(s, For) and s.kind == "vectorized" and s.extent > 1:
            peeled = _peel(s)
            if isinstance(peeled, Seq):
                return Seq(tuple(guarded(x) if x.extent > 1 else x for x in peeled.stmts))  # type: ignore[attr-defined,arg-type]
            return guarded(s)
        inner = guards.get(id(s.body)) if isinstance(s, For) and s.kind in ("serial", "unrolled") else None
        if inner is not None and isinstance(s, For) and not _depends(inner.cond, s.var):
            assert isinstance(s, For) and inner.otherwise is not None
            then, other = (dataclasses.replace(s, body=b) for b in (inner.then, inner.otherwise))
            out = IfThenElse(inner.cond, then, other)
            guards[id(out)] = out
            return out
        return s

    # The guards hold constants the loop ranges decide (``62 + rx >= 1``): fold them.
    return simplify(dataclasses.replace(f, body=map_stmt(f.body, visit, lambda e: e)))
