"""Attention in a model's graph: found whole, fused as one group, rebuilt in the form flash attention takes.

Exported transformers write attention as several ops (MatMul, Div or Mul, Add mask, Softmax, MatMul, with
reshapes and transposes of the heads around), and fusion by pattern alone cuts it into about five kernels.
:func:`attention_groups` finds each whole chain ``QK -> scores epilogue -> max -> exp -> sum -> divide ->
contraction with V`` by structure (the bodies with their elementwise and injective producers inlined, so
a cast, a keepdims axis or a reshape in between does not hide it) and :func:`autosched.graph.fuse.fuse`
keeps it in one group. :func:`canonical_attention` then rewrites the group's task into exactly the seven
stages :func:`autosched.search_space.attention_pattern.match_attention` recognizes (as
``topi.scaled_dot_product_attention`` writes them), with K and V as (batch, heads, keys, dim) stages, so
the task's default schedule and its search use the ``flash_attention`` rewrite. The head split and Q's
scale stay inlined in the operands; the head merge after the output stays with the next projection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .. import te
from ..te.expr import Binary, Call, Cast, Compare, Const, Expr, IterVar, Logical, Not, Select, Var, const
from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Reduce, Tensor, TensorRead, walk
from ..te.visit import rewrite, substitute

MAX_INLINE_DEPTH = 24  # producers followed through; deeper chains are left as reads (no match)
MAX_INLINE_READS = 4096


@dataclass(frozen=True, eq=False)
class Chain:
    """One attention found at ``out``: the reductions of its chain and the inlined pieces (out's vars)."""

    out: ComputeOp
    qk: ComputeOp
    row_max: ComputeOp
    row_sum: ComputeOp
    scores: Expr  # X(lead, i, kv): QK's epilogue, reading ``qk`` once
    qk_read: TensorRead  # that read, inside ``scores``
    values: Expr  # V(lead, kv, e)
    zero_rows: bool = False  # the softmax guards a row of -inf to zeros (ONNX's masked Attention)


def _inline(e: Expr, depth: int = 0, budget: list[int] | None = None) -> Expr:
    """``e`` with every read of an elementwise or injective compute replaced by its body; unit axes -> 0.

    At most MAX_INLINE_READS reads are inlined in all (a long chain reading its input twice a step
    would grow exponentially): past that, reads stay reads, and a match fails rather than hangs."""
    left = [MAX_INLINE_READS] if budget is None else budget

    def fn(n: Expr) -> Expr | None:
        if isinstance(n, IterVar) and n.extent == 1:
            return const(0, n.dtype)
        if not isinstance(n, TensorRead):
            return None
        idx = tuple(_inline(i, depth, left) for i in n.indices)
        op = n.tensor.op
        if isinstance(op, ComputeOp) and not isinstance(op.body, Reduce) and depth < MAX_INLINE_DEPTH:
            if left[0] > 0:
                left[0] -= 1
                return _inline(substitute(op.body, dict(zip(op.axis, idx, strict=True))), depth + 1, left)
        return TensorRead(n.tensor, idx, n.dtype)

    return rewrite(e, fn)


def _same(a: Expr, b: Expr, vmap: dict[int, Var]) -> bool:
    """Structural equality; ``vmap`` maps the ids of ``a``'s bound variables to ``b``'s."""
    if isinstance(a, Var):
        return isinstance(b, Var) and (a is b or vmap.get(id(a)) is b)
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, Const):
        return a.value == b.value  # type: ignore[attr-defined, no-any-return]
    if isinstance(a, TensorRead):
        assert isinstance(b, TensorRead)
        return a.tensor.op is b.tensor.op and all(_same(x, y, vmap) for x, y in zip(a.indices, b.indices))
    if isinstance(a, (Binary, Compare, Logical)):
        return a.op == b.op and _same(a.a, b.a, vmap) and _same(a.b, b.b, vmap)  # type: ignore[attr-defined]
    if isinstance(a, Not):
        return _same(a.a, b.a, vmap)  # type: ignore[attr-defined]
    if isinstance(a, Select):
        assert isinstance(b, Select)
        return _same(a.cond, b.cond, vmap) and _same(a.t, b.t, vmap) and _same(a.f, b.f, vmap)
    if isinstance(a, Cast):
        return _same(a.value, b.value, vmap)  # type: ignore[attr-defined]
    if isinstance(a, Call):
        assert isinstance(b, Call)
        return (
            a.name == b.name
            and len(a.args) == len(b.args)
            and all(_same(x, y, vmap) for x, y in zip(a.args, b.args))
        )
    return False


