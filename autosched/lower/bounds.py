"""Every tensor read of a te program proven in bounds, or a LowerError that names it.

A compute's body is checked once, before any schedule touches it: each read's indices are bounded
by interval arithmetic over the axis ranges, under the facts that guard the read (the condition of
an enclosing ``te.if_then_else`` on the branch taken, a reduction's ``where=``). A fact such as
``i - 1 >= 0`` bounds every sub-expression with the same variable part (``i - 1``, ``i + 2``), so
padding, concatenation and dilated convolutions prove without special cases. Indices read from
tensors are unbounded unless clipped (``te.max(te.min(idx[i], n - 1), 0)``, as topi's take does).

A read that the facts cannot prove is refused only when every fact guarding it was understood:
a guard the analysis cannot read (``X[i] > 0``, ``te.any``) may be what keeps it in range, and a
legal program is never refused.

Example: ``check_bounds([B])`` with ``B[i] = A[i + 1]`` over the whole of ``A`` raises
``LowerError: compute 'B' reads A[i + 1] out of bounds ...``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import LowerError
from ..te.expr import Binary, Cast, Compare, Const, Expr, IterVar, Logical, Not, Select, children, is_int
from ..te.graph import topo_order
from ..te.tensor import ComputeOp, Operation, Reduce, Tensor, TensorRead
from .arith import affine_of, skey

Range = tuple[float, float]  # inclusive; +-inf where unbounded
_ANY: Range = (-math.inf, math.inf)
_NEGATE = {"<": ">=", "<=": ">", ">": "<=", ">=": "<", "==": "!=", "!=": "=="}

_checked: weakref.WeakSet[Operation] = weakref.WeakSet()  # computes already proven (programs are immutable)


@dataclass(frozen=True)
class _Facts:
    """What holds where a read runs: ranges of variable parts of affine forms, and whether every
    guard on the way was understood."""

    ranges: tuple[tuple[frozenset, Range], ...] = ()
    understood: bool = True
    guarded: bool = False

    def lookup(self, form: frozenset) -> Range:
        lo, hi = _ANY
        for f, (a, b) in self.ranges:
            if f == form:
                lo, hi = max(lo, a), min(hi, b)
        return lo, hi

    def assume(self, cond: Expr, holds: bool) -> _Facts:
        """These facts and ``cond`` (``holds``) or its negation."""
        if isinstance(cond, Logical) and (cond.op == "and") == holds:
            return self.assume(cond.a, holds).assume(cond.b, holds)
        if isinstance(cond, Not):
            return self.assume(cond.a, not holds)
        added = _fact(cond, holds)
        if added is None:
            return _Facts(self.ranges, False, True)
        return _Facts((*self.ranges, added), self.understood, True)


def _terms_key(e: Expr) -> tuple[frozenset, int]:
    """The variable part of ``e``'s affine form (as a key) and its constant."""
    a = affine_of(e)
    return frozenset((_atom_key(atom), c) for _, atom, c in a.terms), a.const


def _atom_key(e: Expr) -> tuple:
    """A structural key: ``I[i]`` written twice is one atom, so a guard on one bounds the other."""
    if isinstance(e, TensorRead):
        return ("r", id(e.tensor.op), *(_atom_key(i) for i in e.indices))
    if isinstance(e, Binary):
        return ("b", e.op, _atom_key(e.a), _atom_key(e.b))
    if isinstance(e, Cast):
        return ("cast", e.dtype, _atom_key(e.value))
    return skey(e)


def _fact(cond: Expr, holds: bool) -> tuple[frozenset, Range] | None:
    """``cond`` as ``variable part in [lo, hi]``, or None when it is not an integer comparison."""
    if not isinstance(cond, Compare) or not is_int(cond.a.dtype):
        return None
    op = cond.op if holds else _NEGATE[cond.op]
    form, c = _terms_key(Binary("-", cond.a, cond.b, cond.a.dtype))  # a - b  op  0
    if not form:
        return None
    bound = {"<": (-math.inf, -1), "<=": (-math.inf, 0), ">": (1, math.inf), ">=": (0, math.inf),
             "==": (0, 0)}.get(op)  # fmt: skip
    if bound is None:  # !=
        return None
    return form, (bound[0] - c, bound[1] - c)


def value_range(e: Expr, facts: _Facts = _Facts()) -> Range:
    """Smallest and largest value an integer expression takes where ``facts`` hold."""
    lo, hi = _natural_range(e, facts)
    if isinstance(e, Const):
        return lo, hi
    form, c = _terms_key(e)
    if form:
        f_lo, f_hi = facts.lookup(form)
        lo, hi = max(lo, f_lo + c), min(hi, f_hi + c)
        neg = frozenset((k, -coef) for k, coef in form)
        n_lo, n_hi = facts.lookup(neg)  # -e + c' in [n_lo, n_hi] bounds e from the other side
        lo, hi = max(lo, c - n_hi), min(hi, c - n_lo)
    return lo, hi


