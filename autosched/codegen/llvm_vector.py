"""Analysis for ``vectorized`` loops: access strides and whether a body may run as one vector body.

Pure loop-IR analysis, no LLVM. Codegen turns a vectorized loop into one copy of its body in LLVM
vector types only when :func:`why_not_vectorizable` finds nothing; otherwise it emits a plain serial
loop, which is slower but computes the same thing. A vectorized reduction axis
(``acc = acc + A[j]`` over the lanes of ``j``, :func:`lane_reduction`) is combined as a tree.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..lower.ir import Allocate, Barrier, Buffer, For, IfThenElse, Load, Seq, Stmt, Store
from ..te.expr import Binary, Cast, Const, Expr, Logical, Select, Var, children

_ONE = ("one",)


def structural_key(e: Expr) -> Any:
    """A hashable key equal for structurally equal expressions (Vars and buffers by identity)."""
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("const", e.dtype, e.value)
    if isinstance(e, Load):
        return ("load", id(e.buffer), tuple(structural_key(i) for i in e.indices))
    tag = getattr(e, "op", None) or getattr(e, "name", None)
    return (type(e).__name__, tag, e.dtype, tuple(structural_key(c) for c in children(e)))


def depends_on(e: Expr, var: Var) -> bool:
    if e is var:
        return True
    return any(depends_on(c, var) for c in children(e))


def _linear(e: Expr, var: Var) -> dict[Any, int] | None:
    """``e`` as {atom: coefficient}; atoms are 1, Vars and opaque uniform terms. None: not affine in var."""
    if isinstance(e, Const) and e.dtype in ("int32", "int64"):
        return {_ONE: int(e.value)}
    if isinstance(e, Var):
        return {("var", id(e)): 1}
    if isinstance(e, Cast) and e.dtype in ("int32", "int64") and e.value.dtype in ("int32", "int64"):
        return _linear(e.value, var)
    if isinstance(e, Binary) and e.op in ("+", "-", "*"):
        a, b = _linear(e.a, var), _linear(e.b, var)
        if a is not None and b is not None:
            if e.op == "*":
                if set(a) <= {_ONE}:
                    return _scale(b, a.get(_ONE, 0))
                if set(b) <= {_ONE}:
                    return _scale(a, b.get(_ONE, 0))
            else:
                return _add(a, _scale(b, -1) if e.op == "-" else b)
    if isinstance(e, Binary) and e.op in ("//", "%") and isinstance(e.b, Const) and depends_on(e.a, var):
        inner = _linear(e.a, var)
        c = int(e.b.value)
        if inner is not None and c > 0:  # kept whole: affine_index pairs it with its other half
            return {("divmod", e.op, c, frozenset(inner.items())): 1}
    if depends_on(e, var):
        return None
    return {("term", structural_key(e)): 1}


def _join_divmods(total: dict[Any, int]) -> dict[Any, int] | None:
    """``c * (x // c) + x % c`` is ``x``: a fused loop of two axes (a 1x1 conv's rows and columns as
    one pixel axis, ``y = p // W``, ``x = p % W``) indexes a row-major buffer as one stream again.
    None where a quotient or remainder of the lane variable is left over."""
    out = {a: k for a, k in total.items() if not (isinstance(a, tuple) and a[0] == "divmod")}
    for a, k in total.items():
        if not (isinstance(a, tuple) and a[0] == "divmod") or a[1] != "%":
            continue
        div = ("divmod", "//", a[2], a[3])
        if total.get(div, 0) != a[2] * k:
            return None
        out = _add(out, _scale(dict(a[3]), k))
    pairs = sum(1 for a in total if isinstance(a, tuple) and a[0] == "divmod")
    mods = sum(1 for a in total if isinstance(a, tuple) and a[0] == "divmod" and a[1] == "%")
    return out if pairs == 2 * mods else None


def _scale(f: dict[Any, int], k: int) -> dict[Any, int]:
    return {a: c * k for a, c in f.items() if c * k}


def _add(f: dict[Any, int], g: dict[Any, int]) -> dict[Any, int]:
    out = dict(f)
    for a, c in g.items():
        out[a] = out.get(a, 0) + c
    return {a: c for a, c in out.items() if c}


@dataclass(frozen=True)
class Affine:
    """A flattened index ``coeff * var + rest``; ``rest`` is a key of the part that is uniform."""

    coeff: int
    rest: frozenset[Any]


def strides(buffer: Buffer) -> list[int]:
    out, acc = [], 1
    for d in reversed(buffer.shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def affine_index(buffer: Buffer, indices: tuple[Expr, ...], var: Var) -> Affine | None:
    """The flattened row-major index of an access as an affine function of ``var``, or None."""
    total: dict[Any, int] = {}
    for idx, stride in zip(indices, strides(buffer), strict=True):
        f = _linear(idx, var)
        if f is None:
            return None
        total = _add(total, _scale(f, stride))
    joined = _join_divmods(total)
    if joined is None:
        return None
    total = joined
    coeff = total.pop(("var", id(var)), 0)
    return Affine(coeff, frozenset(total.items()))


def needs_lazy(e: Expr) -> bool:
    """Whether evaluating ``e`` when it is not needed could fault: it loads or divides integers."""
    if isinstance(e, Load):
        return True
    if isinstance(e, Binary) and e.op in ("//", "%") and not (isinstance(e.b, Const) and e.b.value != 0):
        return True  # a division by a nonzero constant cannot trap
    return any(needs_lazy(c) for c in children(e))


def walk_exprs(e: Expr) -> Iterator[Expr]:
    yield e
    for c in children(e):
        yield from walk_exprs(c)


def stmt_exprs(s: Stmt) -> Iterator[Expr]:
    """The top-level expressions of a statement tree (store indices and values, conditions)."""
    if isinstance(s, Store):
        yield from s.indices
        yield s.value
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from stmt_exprs(x)
    elif isinstance(s, IfThenElse):
        yield s.cond
        yield from stmt_exprs(s.then)
        if s.otherwise is not None:
            yield from stmt_exprs(s.otherwise)
    elif isinstance(s, (For, Allocate)):
        yield from stmt_exprs(s.body)


def stmt_stores(s: Stmt) -> Iterator[Store]:
    if isinstance(s, Store):
        yield s
    elif isinstance(s, Seq):
        for x in s.stmts:
            yield from stmt_stores(x)
    elif isinstance(s, IfThenElse):
        yield from stmt_stores(s.then)
        if s.otherwise is not None:
            yield from stmt_stores(s.otherwise)
    elif isinstance(s, (For, Allocate)):
        yield from stmt_stores(s.body)


def _why_not_shape(s: Stmt, var: Var) -> str | None:
    if isinstance(s, Seq):
        return next((r for x in s.stmts if (r := _why_not_shape(x, var))), None)
    if isinstance(s, IfThenElse):
        if depends_on(s.cond, var):
            return f"condition {s.cond!r} depends on {var.name}"
        reason = _why_not_shape(s.then, var)
        if reason is None and s.otherwise is not None:
            reason = _why_not_shape(s.otherwise, var)
        return reason
    if isinstance(s, (Store, Barrier)):
        return None
    return f"the body holds a {type(s).__name__}"


def _why_not_lazy(e: Expr, var: Var) -> str | None:
    for x in walk_exprs(e):
        if isinstance(x, Select) and (needs_lazy(x.t) or needs_lazy(x.f)) and depends_on(x.cond, var):
            return f"select {x!r} guards a load or division with a condition on {var.name}"
        if isinstance(x, Logical) and needs_lazy(x.b) and depends_on(x.a, var):
            return f"{x!r} guards a load or division with a condition on {var.name}"
    return None


def _why_not_memory(body: Stmt, var: Var) -> str | None:
    """Lanes must not see each other's writes: running statement by statement over all lanes then equals
    running iteration by iteration."""
    stores = list(stmt_stores(body))
    loads = [x for e in stmt_exprs(body) for x in walk_exprs(e) if isinstance(x, Load)]
    for buf in {id(s.buffer): s.buffer for s in stores}.values():
        mine = [s for s in stores if s.buffer is buf]
        reads = [x for x in loads if x.buffer is buf]
        accesses: list[Store | Load] = [*mine, *reads]
        forms = [affine_index(buf, a.indices, var) for a in accesses]
        if any(f is None for f in forms):
            if len(forms) == 1:
                continue  # a lone scatter: lanes store in order, so the last lane wins as in a loop
            return f"{buf.name} is scattered and accessed again in the body"
        if all(f is not None and f.coeff == 0 for f in forms) and not reads:
            if not any(depends_on(s.value, var) for s in mine):
                continue  # every lane stores the same value to the same place
        if len(set(forms)) == 1 and forms[0] is not None and forms[0].coeff != 0:
            continue  # each lane touches its own element only
        return f"lanes of {var.name} may touch the same element of {buf.name}"
    return None


REDUCE_OPS = ("+", "*", "max", "min")


def lane_reduction(s: Stmt, var: Var) -> tuple[str, Expr] | None:
    """``(op, term)`` when ``s`` is ``acc[i] = acc[i] <op> term`` with ``acc[i]`` the same element for
    every lane of ``var`` and read nowhere in ``term``: a vectorized reduction axis. The lanes' terms
    are combined as a tree, then into the accumulator (a sum's rounding order is unspecified)."""
    if not isinstance(s, Store) or not isinstance(s.value, Binary) or s.value.op not in REDUCE_OPS:
        return None
    acc, term = s.value.a, s.value.b
    if not isinstance(acc, Load) or acc.buffer is not s.buffer:
        return None
    if [structural_key(i) for i in acc.indices] != [structural_key(i) for i in s.indices]:
        return None
    form = affine_index(s.buffer, s.indices, var)
    if form is None or form.coeff != 0 or not depends_on(term, var):
        return None
    if any(isinstance(x, Load) and x.buffer is s.buffer for x in walk_exprs(term)):
        return None
    return s.value.op, term


def why_not_vectorizable(loop: For) -> str | None:
    """None when ``loop``'s body may be emitted once in vector types; otherwise the reason it may not."""
    var, body = loop.var, loop.body
    red = lane_reduction(body, var)
    if red is not None:
        return _why_not_lazy(red[1], var)  # the body stores nothing else: no lane sees another's write
    reason = _why_not_shape(body, var)
    if reason:
        return reason
    for e in stmt_exprs(body):
        reason = _why_not_lazy(e, var)
        if reason:
            return reason
    for st in stmt_stores(body):
        f = affine_index(st.buffer, st.indices, var)
        if f is not None and f.coeff == 0 and depends_on(st.value, var):
            return f"store to {st.buffer.name} reduces across lanes"
    return _why_not_memory(body, var)
