"""Checks that a PrimFunc is well formed; run between passes when ``AUTOSCHED_VERIFY=1``."""

from __future__ import annotations

from ..errors import LowerError
from ..te.expr import Expr, Var
from ..te.tensor import Reduce, TensorRead, walk
from .ir import FOR_KINDS, Allocate, Barrier, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store


def verify(f: PrimFunc, after: str = "") -> PrimFunc:
    """Raise :class:`LowerError` naming the first ill-formed node; return ``f`` unchanged."""
    where = f" after pass {after!r}" if after else ""

    def fail(msg: str) -> None:
        raise LowerError(f"loop IR of {f.name!r} is ill-formed{where}: {msg}")

    def check_expr(e: Expr, bound: set[int], bufs: set[int]) -> None:
        for n in walk(e):
            if isinstance(n, (TensorRead, Reduce)):
                fail(f"te node {n!r} left in the loop IR")
            if isinstance(n, Var) and id(n) not in bound:
                fail(f"variable {n.name!r} used outside its loop")
            if isinstance(n, Load):
                check_access(n.buffer, n.indices, bufs)

    def check_access(buf: Buffer, idx: tuple[Expr, ...], bufs: set[int]) -> None:
        if id(buf) not in bufs:
            fail(f"buffer {buf.name!r} used outside its allocation")
        if len(idx) != len(buf.shape):
            fail(f"buffer {buf.name!r} has {len(buf.shape)} dims, accessed with {len(idx)} indices")

    def go(s: Stmt, bound: set[int], bufs: set[int]) -> None:
        if isinstance(s, For):
            if s.kind not in FOR_KINDS:
                fail(f"loop {s.var.name!r} has unknown kind {s.kind!r}")
            if s.extent <= 0:
                fail(f"loop {s.var.name!r} has extent {s.extent}")
            if id(s.var) in bound:
                fail(f"loop variable {s.var.name!r} is bound twice in one nest")
            go(s.body, bound | {id(s.var)}, bufs)
        elif isinstance(s, Seq):
            for x in s.stmts:
                go(x, bound, bufs)
        elif isinstance(s, Store):
            check_access(s.buffer, s.indices, bufs)
            for i in s.indices:
                check_expr(i, bound, bufs)
            check_expr(s.value, bound, bufs)
            if s.value.dtype != s.buffer.dtype:
                fail(f"store of {s.value.dtype} into {s.buffer.dtype} buffer {s.buffer.name!r}")
        elif isinstance(s, IfThenElse):
            check_expr(s.cond, bound, bufs)
            go(s.then, bound, bufs)
            if s.otherwise is not None:
                go(s.otherwise, bound, bufs)
        elif isinstance(s, Allocate):
            if s.buffer.scope == "global" and any(d <= 0 for d in s.buffer.shape):
                fail(f"allocation {s.buffer.name!r} has shape {s.buffer.shape}")
            go(s.body, bound, bufs | {id(s.buffer)})
        elif not isinstance(s, Barrier):
            fail(f"unknown statement {type(s).__name__}")

    go(f.body, set(), {id(b) for b in f.params})
    return f
