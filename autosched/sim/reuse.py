"""Reuse analysis over the affine accesses of one store: what each loop level touches, in cache lines.

For the ``k`` innermost loops around a store, each buffer it reads or writes touches a box of elements
(the span of every index dimension over those loops, capped by the buffer's shape); the box in whole
cache lines (the last dimension rounded up to lines) is the data those loops need resident. A cache of
``C`` bytes keeps the deepest level whose boxes fit; the loops outside it bring that level's lines in
again on every iteration (Timeloop's reasoning for one level at a time, on affine indices).

Example::

    acc = accesses(store, loads, loops)        # loops outermost first
    lines = footprint_lines(acc, loops, 64)    # lines[k]: lines touched by the k innermost loops
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..lower.ir import Buffer, For, Load, Store
from ..te.expr import Binary, Cast, Const, Expr, Var

DTYPE_BYTES = {"float32": 4, "float64": 8, "int32": 4, "int64": 8, "bool": 1}


def linear(e: Expr, memo: dict[int, dict[int, float]]) -> dict[int, float]:
    """Coefficients of the loop variables in an index: ``//`` scales them down, ``%`` keeps them."""
    got = memo.get(id(e))
    if got is not None:
        return got
    out: dict[int, float]
    if isinstance(e, Var):
        out = {id(e): 1.0}
    elif isinstance(e, Binary):
        a = linear(e.a, memo)
        bc = e.b.value if isinstance(e.b, Const) else None
        if e.op in ("+", "-", "min", "max"):
            out = dict(a)
            sign = -1.0 if e.op == "-" else 1.0
            for v, c in linear(e.b, memo).items():
                out[v] = out.get(v, 0.0) + sign * c
        elif e.op == "*":
            if bc is not None:
                out = {v: c * bc for v, c in a.items()}
            elif isinstance(e.a, Const):
                out = {v: c * e.a.value for v, c in linear(e.b, memo).items()}
            else:
                out = {**a, **linear(e.b, memo)}
        elif e.op == "//" and bc:
            out = {v: c / bc for v, c in a.items()}
        else:
            out = a
    elif isinstance(e, Cast):
        out = linear(e.value, memo)
    else:
        out = {}
    memo[id(e)] = {v: c for v, c in out.items() if c}
    return memo[id(e)]


@dataclass
class Access:
    """One buffer a store touches: per index dimension, the loop variables' coefficients."""

    buffer: Buffer
    coefs: list[dict[int, float]]
    read: bool = False
    write: bool = False
    indices: list[tuple[Expr, ...]] = field(default_factory=list)

    @property
    def elem_bytes(self) -> int:
        return DTYPE_BYTES.get(self.buffer.dtype, 4)

    def depends_on(self, var_id: int) -> bool:
        return any(var_id in c for c in self.coefs)


def accesses(store: Store, loads: list[Load], memo: dict[int, dict[int, float]]) -> list[Access]:
    """The store's buffer first, then each loaded buffer once (first index pattern seen)."""
    out: dict[int, Access] = {}
    for buf, idx, is_write in [(store.buffer, store.indices, True),
                               *((ld.buffer, ld.indices, False) for ld in loads)]:  # fmt: skip
        acc = out.get(id(buf))
        if acc is None:
            acc = out[id(buf)] = Access(buf, [linear(i, memo) for i in idx])
        acc.indices.append(idx)
        acc.write |= is_write
        acc.read |= not is_write
    return list(out.values())


def footprint_lines(acc: Access, loops: list[For], line_bytes: int) -> list[float]:
    """``out[k]``: cache lines of ``acc`` touched by the ``k`` innermost of ``loops`` (outermost first)."""
    shape = acc.buffer.shape or (1,)
    dims = max(1, len(acc.coefs))
    coefs = acc.coefs or [{}]
    spans = [1.0] * dims
    caps = [float(shape[d]) if d < len(shape) else 1.0 for d in range(dims)]
    elems_per_line = max(1.0, line_bytes / acc.elem_bytes)
    out = []
    for k in range(len(loops) + 1):
        if k:
            lp = loops[-k]
            for d, cd in enumerate(coefs):
                c = cd.get(id(lp.var))
                if c:
                    spans[d] += abs(c) * (lp.extent - 1)
        rows = 1.0
        for d in range(dims - 1):
            rows *= min(spans[d], caps[d])
        last = min(spans[-1], caps[-1])
        # a span of s elements starting anywhere covers 1 + (s - 1) / per_line lines on average
        lines_per_row = 1.0 + (last - 1.0) / elems_per_line
        out.append(rows * min(lines_per_row, math.ceil(caps[-1] / elems_per_line)))
    return out


def set_pressure(acc: Access, loops: list[For], k: int, line_bytes: int, sets: int) -> float:
    """The most lines of ``acc`` that the ``k`` innermost loops map onto one cache set (sets indexed by
    line address modulo ``sets``): a power-of-two row stride crowds a few sets while the others stay
    empty. 0 when the tile has too many rows to count (then capacity alone decides)."""
    shape = acc.buffer.shape or (1,)
    dims = len(acc.coefs)
    if dims == 0 or dims != len(shape):
        return 0.0
    spans = [1.0] * dims
    for lp in loops[len(loops) - k :] if k else []:
        for d, cd in enumerate(acc.coefs):
            c = cd.get(id(lp.var))
            if c:
                spans[d] += abs(c) * (lp.extent - 1)
    extents = [int(min(spans[d], shape[d])) for d in range(dims)]
    n_rows = math.prod(extents[:-1])
    if n_rows > 1 << 16:
        return 0.0
    eb = acc.elem_bytes
    row = [1] * dims
    for d in range(dims - 2, -1, -1):
        row[d] = row[d + 1] * shape[d + 1]
    starts = np.zeros(1, dtype=np.int64)
    for d in range(dims - 1):
        starts = (starts[:, None] + np.arange(extents[d], dtype=np.int64)[None, :] * row[d] * eb).ravel()
    per_row = max(1, math.ceil(extents[-1] * eb / line_bytes))
    first = starts // line_bytes
    lines = (first[:, None] + np.arange(per_row, dtype=np.int64)[None, :]).ravel()
    return float(np.bincount(lines % sets, minlength=1).max())
