"""The attention pattern, found by structure: contraction -> score epilogue -> softmax -> contraction.

A program holds it when, from an output-like stage ``O`` back::

    O[b, h, i, e]  = sum_kv P[b, h, i, kv] * <v>(b, h, kv, e)
    P[b, h, i, j]  = E[b, h, i, j] / S[b, h, i]
    S[b, h, i]     = sum_k E[b, h, i, k]
    E[b, h, i, j]  = exp(X[b, h, i, j] - M[b, h, i])
    M[b, h, i]     = max_k X[b, h, i, k]
    X[b, h, i, j]  = f(QK[b, h, i, j], i, j, other reads)    (scale, causal select, additive mask)
    QK[b, h, i, j] = sum_d <q>(b, h, i, d) * K[e0(b, h), e1(b, h), j, d]

(``topi.scaled_dot_product_attention`` writes exactly this.) A masked attention may guard the
softmax so that a row whose every key is masked gives zeros, as ONNX's reference does (topi's
``zero_row_softmax``): ``E = exp(X - (M == -inf ? 0 : M))`` and ``P = E / (S == 0 ? 1 : S)``.
The flash rewrite (:mod:`.sketch_attention`, lowered by :mod:`autosched.lower.flash`) replaces these
seven stages by one blocked loop nest with an online softmax; ``f`` is kept as written and evaluated
per score, and a top-level causal select ``j <= i + c ? s : -inf`` also lets whole key blocks above
the diagonal be skipped.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..te.expr import Binary, Call, Compare, Const, Expr, IterVar, Select, Var
from ..te.tensor import ComputeOp, Reduce, TensorRead, walk
from .schedule import Schedule
from .stage import Stage


@dataclass(frozen=True)
class AttentionPattern:
    """The stages of one attention and the facts the rewrite needs (names, so it survives replay)."""

    out: str
    qk: str
    scores: str  # X: the epilogue of the scores
    row_max: str
    exps: str
    row_sum: str
    probs: str
    q_first: bool  # in QK's product, the q factor comes first
    k_stage: str  # the tensor K is read from directly: packed transposed per (e0, e1)
    causal_offset: int | None  # X is select(j <= i + c, ..., -inf): key j is visible from query i
    zero_rows: bool = False  # the guarded softmax: a row with no visible key gives zeros
    hides_rows: bool = True  # X may make a key block of a row all -inf (a mask read, a -inf constant)

    @property
    def members(self) -> tuple[str, ...]:
        return (self.qk, self.scores, self.row_max, self.exps, self.row_sum, self.probs, self.out)


def _reducer(op: ComputeOp, name: str) -> Reduce | None:
    body = op.body
    if isinstance(body, Reduce) and body.reducer.name == name and body.condition is None:
        if len(body.axes) == 1:
            return body
    return None


def _read_of(e: Expr, sch: Schedule, indices: tuple[Expr, ...]) -> Stage | None:
    """The stage ``e`` reads if ``e`` is a read of a compute stage at exactly ``indices``."""
    if not isinstance(e, TensorRead) or len(e.indices) != len(indices):
        return None
    if any(a is not b for a, b in zip(e.indices, indices)):
        return None
    st = sch.stage_of(e.tensor.op)
    return st if isinstance(st.op, ComputeOp) else None


def _reduces_rows(sch: Schedule, row: Stage, reducer: str, source: Stage) -> bool:
    """Whether ``row`` is ``row[b, h, i] = <reducer>_k source[b, h, i, k]`` (a softmax row max or sum)."""
    op = row.op
    if not isinstance(op, ComputeOp) or len(op.axis) != 3:
        return False
    red = _reducer(op, reducer)
    return red is not None and _read_of(red.source, sch, (*op.axis, red.axes[0])) is source


GUARDS = {"max": (-math.inf, 0.0), "sum": (0.0, 1.0)}  # row == a ? b : row, the zero-row softmax's


def _unguarded(e: Expr, reducer: str) -> tuple[Expr, bool]:
    """``(row, True)`` when ``e`` is ``row == a ? b : row`` with (a, b) the ``reducer``'s guard (the
    same read twice), else ``(e, False)``."""
    a, b = GUARDS[reducer]
    if not isinstance(e, Select) or not isinstance(e.cond, Compare) or e.cond.op != "==":
        return e, False
    x, lit, other = e.cond.a, e.cond.b, e.f
    if not (isinstance(lit, Const) and lit.value == a and isinstance(e.t, Const) and e.t.value == b):
        return e, False
    if not isinstance(x, TensorRead) or not isinstance(other, TensorRead) or x.tensor is not other.tensor:
        return e, False
    if any(p is not q for p, q in zip(x.indices, other.indices)):
        return e, False
    return other, True


def _with_row(
    sch: Schedule, op: ComputeOp, body: Expr, binop: str, reducer: str
) -> tuple[Stage, Stage, bool] | None:
    """``(x, row, guarded)`` when ``body`` (of ``op``, over b, h, i, j) is ``x[b, h, i, j] <binop>
    row[b, h, i]`` and ``row`` is the ``reducer`` of ``x`` over j: a softmax's ``e / sum`` or ``s - max``
    step; ``guarded`` when the row is read through the zero-row softmax's guard."""
    if not isinstance(body, Binary) or body.op != binop:
        return None
    b, h, i, j = op.axis
    x = _read_of(body.a, sch, (b, h, i, j))
    read, guarded = _unguarded(body.b, reducer)
    row = _read_of(read, sch, (b, h, i))
    if x is None or row is None or not _reduces_rows(sch, row, reducer, x):
        return None
    return x, row, guarded


