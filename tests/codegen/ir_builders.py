"""Short builders of hand-written loop IR for the codegen tests."""

from __future__ import annotations

from autosched.lower.ir import Buffer, Load
from autosched.te.expr import Expr, const


def buf(name: str, shape: tuple[int, ...], dtype: str = "float32", scope: str = "global") -> Buffer:
    return Buffer(name, shape, dtype, scope)


def ld(b: Buffer, *idx: int | Expr) -> Load:
    """``b[idx]``; a plain int index is an int32 constant."""
    return Load(b, tuple(const(i) if isinstance(i, int) else i for i in idx), b.dtype)
