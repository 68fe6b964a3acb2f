"""Simplification of index arithmetic with the ranges of the enclosing loops.

Besides folding constants and identities (``x * 1``, ``x + 0``), it uses what the loops tell:
with ``0 <= j < 32``, ``(x * 32 + j) // 32`` is ``x`` and ``(x * 32 + j) % 32`` is ``j`` (so a
vectorized ``j`` stays a contiguous access), and a guard that the bounds prove true disappears.
"""

from __future__ import annotations

import dataclasses

from ..te.expr import Binary, Compare, Const, Expr, Logical, Not, Select, is_int
from ..te.visit import map_children
from .arith import Affine, affine_of, const_bounds
from .ir import Allocate, For, IfThenElse, PrimFunc, Seq, Stmt, Store


def _int(e: Expr) -> int | None:
    return e.value if isinstance(e, Const) and is_int(e.dtype) else None


def _fold(op: str, a: int, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("//", "%") and b == 0:
        return None
    if op == "//":
        return a // b
    if op == "%":
        return a % b
    if op == "min":
        return min(a, b)
    if op == "max":
        return max(a, b)
    return None


class Simplifier:
    def __init__(self) -> None:
        self.extents: dict[int, int] = {}  # id(loop var) -> extent, for the loops around the node

    def bounds(self, e: Expr) -> tuple[int, int] | None:
        return const_bounds(affine_of(e), self.extents)

    def expr(self, e: Expr) -> Expr:
        e = map_children(e, self.expr)
        if isinstance(e, Binary) and is_int(e.dtype):
            return self.binary(e)
        if isinstance(e, Compare) and is_int(e.a.dtype):
            return self.compare(e)
        if isinstance(e, Logical):
            a, b = _bool(e.a), _bool(e.b)
            if e.op == "and":
                if a is False or b is False:
                    return Const(False, "bool")
                if a is True:
                    return e.b
                if b is True:
                    return e.a
            else:
                if a is True or b is True:
                    return Const(True, "bool")
                if a is False:
                    return e.b
                if b is False:
                    return e.a
        if isinstance(e, Not) and _bool(e.a) is not None:
            return Const(not _bool(e.a), "bool")
        if isinstance(e, Select) and _bool(e.cond) is not None:
            return e.t if _bool(e.cond) else e.f
        return e

    def binary(self, e: Binary) -> Expr:
        a, b, op = _int(e.a), _int(e.b), e.op
        if a is not None and b is not None:
            v = _fold(op, a, b)
            if v is not None:
                return Const(v, e.dtype)
        if (op in ("+", "-") and b == 0) or (op in ("*", "//") and b == 1):
            return e.a
        if op == "+" and a == 0:
            return e.b
        if op == "*" and a == 1:
            return e.b
        if op == "*" and (a == 0 or b == 0):
            return Const(0, e.dtype)
        if op in ("//", "%") and b is not None and b > 0:
            return self.divmod(e, b)
        return e

    def divmod(self, e: Binary, c: int) -> Expr:
        """Split the dividend into multiples of ``c`` and a rest whose bounds fix the quotient."""
        form = affine_of(e.a)
        whole = Affine(tuple(t for t in form.terms if t[2] % c == 0), 0)
        rest = Affine(tuple(t for t in form.terms if t[2] % c), form.const)
        b = const_bounds(rest, self.extents)
        if b is None or b[0] // c != b[1] // c:
            return self.divmod_low(e, c, form)
        q = b[0] // c
        if e.op == "//":
            quotient = Affine(tuple((k, a, coef // c) for k, a, coef in whole.terms), q)
            return self.expr_of(quotient, e.dtype)
        return self.expr_of(rest.shift(-q * c), e.dtype)

    def divmod_low(self, e: Binary, c: int, form: Affine) -> Expr:
        """With multiples of ``g`` (a divisor of ``c``) and a rest in ``[0, g)``: the rest never carries
        past a multiple of ``c``, so ``(x * 16 + j) // 32`` is ``(x * 16) // 32`` and ``% 32`` is
        ``(x * 16) % 32 + j`` for ``0 <= j < 16`` (a 16-lane ``j`` in a 32-wide GEMM weight panel,
        graph/gemm_layout.py, stays one contiguous load). Floor division: holds for any sign of ``x``."""
        for g in sorted((d for d in range(2, c) if c % d == 0), reverse=True):
            high = Affine(tuple(t for t in form.terms if t[2] % g == 0), 0)
            low = Affine(tuple(t for t in form.terms if t[2] % g), form.const)
            b = const_bounds(low, self.extents)
            if not high.terms or low.is_const or b is None or b[0] < 0 or b[1] >= g:
                continue
            part = self.binary(Binary(e.op, self.expr_of(high, e.dtype), Const(c, e.dtype), e.dtype))
            if e.op == "//":
                return part
            return Binary("+", part, self.expr_of(low, e.dtype), e.dtype)
        return e

    @staticmethod
    def expr_of(form: Affine, dtype: str) -> Expr:
        out = form.to_expr()
        return out if out.dtype == dtype else Const(form.const, dtype) if form.is_const else out

    def compare(self, e: Compare) -> Expr:
        ba, bb = self.bounds(e.a), self.bounds(e.b)
        if ba is None or bb is None:
            return e
        (alo, ahi), (blo, bhi) = ba, bb
        truth = {
            "<": (ahi < blo, alo >= bhi), "<=": (ahi <= blo, alo > bhi),
            ">": (alo > bhi, ahi <= blo), ">=": (alo >= bhi, ahi < blo),
            "==": (alo == ahi == blo == bhi, ahi < blo or alo > bhi),
            "!=": (ahi < blo or alo > bhi, alo == ahi == blo == bhi),
        }[e.op]  # fmt: skip
        if truth[0]:
            return Const(True, "bool")
        if truth[1]:
            return Const(False, "bool")
        return e

    def stmt(self, s: Stmt) -> Stmt | None:
        if isinstance(s, For):
            self.extents[id(s.var)] = s.extent
            body = self.stmt(s.body)
            del self.extents[id(s.var)]
            return None if body is None else dataclasses.replace(s, body=body)
        if isinstance(s, Seq):
            stmts = tuple(x for x in (self.stmt(x) for x in s.stmts) if x is not None)
            return None if not stmts else stmts[0] if len(stmts) == 1 else Seq(stmts)
        if isinstance(s, IfThenElse):
            cond = self.expr(s.cond)
            truth = _bool(cond)
            then = self.stmt(s.then)
            other = None if s.otherwise is None else self.stmt(s.otherwise)
            if truth is True:
                return then
            if truth is False:
                return other
            if then is None and other is None:
                return None
            from ..te.expr import Not as NotExpr

            if then is None:
                return IfThenElse(NotExpr(cond), other)  # type: ignore[arg-type]
            return dataclasses.replace(s, cond=cond, then=then, otherwise=other)
        if isinstance(s, Allocate):
            body = self.stmt(s.body)
            return None if body is None else Allocate(s.buffer, body)
        if isinstance(s, Store):
            return Store(s.buffer, tuple(self.expr(i) for i in s.indices), self.expr(s.value))
        return s


def _bool(e: Expr) -> bool | None:
    return bool(e.value) if isinstance(e, Const) and e.dtype == "bool" else None


def simplify_expr(e: Expr) -> Expr:
    """Fold constants and identities in ``e`` (no loop ranges known)."""
    return Simplifier().expr(e)


def simplify(f: PrimFunc) -> PrimFunc:
    """Simplify every expression of ``f`` using its loop ranges; drop guards proven true."""
    body = Simplifier().stmt(f.body)
    return dataclasses.replace(f, body=body if body is not None else Seq(()))
