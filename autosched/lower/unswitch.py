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
                                                   # no else: a border tap would add
                                                   #   0 * W (the padding's zero)

A conjunct of a select's condition is hoisted to just inside the innermost loop it depends on, when
it depends on no loop inside that one and evaluating it early cannot fault (no load, no division by
a variable). The conjuncts hoisted at one loop form one guard, so each loop level at most doubles
its body: the fast copy with them taken as true, and the border copy, where a select that tests all
of them is its other value (the padding's zero: no load, no branch) and any other select stays.
An update of the border copy that adds a product with a literal 0 factor is dropped, as a
convolution library skips a padded tap; a padding of another value keeps its taps.
"""

from __future__ import annotations

import dataclasses

from ..te.expr import Binary, Compare, Const, Expr, Select, Var, is_float
from ..te.tensor import walk
from ..te.visit import rewrite, substitute
from .arith import skey
from .ir import Allocate, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from .partition import _depends, _monotone_in, _safe_to_hoist, all_of, conjuncts
from .simplify import Simplifier, simplify_expr
from .stmt_visit import map_stmt, walk_stmts

KINDS = ("serial", "unrolled", "parallel")  # vectorized loops: partition_vector_loops tests lanes
ROLLED = ("rolled", 1)  # a loop annotation auto_unroll leaves alone
UNSWITCH_ROWS = ("unswitch_rows", 1)  # the sketch's pragma: lift the tests out of the row loops too
LIFT_TRIPS = 32  # a register tile's row loops run fewer iterations than there are registers
_EMPTY = Seq(())  # a statement the Simplifier removes


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
        return all_of([c for c in conjuncts(cond) if _key(c) not in keys])

    def visit(e: Expr) -> Expr | None:
        if not isinstance(e, Select):
            return None
        if holds:
            return Select(drop(e.cond), rewrite(e.t, visit), rewrite(e.f, visit), e.dtype)
        if keys <= {_key(c) for c in conjuncts(e.cond)}:
            return rewrite(e.f, visit)
        return Select(e.cond, rewrite(e.t, visit), rewrite(e.f, visit), e.dtype)

    return map_stmt(body, lambda s: s, lambda e: rewrite(e, visit))


def _trips(s: Stmt) -> int:
    """Iterations of the serial loops in ``s`` (the most of either branch); vector loops count once."""
    if isinstance(s, For):
        return (1 if s.kind == "vectorized" else s.extent) * _trips(s.body)
    if isinstance(s, IfThenElse):
        return max(_trips(s.then), _trips(s.otherwise) if s.otherwise is not None else 1)
    if isinstance(s, Seq):
        return max((_trips(x) for x in s.stmts), default=1)
    return 1


def _under_pragma(s: Stmt, on: bool = False) -> set[int]:
    """Ids of the variables of the loops inside (or being) a loop with pragma ``unswitch_rows``."""
    out: set[int] = set()
    if isinstance(s, For):
        on = on or UNSWITCH_ROWS in s.annotations
        if on:
            out.add(id(s.var))
    kids = (s.body,) if isinstance(s, (For, Allocate)) else s.stmts if isinstance(s, Seq) else ()
    if isinstance(s, IfThenElse):
        kids = (s.then,) if s.otherwise is None else (s.then, s.otherwise)
    for k in kids:
        out |= _under_pragma(k, on)
    return out


def _lift(loop: For, made: dict[int, IfThenElse]) -> Stmt:
    """A guard this pass made as ``loop``'s whole body, moved outside it: as is when ``loop`` does not
    change it; when its tests are monotone in the loop's variable and the loop is a register tile's
    row loop (at most LIFT_TRIPS iterations inside), as the test that they hold on its first and last
    iteration, with the original loop, rolled, as the fallback: a tile of several rows then runs its
    taps without a test per row (a 2-row tile with one test per row ran at 0.55x), and a tile that
    touches the border takes the fallback."""
    g = made.get(id(loop.body))
    if g is None:
        return loop
    var = loop.var
    if not _depends(g.cond, var):
        border = None if g.otherwise is None else dataclasses.replace(loop, body=g.otherwise)
        return IfThenElse(g.cond, dataclasses.replace(loop, body=g.then), border)
    parts = conjuncts(g.cond)
    if _trips(loop) > LIFT_TRIPS or not all(_monotone_in(c, var) or not _depends(c, var) for c in parts):
        return loop
    ends = [substitute(c, {var: Const(k, var.dtype)}) for c in parts for k in sorted({0, loop.extent - 1})]
    fallback = loop
    return IfThenElse(simplify_expr(all_of(ends)), dataclasses.replace(loop, body=g.then), fallback)


def _is_zero_product(e: Expr) -> bool:
    """``e`` is a float product with a literal 0 factor: a padded tap's ``0 * W[...]``."""
    if isinstance(e, Const):
        return is_float(e.dtype) and e.value == 0
    return isinstance(e, Binary) and e.op == "*" and (_is_zero_product(e.a) or _is_zero_product(e.b))


def _adds_nothing(s: Stmt) -> bool:
    """``acc = acc + 0 * W[...]``: a border tap's update, once its select became the padding's zero."""
    if not isinstance(s, Store) or not is_float(s.buffer.dtype) or not _accumulates(s):
        return False
    v = s.value
    return isinstance(v, Binary) and v.op == "+" and (_is_zero_product(v.a) or _is_zero_product(v.b))


def _drop_zero_taps(s: Stmt) -> Stmt | None:
    """The border copy without the updates that add a padded tap's ``0 * W``, as convolution libraries
    skip those taps: kept, LLVM merged the border and the fast copy's multiplies into one add behind
    a phi, and the fast copy's FMAs split into a multiply and an add (half the FMA rate). Only a weight
    that is inf or NaN (0 * inf is NaN) or an accumulator at -0.0 sees the difference."""
    return Simplifier().stmt(map_stmt(s, lambda x: _EMPTY if _adds_nothing(x) else x, lambda e: e))


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

    made: dict[int, IfThenElse] = {}  # the guards this pass made (kept alive: ids stay unique)
    rows = _under_pragma(f.body)

    def visit(s: Stmt) -> Stmt:
        if not isinstance(s, For) or s.kind not in KINDS:
            return s
        hoisted = _hoistable(s)
        if hoisted:
            keys = {_key(c) for c in hoisted}
            fast = Simplifier().stmt(_assume(s.body, keys, True))  # select(True, t, f) -> t
            border = Simplifier().stmt(_assume(s.body, keys, False))
            if border is not None:
                border = _drop_zero_taps(border)
            if fast is not None:
                rolled = None if border is None else map_stmt(border, _rolled, lambda e: e)
                guard = IfThenElse(simplify_expr(all_of(hoisted)), fast, rolled)
                made[id(guard)] = guard
                s = dataclasses.replace(s, body=guard)
        lifted = _lift(s, made) if id(s.var) in rows else s
        if isinstance(lifted, IfThenElse):
            made[id(lifted)] = lifted
        return lifted

    if any(isinstance(s, For) and s.kind == "thread_binding" for s in walk_stmts(f.body)):
        return f  # a GPU kernel: its barriers (inserted later) must not end up under a condition
    return dataclasses.replace(f, body=map_stmt(f.body, visit, lambda e: e))