def _reduction(e: Expr, reducer: str) -> ComputeOp | None:
    """The non-contraction ``reducer`` compute that ``e`` reads, if ``e`` is a read of one."""
    if not isinstance(e, TensorRead) or not isinstance(e.tensor.op, ComputeOp):
        return None
    body = e.tensor.op.body
    if isinstance(body, Reduce) and body.reducer.name == reducer and len(body.axes) == 1:
        if body.condition is None:
            return e.tensor.op
    return None


def _at(read: TensorRead, want: Sequence[Var]) -> bool:
    """``read`` indexes its non-unit dims with exactly the non-unit variables ``want``, in order."""
    got = [i for i, n in zip(read.indices, read.tensor.shape, strict=True) if n != 1]
    need = [v for v in want if not (isinstance(v, IterVar) and v.extent == 1)]
    return len(got) == len(need) and all(g is w for g, w in zip(got, need))


def _axis_map(op: ComputeOp, want: Sequence[Var]) -> dict[int, Var] | None:
    """``op``'s non-unit axes (then its reduce axis) mapped onto the non-unit ``want``; None if unlike."""
    mine = [a for a in op.axis if a.extent != 1] + list(op.reduce_axis)
    need = [v for v in want if not (isinstance(v, IterVar) and v.extent == 1)]
    if len(mine) != len(need) or any(m.extent != getattr(n, "extent", m.extent) for m, n in zip(mine, need)):
        return None
    return {id(m): n for m, n in zip(mine, need)}


def _strip(e: Expr) -> Expr:
    while isinstance(e, Cast) and e.dtype == e.value.dtype:
        e = e.value
    return e


def match_chain(out: Operation) -> Chain | None:
    """The attention that ``out`` ends, found through elementwise and injective producers, or None."""
    if not isinstance(out, ComputeOp) or len(out.axis) not in (3, 4) or not isinstance(out.body, Reduce):
        return None
    red = out.body
    src = _strip(red.source)
    if red.reducer.name != "sum" or len(red.axes) != 1 or red.condition is not None:
        return None
    if not isinstance(src, Binary) or src.op != "*":
        return None
    *lead, i, e = out.axis
    kv = red.axes[0]
    for pf, vf in ((src.a, src.b), (src.b, src.a)):
        probs, nan_zeroed = _nan_zeroed(_strip(_inline(pf)))
        found = _match_probs(probs, lead, i, kv)
        if found is not None and not (nan_zeroed and found[5]):
            values = _inline(vf)
            if _uses(values, i):
                return None
            qk, row_max, row_sum, scores, qk_read, zero_rows = found
            return Chain(out, qk, row_max, row_sum, scores, qk_read, values, zero_rows or nan_zeroed)
    return None


def _nan_zeroed(p: Expr) -> tuple[Expr, bool]:
    """``(P, True)`` when ``p`` is ``isnan(P) ? 0 : P``, as torch exports scaled_dot_product_attention
    (Softmax, IsNaN, Where): with finite Q and K a softmax is NaN only in a row whose every score is -inf,
    so this is the zero-row softmax."""
    if not isinstance(p, Select) or not (isinstance(p.t, Const) and p.t.value == 0.0):
        return p, False
    cond = p.cond
    while True:  # the frontend's bool encodings: c != 0, c ? 1 : 0, casts
        if isinstance(cond, Compare) and cond.op == "!=" and isinstance(cond.b, Const) and cond.b.value == 0:
            cond = cond.a
        elif isinstance(cond, Select) and isinstance(cond.t, Const) and isinstance(cond.f, Const):
            if (cond.t.value, cond.f.value) != (1, 0):
                return p, False
            cond = cond.cond
        elif isinstance(cond, Cast):
            cond = cond.value
        else:
            break
    body = _strip(p.f)
    if not isinstance(cond, Compare) or cond.op != "!=" or not _same(cond.a, cond.b, {}):
        return p, False
    return (body, True) if _same(_strip(cond.a), body, {}) else (p, False)


def _uses(e: Expr, *vs: Var) -> bool:
    ids = {id(v) for v in vs}
    return any(isinstance(n, Var) and id(n) in ids for n in walk(e))


def _guarded(e: Expr, when: float, then: float) -> tuple[Expr, bool]:
    """``(r, True)`` when ``e`` is ``r == when ? then : r`` (the zero-row softmax's guard of a row max
    or sum, ``r`` read twice alike), else ``(e, False)``."""
    if not isinstance(e, Select) or not isinstance(e.cond, Compare) or e.cond.op != "==":
        return e, False
    lit, val = e.cond.b, e.t
    if not (isinstance(lit, Const) and lit.value == when and isinstance(val, Const) and val.value == then):
        return e, False
    return (e.f, True) if _same(_strip(e.cond.a), _strip(e.f), {}) else (e, False)


