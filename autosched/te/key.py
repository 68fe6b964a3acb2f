"""The structural key of a te program: sha256 of a canonical text, equal across processes and machines.

Tuning records are looked up by this key, so the text depends only on structure: op names, shapes,
dtypes, axis names and extents, expression trees and constants. It never uses ``id()``, ``hash()`` or the
order of a set. Axes keep their names (schedules refer to them); other variables (a reducer's
``lhs``/``rhs``) are numbered by first appearance; tensors are referred to by their position in the
topological order, so two ops that share a name stay distinct.

Example::

    workload_key([C])        # 'f3a1...' (64 hex digits)
    workload_key([A, B, C])  # also fixes the argument order of a built kernel
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from .expr import Binary, Call, Cast, Compare, Const, Expr, IterVar, Logical, Not, Select, Var
from .graph import topo_order
from .tensor import ComputeOp, Operation, Reduce, Tensor, TensorRead

KEY_VERSION = 1  # bump when the text below changes: old records then no longer match


def workload_key(outputs: Sequence[Tensor]) -> str:
    """sha256 hex digest of :func:`canonical_text`; pass ``[inputs..., outputs...]`` to fix arg order."""
    return hashlib.sha256(canonical_text(outputs).encode("utf-8")).hexdigest()


def canonical_text(outputs: Sequence[Tensor]) -> str:
    """The text that :func:`workload_key` hashes, one op a line (readable, for debugging key changes).

    Example line: ``t2 = compute "C" float32 (i:64, j:64) tag "" = sum<...>((t0[i, k] * t1[k, j]), k:64)``.
    """
    ops = topo_order(outputs)
    index = {op: n for n, op in enumerate(ops)}
    lines = [f"autosched-te v{KEY_VERSION}"]
    for op in ops:
        lines.append(_op_line(op, index))
    lines.append("outputs " + " ".join(f"t{index[t.op]}" for t in outputs))
    return "\n".join(lines) + "\n"


def _op_line(op: Operation, index: dict[Operation, int]) -> str:
    head = f"t{index[op]} = {_kind(op)} {json.dumps(op.name)} {op.dtype}"
    if not isinstance(op, ComputeOp):
        return f"{head} {list(op.shape)}"
    axes = ", ".join(f"{a.name}:{a.extent}" for a in op.axis)
    body = _Printer(index, op).expr(op.body)
    return f"{head} ({axes}) tag {json.dumps(op.tag)} = {body}"


def _kind(op: Operation) -> str:
    return "compute" if isinstance(op, ComputeOp) else "placeholder"


def _value(v: Any) -> str:
    """A constant as text: numpy scalars become Python numbers, whose repr is stable across versions."""
    if hasattr(v, "item"):
        v = v.item()
    return repr(v)


class _Printer:
    """Prints expressions of one compute; variables other than axes are numbered v0, v1, ..."""

    def __init__(self, index: dict[Operation, int], op: ComputeOp):
        self.index = index
        self.axes = {id(a) for a in op.axis}
        if isinstance(op.body, Reduce):
            self.axes |= {id(a) for a in op.body.axes}
        self.vars: dict[int, str] = {}
        self.keep: list[Var] = []  # keeps numbered variables alive so their ids stay unique

    def var(self, v: Var) -> str:
        if isinstance(v, IterVar):
            # An axis of another compute would be a bug in the program; mark it rather than hide it.
            return v.name if id(v) in self.axes else f"{v.name}?{v.kind}:{v.extent}"
        if id(v) not in self.vars:
            self.vars[id(v)] = f"v{len(self.vars)}"
            self.keep.append(v)
        return f"{self.vars[id(v)]}:{v.dtype}"

    def expr(self, e: Expr) -> str:
        if isinstance(e, Const):
            return f"{_value(e.value)}:{e.dtype}"
        if isinstance(e, Var):
            return self.var(e)
        if isinstance(e, (Binary, Compare, Logical)):
            return f"({self.expr(e.a)} {e.op} {self.expr(e.b)})"
        if isinstance(e, Not):
            return f"not({self.expr(e.a)})"
        if isinstance(e, Select):
            return f"select({self.expr(e.cond)}, {self.expr(e.t)}, {self.expr(e.f)})"
        if isinstance(e, Cast):
            return f"cast<{e.dtype}>({self.expr(e.value)})"
        if isinstance(e, Call):
            return f"{e.name}({', '.join(self.expr(a) for a in e.args)})"
        if isinstance(e, TensorRead):
            return f"t{self.index[e.tensor.op]}[{', '.join(self.expr(i) for i in e.indices)}]"
        if isinstance(e, Reduce):
            r = e.reducer
            reducer = (
                f"{r.name}<{self.var(r.lhs)}, {self.var(r.rhs)} -> {self.expr(r.combined)}; "
                f"identity {_value(r.identity)}>"
            )
            axes = ", ".join(f"{a.name}:{a.extent}" for a in e.axes)
            where = "" if e.condition is None else f", where {self.expr(e.condition)}"
            return f"{reducer}({self.expr(e.source)}, {axes}{where})"
        raise TypeError(f"workload_key: cannot print {type(e).__name__} {e!r}")
