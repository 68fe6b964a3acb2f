"""The loop IR: immutable statements over buffers, the output of lowering and input of codegen.

Expressions are those of :mod:`autosched.te.expr` plus :class:`Load`. Loops always start at 0.
Semantics are sequential: a ``parallel``, ``vectorized`` or ``unrolled`` loop computes exactly what
the same ``serial`` loop computes; the kind only tells codegen how it may run it.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..te.expr import Expr, Var

FOR_KINDS = ("serial", "parallel", "vectorized", "unrolled", "thread_binding")
SCOPES = ("global", "local", "shared")


@dataclass(frozen=True, eq=False)
class Buffer:
    """A dense row-major array. ``global`` buffers are function parameters; the others are allocated."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    scope: str = "global"

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True, eq=False)
class Load(Expr):
    buffer: Buffer
    indices: tuple[Expr, ...]
    dtype: str

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def __repr__(self) -> str:
        return f"{self.buffer.name}[{', '.join(map(repr, self.indices))}]"


class Stmt:
    """Base of statements."""


@dataclass(frozen=True, eq=False)
class Store(Stmt):
    buffer: Buffer
    indices: tuple[Expr, ...]
    value: Expr


@dataclass(frozen=True, eq=False)
class For(Stmt):
    """``for var in range(extent)``; ``thread_tag`` names the GPU axis of a ``thread_binding`` loop."""

    var: Var
    extent: int
    kind: str
    body: Stmt
    thread_tag: str = ""
    annotations: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, eq=False)
class IfThenElse(Stmt):
    """``likely``: ``then`` runs on all but a few iterations (the full tiles of a partial tiling,
    lower/tails.py); the cost model's features then count ``otherwise`` as the rare path it is."""

    cond: Expr
    then: Stmt
    otherwise: Stmt | None = None
    likely: bool = False


@dataclass(frozen=True, eq=False)
class Seq(Stmt):
    stmts: tuple[Stmt, ...]


@dataclass(frozen=True, eq=False)
class Allocate(Stmt):
    """Storage for ``buffer`` (scope local or shared) live during ``body``."""

    buffer: Buffer
    body: Stmt


@dataclass(frozen=True, eq=False)
class Barrier(Stmt):
    """Synchronise the threads of a GPU block (shared memory written before is visible after)."""


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A kernel: ``params`` are the global buffers, inputs first then outputs."""

    name: str
    params: tuple[Buffer, ...]
    body: Stmt


def seq(*stmts: Stmt | None) -> Stmt:
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.stmts)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))