def _match_probs(
    p: Expr, lead: Sequence[IterVar], i: IterVar, kv: IterVar
) -> tuple[ComputeOp, ComputeOp, ComputeOp, Expr, TensorRead, bool] | None:
    """P(lead, i, kv) = exp(X - max_k X) / sum_k exp(X - max_k X), X an epilogue of one contraction;
    or the zero-row form, exp(X - (M == -inf ? 0 : M)) / (S == 0 ? 1 : S) (the last item: guarded)."""
    if not isinstance(p, Binary) or p.op != "/":
        return None
    row = (*lead, i)
    total, sum_guard = _guarded(_strip(p.b), 0.0, 1.0)
    row_sum = _reduction(_strip(total), "sum")
    ex = _strip(p.a)
    if row_sum is None or not _at(_strip(total), row) or not isinstance(ex, Call) or ex.name != "exp":  # type: ignore[arg-type]
        return None
    diff = _strip(ex.args[0])
    if not isinstance(diff, Binary) or diff.op != "-":
        return None
    top, max_guard = _guarded(_strip(diff.b), -math.inf, 0.0)
    row_max = _reduction(_strip(top), "max")
    if row_max is None or not _at(_strip(top), row) or (sum_guard and not max_guard):  # type: ignore[arg-type]
        return None
    scores = diff.a
    reads = [n for n in walk(scores) if isinstance(n, TensorRead) and isinstance(n.tensor.op, ComputeOp)]
    reduced = [n for n in reads if isinstance(n.tensor.op.body, Reduce)]  # type: ignore[attr-defined]
    if len(reduced) != 1 or not _at(reduced[0], (*row, kv)):
        return None
    qk_read = reduced[0]
    qk = qk_read.tensor.op
    assert isinstance(qk, ComputeOp)
    if not _is_contraction(qk):
        return None
    # The sum and the max must reduce this very row expression (their own inlined sources).
    for op, want in ((row_max, scores), (row_sum, ex)):
        vmap = _axis_map(op, (*row, kv))
        assert isinstance(op.body, Reduce)
        if vmap is None or not _same(_inline(op.body.source), want, vmap):
            return None
    return qk, row_max, row_sum, scores, qk_read, sum_guard


def _is_contraction(op: ComputeOp) -> bool:
    body = op.body
    if not isinstance(body, Reduce) or body.reducer.name != "sum" or len(body.axes) != 1:
        return False
    src = _strip(body.source)
    return isinstance(src, Binary) and src.op == "*" and len(op.axis) in (3, 4)


# Graph level: the ops of each attention, for fusion ------------------------------------------------


def attention_groups(
    ops: Sequence[Operation], readers: dict[Operation, list[Operation]], roots: set[Operation]
) -> list[set[Operation]]:
    """The ops of each attention of the graph (QK through the output), where none but the output escapes."""
    found: list[set[Operation]] = []
    taken: set[Operation] = set()
    order = {op: n for n, op in enumerate(ops)}
    for op in ops:
        chain = match_chain(op) if isinstance(op, ComputeOp) and isinstance(op.body, Reduce) else None
        if chain is None or chain.qk in taken:
            continue
        members = _between(chain.qk, op, readers, order)
        if members & taken or any(
            m in roots or any(r not in members for r in readers[m]) for m in members if m is not op
        ):
            continue
        found.append(members)
        taken |= members
    return found


def _between(
    src: Operation, sink: Operation, readers: dict[Operation, list[Operation]], order: dict[Operation, int]
) -> set[Operation]:
    """Every op on a path from ``src`` to ``sink``, both included (ops run after ``sink`` are not visited)."""
    seen: list[Operation] = []
    stack, visited = [src], {src}
    while stack:
        node = stack.pop()
        seen.append(node)
        for r in readers.get(node, []):
            if r not in visited and order.get(r, -1) <= order[sink]:
                visited.add(r)
                stack.append(r)
    on_path = {sink}
    for node in sorted(seen, key=lambda n: -order.get(n, -1)):  # consumers before producers
        if any(r in on_path for r in readers.get(node, [])):
            on_path.add(node)
    return on_path


# Task level: the canonical seven stages --------------------------------------------------------------