def _natural_range(e: Expr, facts: _Facts) -> Range:
    if isinstance(e, Const):
        v = e.value
        return (v, v) if isinstance(v, int) else _ANY
    if isinstance(e, IterVar):
        return 0, e.extent - 1
    if isinstance(e, Cast):
        return value_range(e.value, facts) if is_int(e.value.dtype) else _ANY
    if isinstance(e, Select):
        t = value_range(e.t, facts.assume(e.cond, True))
        f = value_range(e.f, facts.assume(e.cond, False))
        return min(t[0], f[0]), max(t[1], f[1])
    if not isinstance(e, Binary) or not is_int(e.dtype):
        return _ANY  # values read from tensors, other variables
    a, b = value_range(e.a, facts), value_range(e.b, facts)
    if e.op == "+":
        return a[0] + b[0], a[1] + b[1]
    if e.op == "-":
        return a[0] - b[1], a[1] - b[0]
    if e.op == "*":
        ends = [_mul(x, y) for x in a for y in b]
        return min(ends), max(ends)
    if e.op == "min":
        return min(a[0], b[0]), min(a[1], b[1])
    if e.op == "max":
        return max(a[0], b[0]), max(a[1], b[1])
    if e.op in ("//", "%") and b[0] == b[1] and b[0] > 0 and math.isfinite(b[0]):
        c = int(b[0])
        if e.op == "//":
            return _floordiv(a[0], c), _floordiv(a[1], c)
        if math.isfinite(a[0]) and math.isfinite(a[1]) and a[0] // c == a[1] // c:
            return a[0] % c, a[1] % c
        return 0, c - 1
    return _ANY


def _mul(x: float, y: float) -> float:
    return 0 if x == 0 or y == 0 else x * y  # 0 * inf is 0 here: a zero factor stays zero


def _floordiv(x: float, c: int) -> float:
    return x if math.isinf(x) else x // c


def check_bounds(outputs: Sequence[Tensor]) -> None:
    """Raise :class:`LowerError` for the first read of a compute that may leave its tensor."""
    for op in topo_order(outputs):
        if isinstance(op, ComputeOp) and op not in _checked:
            _check_expr(op, op.body, _Facts())
            _checked.add(op)


def _check_expr(op: ComputeOp, e: Expr, facts: _Facts) -> None:
    if isinstance(e, Select):
        _check_expr(op, e.cond, facts)
        _check_expr(op, e.t, facts.assume(e.cond, True))
        _check_expr(op, e.f, facts.assume(e.cond, False))
        return
    if isinstance(e, Reduce):
        if e.condition is not None:
            _check_expr(op, e.condition, facts)
            facts = facts.assume(e.condition, True)
        _check_expr(op, e.source, facts)
        return
    if isinstance(e, TensorRead):
        for d, (ix, n) in enumerate(zip(e.indices, e.tensor.shape, strict=True)):
            _check_index(op, e, d, value_range(ix, facts), n, facts)
    for child in children(e):
        _check_expr(op, child, facts)


def _check_index(op: ComputeOp, read: TensorRead, d: int, reach: Range, n: int, facts: _Facts) -> None:
    lo, hi = reach
    if lo >= 0 and hi <= n - 1:
        return
    if facts.guarded and not facts.understood:
        return  # a guard we cannot read may be what keeps it in range
    name = read.tensor.name
    unbounded = math.isinf(lo) or math.isinf(hi)
    why = " (unbounded: e.g. a value read from a tensor)" if unbounded else ""
    fix = (
        f"clip it into range with te.max(te.min(index, {n - 1}), 0) or guard the read with te.if_then_else"
        if unbounded
        else "fix the index or guard the read with te.if_then_else"
    )
    raise LowerError(
        f"compute {op.name!r} reads {_written(read)} out of bounds: index {_strip(read.indices[d])} "
        f"(dimension {d}) reaches [{_end(lo)}, {_end(hi)}]{why}"
        f" but {name} has extent {n} (valid 0..{n - 1}); {fix}"
    )


def _end(x: float) -> str:
    return str(x) if math.isinf(x) else str(int(x))


def _strip(e: Expr) -> str:
    text = repr(e)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def _written(read: TensorRead) -> str:
    """``A[i + 1, j]``: the read as the user wrote it (without the printer's outer parentheses)."""
    return f"{read.tensor.name}[{', '.join(_strip(i) for i in read.indices)}]"
