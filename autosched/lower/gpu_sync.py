"""Barriers around shared-memory stages, for GPU targets (a no-op on code without thread binding).

A shared stage attached at a loop is filled cooperatively by the threads of a block, then read by
all of them. Lowering emits, at that loop::

    Allocate(A.shared, Seq(fetch A.shared, rest))

This pass makes it::

    Allocate(A.shared, Seq(fetch A.shared, Barrier, rest, Barrier))

The first barrier publishes the fetch; the second (only inside a loop, where the fetch runs again)
keeps the next iteration's fetch from overwriting values a slower thread still reads.
"""

from __future__ import annotations

import dataclasses

from .ir import Allocate, Barrier, Buffer, For, IfThenElse, PrimFunc, Seq, Stmt, Store
from .stmt_visit import walk_stmts


def _writes(s: Stmt, bufs: set[int]) -> bool:
    return any(isinstance(x, Store) and id(x.buffer) in bufs for x in walk_stmts(s))


def _sync(s: Stmt, in_loop: bool) -> Stmt:
    if isinstance(s, For):
        bound = s.kind == "thread_binding" and s.thread_tag != "vthread"
        return dataclasses.replace(s, body=_sync(s.body, in_loop or not bound))
    if isinstance(s, Seq):
        return Seq(tuple(_sync(x, in_loop) for x in s.stmts))
    if isinstance(s, IfThenElse):
        other = None if s.otherwise is None else _sync(s.otherwise, in_loop)
        return IfThenElse(s.cond, _sync(s.then, in_loop), other)
    if not isinstance(s, Allocate):
        return s
    # A chain of allocations made at one loop, then the statements of that loop's body.
    chain: list[Buffer] = []
    body: Stmt = s
    while isinstance(body, Allocate):
        chain.append(body.buffer)
        body = body.body
    shared = {id(b) for b in chain if b.scope == "shared"}
    stmts = [_sync(x, in_loop) for x in (body.stmts if isinstance(body, Seq) else (body,))]
    if shared:
        last = max((i for i, x in enumerate(stmts) if _writes(x, shared)), default=-1)
        if 0 <= last < len(stmts) - 1:
            stmts.insert(last + 1, Barrier())
            if in_loop:
                stmts.append(Barrier())
    out: Stmt = stmts[0] if len(stmts) == 1 else Seq(tuple(stmts))
    for b in reversed(chain):
        out = Allocate(b, out)
    return out


def insert_barriers(func: PrimFunc) -> PrimFunc:
    """Synchronise the threads of a block after each shared-memory fetch and before its next one."""
    threaded = any(isinstance(x, For) and x.thread_tag.startswith("threadIdx") for x in walk_stmts(func.body))
    if not threaded or any(isinstance(x, Barrier) for x in walk_stmts(func.body)):
        return func
    return dataclasses.replace(func, body=_sync(func.body, False))
