"""The ``auto_unroll_max_step`` pragma: unroll small serial loops inside the annotated loop."""

from __future__ import annotations

import dataclasses

from ..te.expr import Select
from ..te.tensor import walk
from .arith import coefficient, flat_index
from .ir import Allocate, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store
from .stmt_visit import walk_stmts


def _steps(s: Stmt) -> int:
    """Statements executed by one run of ``s`` (loops multiply)."""
    if isinstance(s, For):
        # A vectorized loop becomes one vector instruction per statement, not ``extent`` of them,
        # unless the codegen must go lane by lane: see _lane_by_lane.
        lanes = 1 if s.kind == "vectorized" and not _lane_by_lane(s) else s.extent
        return lanes * _steps(s.body)
    if isinstance(s, Seq):
        return sum(_steps(x) for x in s.stmts)
    if isinstance(s, IfThenElse):
        return _steps(s.then) + (0 if s.otherwise is None else _steps(s.otherwise))
    if isinstance(s, Allocate):
        return _steps(s.body)
    return 1


def _lane_by_lane(loop: For) -> bool:
    """Whether the body of a vectorized loop may be emitted one lane at a time: it holds a condition
    (padding along the vector axis) or an access that is neither contiguous nor uniform along it
    (a gather: ``W[j, k]`` for vector ``j``). LLVM took 30-50 s on 500 unrolled copies of such
    bodies; counting their lanes keeps them rolled."""
    for x in walk_stmts(loop.body):
        if isinstance(x, IfThenElse):
            return True
        if isinstance(x, Store):
            if any(isinstance(n, Select) for n in walk(x.value)):
                return True
            accesses = [(x.buffer, x.indices)] + [
                (n.buffer, n.indices) for n in walk(x.value) if isinstance(n, Load)
            ]
            if any(coefficient(flat_index(b.shape, idx), loop.var) not in (0, 1) for b, idx in accesses):
                return True
    return False


def _unroll_within(s: Stmt, max_step: int) -> Stmt:
    if isinstance(s, For):
        body = _unroll_within(s.body, max_step)
        kind = s.kind
        rolled = ("rolled", 1) in s.annotations  # unswitch_guards's border copies: rarely run
        if kind == "serial" and not rolled and s.extent * _steps(body) <= max_step:
            kind = "unrolled"
        return dataclasses.replace(s, body=body, kind=kind)
    if isinstance(s, Seq):
        return Seq(tuple(_unroll_within(x, max_step) for x in s.stmts))
    if isinstance(s, IfThenElse):
        other = None if s.otherwise is None else _unroll_within(s.otherwise, max_step)
        return dataclasses.replace(s, then=_unroll_within(s.then, max_step), otherwise=other)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _unroll_within(s.body, max_step))
    return s


def _visit(s: Stmt) -> Stmt:
    if isinstance(s, For):
        step = dict(s.annotations).get("auto_unroll_max_step")
        if step:
            return dataclasses.replace(s, body=_unroll_within(s.body, step))
        return dataclasses.replace(s, body=_visit(s.body))
    if isinstance(s, Seq):
        return Seq(tuple(_visit(x) for x in s.stmts))
    if isinstance(s, IfThenElse):
        other = None if s.otherwise is None else _visit(s.otherwise)
        return dataclasses.replace(s, then=_visit(s.then), otherwise=other)
    if isinstance(s, Allocate):
        return Allocate(s.buffer, _visit(s.body))
    return s


def auto_unroll(f: PrimFunc) -> PrimFunc:
    """Mark serial loops unrolled where they run at most ``auto_unroll_max_step`` statements."""
    return dataclasses.replace(f, body=_visit(f.body))
