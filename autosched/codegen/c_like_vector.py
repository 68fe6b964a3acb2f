"""OpenCL vector types for a ``vectorized`` loop: ``vloadN``/``vstoreN`` where it is provably the same.

A loop ``for v in range(N)`` (N in 2, 4, 8, 16) whose body is one float32 store becomes one
``vstoreN`` when every part of the stored value is

- independent of ``v`` (a scalar; OpenCL widens it in mixed operations), or
- a float32 load whose flat index is ``base + v`` (``vloadN(0, buf + base)``), or
- ``+ - * /`` or an elementwise math built-in of such parts;

the store's own flat index is ``base + v``, and its buffer is read only at that same index (so no
lane reads what another lane writes). ``vloadN``/``vstoreN`` need only element alignment, which is
why OpenCL gets them and CUDA does not: nothing in the loop IR proves the 16-byte alignment a
``float4`` access needs there. Anything else returns ``None`` and the caller keeps the scalar loop.

Example: ``for j in range(4) (vectorized): C[i, j] = A[i, j] * 2.0f`` becomes
``vstore4((vload4(0, A + i * 4) * 2.0f), 0, C + i * 4);``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lower.arith import Affine, coefficient, flat_index
from ..lower.ir import Buffer, For, Load, Store
from ..te.expr import Binary, Call, Expr, Var
from ..te.tensor import walk

if TYPE_CHECKING:
    from .c_like import _Renderer

LANES = (2, 4, 8, 16)
_ELEMENTWISE = {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "floor", "ceil"}


class _Scalar(Exception):
    """Raised inside the analysis: this loop stays scalar."""


def vector_store(r: _Renderer, loop: For, s: Store) -> str | None:
    """The OpenCL statement doing all lanes of ``loop`` at once, or None when not provably equal."""
    if r.d.name != "opencl" or loop.extent not in LANES or s.buffer.dtype != "float32":
        return None
    v = loop.var
    try:
        base = _contiguous_base(s.buffer, s.indices, v)
        if base is None:
            return None
        value, vector = _vexpr(r, s.value, v, loop.extent, s.buffer, base)
    except _Scalar:
        return None
    n = loop.extent
    if not vector:
        value = f"(float{n})({value})"
    return f"vstore{n}({value}, 0, {_pointer(r, s.buffer, base)});"


def _contiguous_base(buf: Buffer, indices: tuple[Expr, ...], v: Var) -> Affine | None:
    """The flat index minus ``v`` when it is ``base + 1 * v`` with ``base`` free of ``v``."""
    flat = flat_index(buf.shape, indices)
    coef = coefficient(flat, v)
    if coef is None:
        raise _Scalar  # v inside an opaque term (a // or %): not provably contiguous
    rest = tuple(t for t in flat.terms if t[1] is not v)
    return Affine(rest, flat.const) if coef == 1 else None


def _pointer(r: _Renderer, buf: Buffer, base: Affine) -> str:
    name = r.name(buf)
    return name if base.is_const and base.const == 0 else f"{name} + {r.expr(base.to_expr())}"


def _vexpr(r: _Renderer, e: Expr, v: Var, n: int, stored: Buffer, base: Affine) -> tuple[str, bool]:
    """(text, whether it is a vector) of a part of the stored value."""
    if not any(n is v for n in walk(e)):
        if any(isinstance(n, Load) and n.buffer is stored for n in walk(e)) or e.dtype != "float32":
            raise _Scalar  # a lane would read an element another lane writes
        return r.expr(e), False
    if e.dtype != "float32":
        raise _Scalar
    if isinstance(e, Load):
        b = _contiguous_base(e.buffer, e.indices, v)
        same = b is not None and (b - base).is_const and (b - base).const == 0
        if b is None or (e.buffer is stored and not same):
            raise _Scalar
        return f"vload{n}(0, {_pointer(r, e.buffer, b)})", True
    if isinstance(e, Binary) and e.op in ("+", "-", "*", "/"):
        x, y = _vexpr(r, e.a, v, n, stored, base)[0], _vexpr(r, e.b, v, n, stored, base)[0]
        return f"({x} {e.op} {y})", True
    if isinstance(e, Call) and e.name in _ELEMENTWISE:
        args = ", ".join(_vexpr(r, a, v, n, stored, base)[0] for a in e.args)
        return f"{e.name}({args})", True
    raise _Scalar