def _hides_rows(body: Expr, qk: Stage, sch: Schedule, causal: int | None) -> bool:
    """Whether the scores epilogue ``body`` may give a row -inf for every key of a block: it reads a
    tensor besides QK (a mask) or holds a non-finite constant, past a top causal select that keeps key
    0 visible (the first key block then has a finite score in every row)."""
    if causal is not None and causal >= 0 and isinstance(body, Select):
        body = body.t
    for n in walk(body):
        if isinstance(n, TensorRead) and sch.stage_of(n.tensor.op) is not qk:
            return True
        if isinstance(n, Const) and isinstance(n.value, float) and not math.isfinite(n.value):
            return True
    return False


def _uses(e: Expr, *vars: Var) -> bool:
    ids = {id(v) for v in vars}
    return any(isinstance(n, Var) and id(n) in ids for n in walk(e))


def _causal_offset(body: Expr, i: IterVar, j: IterVar) -> int | None:
    """``c`` when ``body`` is ``select(j <= i + c, s, -inf)`` (or ``j < i + c + 1``)."""
    if not isinstance(body, Select) or not isinstance(body.f, Const) or body.f.value != -math.inf:
        return None
    cond = body.cond
    if not isinstance(cond, Compare) or cond.op not in ("<=", "<") or cond.a is not j:
        return None
    rhs, c = cond.b, None
    if rhs is i:
        c = 0
    elif isinstance(rhs, Binary) and rhs.op == "+":
        if rhs.a is i and isinstance(rhs.b, Const):
            c = int(rhs.b.value)
        elif rhs.b is i and isinstance(rhs.a, Const):
            c = int(rhs.a.value)
    if c is None:
        return None
    return c - 1 if cond.op == "<" else c


def match_attention(sch: Schedule, out: Stage) -> AttentionPattern | None:
    """The attention ending at ``out``, or None when ``out`` is not the end of one."""
    op = out.op
    if not isinstance(op, ComputeOp) or len(op.axis) != 4 or op.dtype != "float32":
        return None
    red = _reducer(op, "sum")
    if red is None or not isinstance(red.source, Binary) or red.source.op != "*":
        return None
    b, h, i, e = op.axis
    kv = red.axes[0]
    probs = None
    for pe, ve in ((red.source.a, red.source.b), (red.source.b, red.source.a)):
        probs = _read_of(pe, sch, (b, h, i, kv))
        if probs is not None:
            if not isinstance(ve, TensorRead) or _uses(ve, i) or not _uses(ve, kv, e):
                probs = None
            break
    if probs is None or not isinstance(probs.op, ComputeOp):
        return None
    pair = _with_row(sch, probs.op, probs.op.body, "/", "sum")
    if pair is None:
        return None
    exps, row_sum, sum_guard = pair
    eop = exps.op
    assert isinstance(eop, ComputeOp)
    ebody = eop.body
    if not (isinstance(ebody, Call) and ebody.name == "exp"):
        return None
    found = _with_row(sch, eop, ebody.args[0], "-", "max")
    if found is None or (sum_guard and not found[2]):  # zeros for a row of -inf need both guards
        return None
    scores, row_max, _ = found
    xop = scores.op
    assert isinstance(xop, ComputeOp)
    if xop.reduce_axis:
        return None
    xb, xh, xi, xj = xop.axis
    qk_reads = [n for n in walk(xop.body) if isinstance(n, TensorRead)]
    qk = None
    for n in qk_reads:
        st = _read_of(n, sch, (xb, xh, xi, xj))
        if st is not None and isinstance(st.op, ComputeOp) and st.op.reduce_axis:
            qk = st
    if qk is None or sum(1 for n in qk_reads if sch.stage_of(n.tensor.op) is qk) != 1:
        return None
    qop = qk.op
    assert isinstance(qop, ComputeOp)
    qred = _reducer(qop, "sum")
    if qred is None or not isinstance(qred.source, Binary) or qred.source.op != "*":
        return None
    qb, qh, qi, qj = qop.axis
    d = qred.axes[0]
    fa, fb = qred.source.a, qred.source.b
    q_first = not _uses(fa, qj)
    qf, kf = (fa, fb) if q_first else (fb, fa)
    if _uses(qf, qj) or _uses(kf, qi) or not _uses(qf, qi, d):
        return None
    if not isinstance(kf, TensorRead) or len(kf.indices) != 4:
        return None
    if kf.indices[2] is not qj or kf.indices[3] is not d:
        return None
    if any(_uses(x, qi, qj, d) for x in kf.indices[:2]):
        return None
    causal = _causal_offset(xop.body, xi, xj)
    return AttentionPattern(
        out=out.name,
        qk=qk.name,
        scores=scores.name,
        row_max=row_max.name,
        exps=exps.name,
        row_sum=row_sum.name,
        probs=probs.name,
        q_first=q_first,
        k_stage=sch.stage_of(kf.tensor.op).name,
        causal_offset=causal,
        zero_rows=sum_guard,
        hides_rows=sum_guard or _hides_rows(xop.body, qk, sch, causal),
    )


def find_attentions(sch: Schedule) -> list[AttentionPattern]:
    """Every attention of the program, outputs first."""
    found = []
    for st in reversed(sch.stages):
        if isinstance(st.op, ComputeOp) and st.op.reduce_axis:
            m = match_attention(sch, st)
            if m is not None:
                found.append(m)
    return found
