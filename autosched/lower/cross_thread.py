"""Cross-thread reduction, for GPU targets: a reduction loop bound to ``threadIdx.*`` becomes a
per-thread partial and a tree over a shared array (a no-op on code without such a loop).

Lowering leaves the reduction sequential: every thread would update the one accumulator and race.
For the nest that starts at the first reduction loop (only reduction loops and guards around one
update ``C[i] = C[i] op src``, with ``k.inner`` bound to threads)::

    for k.outer: for k.inner (threadIdx.x): if g: C[i] = C[i] + src

this pass emits (``t`` a fresh loop over the same threads)::

    C.red = allocate(shared, [T])
    for t (threadIdx.x):
      acc = allocate(local, [1])
      acc[0] = 0; for k.outer: if g[k.inner := t]: acc[0] = acc[0] + src[k.inner := t]
      C.red[t] = acc[0]
    barrier()
    for s in P/2, P/4, ..., 1 (P the power of two >= T):
      for t (threadIdx.x): if t < s and t + s < T: C.red[t] = C.red[t] + C.red[t + s]
      barrier()
    if spatial part of g: C[i] = C[i] + C.red[0]
    barrier()     # no thread refills C.red while another still reads C.red[0]

Read sequentially it computes the same sum, as the loop IR's semantics require. Runs after
:func:`autosched.lower.gpu_sync.insert_barriers`, which adds none once a function has barriers.
"""

from __future__ import annotations

import dataclasses

from ..errors import LowerError
from ..te.builtins import _highest, _lowest
from ..te.expr import Binary, Expr, IterVar, Logical, Var, binary, compare, const, logical
from ..te.tensor import walk
from ..te.visit import substitute
from .ir import Allocate, Barrier, Buffer, For, IfThenElse, Load, PrimFunc, Seq, Stmt, Store, seq
from .stmt_visit import map_stmt, walk_stmts

_IDENTITY = {"+": lambda t: 0, "*": lambda t: 1, "max": _lowest, "min": _highest}


def _is_reduce(s: Stmt) -> bool:
    return isinstance(s, For) and isinstance(s.var, IterVar) and s.var.kind == "reduce"


def _on_threads(s: For) -> bool:
    return s.kind == "thread_binding" and s.thread_tag.startswith("threadIdx")


def _has_thread_reduction(s: Stmt) -> bool:
    return any(isinstance(x, For) and _is_reduce(x) and _on_threads(x) for x in walk_stmts(s))


def lower_cross_thread_reductions(func: PrimFunc) -> PrimFunc:
    """Turn each reduction loop bound to threads into partials combined by a shared-memory tree."""
    if not _has_thread_reduction(func.body):
        return func
    return dataclasses.replace(func, body=_Rewriter(func.name).stmt(func.body, None))


