"""Integer interval arithmetic for bound inference.

An index expression is bounded as ``[min, min + extent)`` where ``min`` is an :class:`Affine`
combination of the loop variables that stay fixed (they enclose the point where the region is
needed) and ``extent`` is a constant (the size of the storage to allocate there). Variables that
range contribute to the extent. What cannot be bounded this way gives ``None``: the caller then
falls back to the whole dimension, which is always correct.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ..te.expr import Binary, Cast, Const, Expr, Select, Var, binary, const
from ..te.tensor import walk


def skey(e: Expr) -> tuple:
    """A structural key of an integer expression (variables by identity)."""
    if isinstance(e, Var):
        return ("v", id(e))
    if isinstance(e, Const):
        return ("c", e.value)
    if isinstance(e, Binary):
        return ("b", e.op, skey(e.a), skey(e.b))
    return ("o", id(e))


@dataclass(frozen=True)
class Affine:
    """``sum(coef * atom) + const``; atoms are variables or opaque integer expressions."""

    terms: tuple[tuple[tuple, Expr, int], ...] = ()  # (key, atom, coef), coef != 0
    const: int = 0

    @staticmethod
    def of_const(c: int) -> Affine:
        return Affine((), c)

    @staticmethod
    def of_atom(atom: Expr) -> Affine:
        if isinstance(atom, Const):
            return Affine((), int(atom.value))
        return Affine(((skey(atom), atom, 1),), 0)

    @property
    def is_const(self) -> bool:
        return not self.terms

    def __add__(self, other: Affine) -> Affine:
        acc: dict[tuple, list] = {k: [a, c] for k, a, c in self.terms}
        for k, a, c in other.terms:
            if k in acc:
                acc[k][1] += c
            else:
                acc[k] = [a, c]
        terms = tuple((k, a, c) for k, (a, c) in acc.items() if c != 0)
        return Affine(terms, self.const + other.const)

    def scale(self, c: int) -> Affine:
        if c == 0:
            return Affine()
        return Affine(tuple((k, a, coef * c) for k, a, coef in self.terms), self.const * c)

    def __sub__(self, other: Affine) -> Affine:
        return self + other.scale(-1)

    def shift(self, c: int) -> Affine:
        return Affine(self.terms, self.const + c)

    def divisible_by(self, c: int) -> bool:
        return all(coef % c == 0 for _, _, coef in self.terms)

    def to_expr(self) -> Expr:
        out: Expr | None = None
        for _, atom, coef in self.terms:
            term = atom if coef == 1 else binary("*", atom, const(coef, atom.dtype))
            out = term if out is None else binary("+", out, term)
        if out is None:
            return const(self.const, "int32")
        if self.const:
            out = binary("+", out, const(self.const, out.dtype))
        return out


@dataclass(frozen=True)
class Interval:
    min: Affine
    extent: int


def union(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return None
    delta = b.min - a.min
    if not delta.is_const:
        return None
    lo = min(0, delta.const)
    hi = max(a.extent, delta.const + b.extent)
    return Interval(a.min.shift(lo), hi - lo)


def interval(e: Expr, ranges: Mapping[int, int]) -> Interval | None:
    """Bound ``e``; ``ranges`` maps ``id(var)`` to the extent of each variable that ranges.

    Variables not in ``ranges`` are fixed symbols.
    """
    if isinstance(e, Const):
        return Interval(Affine.of_const(int(e.value)), 1) if isinstance(e.value, int) else None
    if isinstance(e, Var):
        ext = ranges.get(id(e))
        if ext is not None:
            return Interval(Affine(), ext)
        return Interval(Affine.of_atom(e), 1)
    if isinstance(e, Cast) and e.dtype in ("int32", "int64") and e.value.dtype in ("int32", "int64"):
        return interval(e.value, ranges)
    if isinstance(e, Select):
        return union(interval(e.t, ranges), interval(e.f, ranges))
    if not isinstance(e, Binary) or e.dtype not in ("int32", "int64"):
        return None
    a, b = interval(e.a, ranges), interval(e.b, ranges)
    if a is None or b is None:
        return None
    op = e.op
    if op == "+":
        return Interval(a.min + b.min, a.extent + b.extent - 1)
    if op == "-":
        return Interval(a.min - b.min.shift(b.extent - 1), a.extent + b.extent - 1)
    if op == "*":
        if b.min.is_const and b.extent == 1:
            return _scale(a, b.min.const)
        if a.min.is_const and a.extent == 1:
            return _scale(b, a.min.const)
        if a.extent == 1 and b.extent == 1:
            return Interval(Affine.of_atom(binary("*", a.min.to_expr(), b.min.to_expr())), 1)
        return None
    if op in ("//", "%"):
        if not (b.min.is_const and b.extent == 1 and b.min.const > 0):
            return None
        c = b.min.const
        if op == "//":
            if a.min.divisible_by(c):
                lo = Affine(tuple((k, t, coef // c) for k, t, coef in a.min.terms), a.min.const // c)
                hi = (a.min.const + a.extent - 1) // c
                return Interval(lo, hi - a.min.const // c + 1)
            if a.extent == 1:
                return Interval(Affine.of_atom(binary("//", a.min.to_expr(), const(c, e.dtype))), 1)
            return Interval(
                Affine.of_atom(binary("//", a.min.to_expr(), const(c, e.dtype))), (a.extent + c - 2) // c + 1
            )
        if a.min.divisible_by(c) and a.min.const % c + a.extent <= c:
            return Interval(Affine.of_const(a.min.const % c), a.extent)
        if a.extent == 1:
            return Interval(Affine.of_atom(binary("%", a.min.to_expr(), const(c, e.dtype))), 1)
        return Interval(Affine(), c)
    if op in ("min", "max"):
        return union(a, b)
    return None


def _scale(a: Interval, c: int) -> Interval:
    if c >= 0:
        return Interval(a.min.scale(c), (a.extent - 1) * c + 1)
    return Interval(a.min.shift(a.extent - 1).scale(c), (a.extent - 1) * -c + 1)


def const_bounds(e: Affine, extents: Mapping[int, int]) -> tuple[int, int] | None:
    """The smallest and largest value of ``e`` when each variable ranges over its loop extent."""
    lo = hi = e.const
    for _, atom, coef in e.terms:
        iv = interval(atom, extents)
        if iv is None or not iv.min.is_const:
            return None
        a_lo, a_hi = iv.min.const, iv.min.const + iv.extent - 1
        lo += min(coef * a_lo, coef * a_hi)
        hi += max(coef * a_lo, coef * a_hi)
    return lo, hi


def affine_of(e: Expr) -> Affine:
    """``e`` as an affine form; sub-expressions that are not affine become opaque atoms."""
    if isinstance(e, Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return Affine.of_const(e.value)
    if isinstance(e, Binary) and e.dtype in ("int32", "int64"):
        if e.op == "+":
            return affine_of(e.a) + affine_of(e.b)
        if e.op == "-":
            return affine_of(e.a) - affine_of(e.b)
        if e.op == "*":
            a, b = affine_of(e.a), affine_of(e.b)
            if b.is_const:
                return a.scale(b.const)
            if a.is_const:
                return b.scale(a.const)
    return Affine.of_atom(e)


def flat_index(shape: Sequence[int], indices: Sequence[Expr]) -> Affine:
    """The row-major flattened index of ``buffer[indices]`` for a buffer of ``shape``."""
    out, stride = Affine(), 1
    for idx, n in zip(reversed(indices), reversed(shape)):
        out = out + affine_of(idx).scale(stride)
        stride *= n
    return out


def coefficient(a: Affine, var: Var) -> int | None:
    """The coefficient of ``var`` in ``a``; None when ``var`` also hides inside an opaque term
    (``(j * j) % 50``), where ``a`` is not affine in it."""
    coef = 0
    for _, atom, c in a.terms:
        if atom is var:
            coef = c
        elif any(n is var for n in walk(atom)):
            return None
    return coef


def sub_simplified(e: Expr, m: Affine) -> Expr:
    """``e - m``, cancelling the common terms (``(x*4 + i) - x*4`` is ``i``)."""
    if m.is_const and m.const == 0:
        return e
    return (affine_of(e) - m).to_expr()