def canonical_attention(out: Tensor) -> Tensor | None:
    """``out`` rebuilt as topi's attention stages (flash-ready), or None when it is not one or not float32.

    ``out`` reads placeholders only through the chain (a task's rebuilt group); rank-3 outputs (heads,
    queries, dim) get a batch of one and a last stage dropping it.
    """
    chain = match_chain(out.op)
    if chain is None or out.dtype != "float32":
        return None
    qk = chain.qk
    assert isinstance(qk.body, Reduce)
    qsrc = _strip(qk.body.source)
    assert isinstance(qsrc, Binary)
    *qlead, qi, qj = qk.axis
    d = qk.body.axes[0]
    fa, fb = _inline(qsrc.a), _inline(qsrc.b)
    qf, kf = (fa, fb) if not _uses(fa, qj) else (fb, fa)
    if _uses(qf, qj) or _uses(kf, qi):
        return None
    *lead, i, e = chain.out.axis
    kv = chain.out.body.axes[0]  # type: ignore[attr-defined]
    if _uses(chain.scores, e) or len(qlead) != len(lead):
        return None
    pieces = (
        qf,
        kf,
        chain.values,
        rewrite(chain.scores, lambda n: const(0.0) if n is chain.qk_read else None),
    )
    if any(
        isinstance(n, TensorRead) and not isinstance(n.tensor.op, PlaceholderOp)
        for p in pieces
        for n in walk(p)
    ):
        return None  # another computed tensor feeds it: keep the group's own stages
    heads, S, E = lead[-1].extent, i.extent, e.extent
    B = lead[0].extent if len(lead) == 2 else 1
    L, D = kv.extent, d.extent

    def heads_of(vs: Sequence[IterVar], b: Var, h: Var) -> dict[Var, Expr]:
        return dict(zip(vs, (b, h) if len(vs) == 2 else (h,), strict=True))

    def k_body(b: Var, h: Var, j: Var, dd: Var) -> Expr:
        return substitute(kf, {**heads_of(qlead, b, h), qj: j, d: dd})

    k = te.compute((B, heads, L, D), k_body, name="attention_k")
    v = te.compute(
        (B, heads, L, E),
        lambda b, h, j, ee: substitute(chain.values, {**heads_of(lead, b, h), kv: j, e: ee}),
        name="attention_v",
    )
    rd = te.reduce_axis((0, D), name="d")
    scores = te.compute(
        (B, heads, S, L),
        lambda b, h, ii, j: te.sum(
            substitute(qf, {**heads_of(qlead, b, h), qi: ii, d: rd}) * k[b, h, j, rd], axis=rd
        ),
        name="attention_qk",
    )

    def x_body(b: Var, h: Var, ii: Var, j: Var) -> Expr:
        x = rewrite(chain.scores, lambda n: scores[b, h, ii, j] if n is chain.qk_read else None)
        return substitute(x, {**heads_of(lead, b, h), i: ii, kv: j})

    x = te.compute((B, heads, S, L), x_body, name="attention_scores")
    y = _softmax_contract(x, v, chain.zero_rows)
    if len(lead) == 1:
        y4 = y
        y = te.compute((heads, S, E), lambda h, ii, ee: y4[0, h, ii, ee], name="attention_heads")
    return y


def _softmax_contract(x: Tensor, v: Tensor, zero_rows: bool = False) -> Tensor:
    """softmax(x) over keys, contracted with v: the five stages after the scores, as topi writes them;
    with ``zero_rows``, guarded so that a row of -inf gives zeros (topi's ``zero_row_softmax``)."""
    B, H, S, L = x.shape
    E = v.shape[3]
    zero, one, neg_inf = const(0.0), const(1.0), const(-math.inf)

    def guard(r: Expr, when: Expr, then: Expr) -> Expr:
        return te.if_then_else(r == when, then, r) if zero_rows else r

    rm = te.reduce_axis((0, L), name="k")
    row_max = te.compute((B, H, S), lambda b, h, i: te.max(x[b, h, i, rm], axis=rm), name="attention_max")
    exps = te.compute(
        x.shape,
        lambda b, h, i, j: te.exp(x[b, h, i, j] - guard(row_max[b, h, i], neg_inf, zero)),
        name="attention_exp",
    )
    rs = te.reduce_axis((0, L), name="k")
    total = te.compute((B, H, S), lambda b, h, i: te.sum(exps[b, h, i, rs], axis=rs), name="attention_sum")
    probs = te.compute(
        x.shape,
        lambda b, h, i, j: exps[b, h, i, j] / guard(total[b, h, i], zero, one),
        name="attention_probs",
    )
    rv = te.reduce_axis((0, L), name="kv")
    return te.compute(
        (B, H, S, E),
        lambda b, h, i, ee: te.sum(probs[b, h, i, rv] * v[b, h, rv, ee], axis=rv),
        name="attention",
    )