class _Rewriter:
    def __init__(self, name: str):
        self.name = name

    def fail(self, loop: For, msg: str) -> LowerError:
        return LowerError(f"cross-thread reduction over {loop.var.name!r} in {self.name!r}: {msg}")

    def stmt(self, s: Stmt, thread_loop: For | None) -> Stmt:
        """``thread_loop`` is the innermost enclosing spatial loop bound to threads, if any."""
        if isinstance(s, For):
            if _is_reduce(s) and _has_thread_reduction(s):
                if thread_loop is not None:
                    tl = next(
                        x for x in walk_stmts(s) if isinstance(x, For) and _is_reduce(x) and _on_threads(x)
                    )
                    raise self.fail(
                        tl,
                        f"it sits inside loop {thread_loop.var.name!r} bound to {thread_loop.thread_tag}; "
                        "bind the enclosing spatial loops to blocks (or serial loops) instead",
                    )
                return self.rewrite(s)
            inner = s if _on_threads(s) else thread_loop
            return dataclasses.replace(s, body=self.stmt(s.body, inner))
        if isinstance(s, Seq):
            return Seq(tuple(self.stmt(x, thread_loop) for x in s.stmts))
        if isinstance(s, IfThenElse):
            other = None if s.otherwise is None else self.stmt(s.otherwise, thread_loop)
            return IfThenElse(s.cond, self.stmt(s.then, thread_loop), other)
        if isinstance(s, Allocate):
            return Allocate(s.buffer, self.stmt(s.body, thread_loop))
        return s

    def rewrite(self, top: For) -> Stmt:
        # The nest: reduction loops and guards down to the one update.
        chain: list[For | IfThenElse] = []
        s: Stmt = top
        while not isinstance(s, Store):
            if isinstance(s, For) and _is_reduce(s):
                chain.append(s)
                s = s.body
            elif isinstance(s, IfThenElse) and s.otherwise is None:
                chain.append(s)
                s = s.then
            else:
                what = f"loop {s.var.name!r}" if isinstance(s, For) else type(s).__name__
                raise self.fail(
                    top,
                    f"the reduction nest must hold only reduction loops and guards around one update, "
                    f"found {what} (attach stages and put spatial loops outside the reduction loops)",
                )
        bound = [x for x in chain if isinstance(x, For) and _on_threads(x)]
        if len(bound) > 1:
            raise self.fail(
                bound[0],
                f"loops {', '.join(repr(x.var.name) for x in bound)} are all bound to threads; "
                "fuse them into one loop first",
            )
        tl = bound[0]
        op, src, acc_first = self.update(tl, s)
        buf, dtype = s.buffer, s.buffer.dtype

        def combine(acc: Expr, x: Expr) -> Expr:
            return binary(op, acc, x) if acc_first else binary(op, x, acc)

        n = tl.extent
        t = IterVar(
            tl.var.name, tl.var.dtype, n, "spatial"
        )  # spatial: the renderer refuses reduce loops here
        acc = Buffer(f"{buf.name}.acc", (1,), dtype, "local")
        red = Buffer(f"{buf.name}.red", (n,), dtype, "shared")
        zero = (const(0),)

        def on_threads(body: Stmt) -> For:
            return For(t, n, "thread_binding", body, tl.thread_tag)

        # Each thread: its slice of the reduction, the thread loop dropped and its variable now t.
        partial: Stmt = Store(acc, zero, combine(Load(acc, zero, dtype), src))
        guards: list[Expr] = []
        for node in reversed(chain):
            if node is tl:
                continue
            if isinstance(node, For):
                partial = dataclasses.replace(node, body=partial)
            else:
                partial = IfThenElse(node.cond, partial)
                guards.extend(_conjuncts(node.cond))
        partial = map_stmt(partial, lambda x: x, lambda e: substitute(e, {tl.var: t}))
        identity = const(_IDENTITY[op](dtype), dtype)
        stmts: list[Stmt] = [
            on_threads(
                Allocate(
                    acc,
                    seq(Store(acc, zero, identity), partial, Store(red, (t,), Load(acc, zero, dtype))),
                )
            ),
            Barrier(),
        ]
        # The tree: halve the live partials until red[0] holds them all.
        step = 1
        while step < n:
            step *= 2
        while step > 1:
            step //= 2
            cond = compare("<", t, step)
            if 2 * step > n:
                cond = logical("and", cond, compare("<", binary("+", t, step), n))
            other = Load(red, (binary("+", t, step),), dtype)
            update = Store(red, (t,), combine(Load(red, (t,), dtype), other))
            stmts += [on_threads(IfThenElse(cond, update)), Barrier()]
        # The result, once, where the spatial guards hold (guards on reduction variables are done).
        reduce_vars = {id(x.var) for x in chain if isinstance(x, For)}
        spatial = [g for g in guards if not any(isinstance(v, Var) and id(v) in reduce_vars for v in walk(g))]
        final: Stmt = Store(buf, s.indices, combine(Load(buf, s.indices, dtype), Load(red, zero, dtype)))
        for g in reversed(spatial):
            final = IfThenElse(g, final)
        stmts += [final, Barrier()]
        return Allocate(red, Seq(tuple(stmts)))

    def update(self, tl: For, s: Store) -> tuple[str, Expr, bool]:
        """(operator, source, whether the accumulator is the left operand) of ``C[i] = C[i] op src``."""
        v = s.value
        if isinstance(v, Binary) and v.op in _IDENTITY:
            for acc_side, other, first in ((v.a, v.b, True), (v.b, v.a, False)):
                if _is_acc(acc_side, s.buffer) and not any(_is_acc(n, s.buffer) for n in walk(other)):
                    return v.op, other, first
        raise self.fail(
            tl,
            f"the update of {s.buffer.name!r} is {v!r}; only sum, product, min and max reductions "
            "(acc op value) can be combined across threads",
        )


def _is_acc(e: Expr, buf: Buffer) -> bool:
    return isinstance(e, Load) and e.buffer is buf


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Logical) and e.op == "and":
        return _conjuncts(e.a) + _conjuncts(e.b)
    return [e]
