"""The per-query-row online-softmax state of a flash nest (:mod:`.flash`): set up, update, normalise.

Each query row keeps a running maximum ``m``, a running sum ``l`` and an accumulator ``acc`` over the
value dim. After a key block's scores are in ``sc`` (with the row's partial maxima in ``pmax``, 16
lanes), :func:`online_softmax_row` turns them into probabilities against the new maximum and rescales
``l`` and ``acc`` by ``exp(m_old - m_new)``; :func:`store_row` writes ``acc / l``. These builders read
no te expression, only the nest's local buffers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from ..search_space.sketch_attention import LANES
from ..te.expr import Expr, Var, binary, call, compare, select
from .flash_parts import _c, _f, _loop
from .ir import Buffer, Load, Stmt, Store, seq

NEG_INF = -math.inf


@dataclass(frozen=True)
class RowState:
    """The local buffers of the running softmax: ``acc`` (bq, E), ``m`` and ``l`` (bq,), the block's
    scores ``sc`` (bq, bk), their 16-lane partial maxima ``pmax`` (bq, 16), a 16-lane partial sum
    ``red`` and four scalars ``stat`` (block max, the max subtracted, the rescale factor, block sum).
    ``w`` is the value dim's vector width (it divides ``E``)."""

    acc: Buffer
    m: Buffer
    l: Buffer  # noqa: E741
    sc: Buffer
    pmax: Buffer
    red: Buffer
    stat: Buffer
    E: int
    w: int
    # The cheapest correct guards (each a scalar select a row, and only where it can fire, so plain and
    # causal attention keep the nest they had): ``guard`` where a key block may hide a whole row
    # (m stays -inf: subtract 0, not -inf, else exp(-inf - -inf) is NaN); ``zero_rows`` where a row
    # with no visible key must give zeros (l = 0: divide by 1).
    guard: bool = True
    zero_rows: bool = False

    def over_e(self, outer: str, inner: str, fn: Callable[[Expr], Stmt]) -> Stmt:
        """``fn(e)`` for each value index e, ``w`` lanes a vector."""
        return _loop(
            outer,
            self.E // self.w,
            "serial",
            lambda eo: _loop(inner, self.w, "vectorized", lambda ev: fn(_lane(eo, self.w, ev))),
        )


def _lane(outer: Var, width: int, inner: Var) -> Expr:
    return binary("+", binary("*", outer, _c(width)), inner)


def _ld(buf: Buffer, *ix: Expr) -> Expr:
    return Load(buf, tuple(ix), "float32")


def init_row(st: RowState, ii: Expr) -> Stmt:
    """``m = -inf, l = 0, acc = 0`` for row ``ii``."""
    return seq(
        Store(st.m, (ii,), _f(NEG_INF)),
        Store(st.l, (ii,), _f(0.0)),
        st.over_e("ie_o", "ie_v", lambda e: Store(st.acc, (ii, e), _f(0.0))),
    )


def online_softmax_row(st: RowState, ii: Expr, cols: int, floor: bool = False) -> Stmt:
    """Row ``ii`` of a block of ``cols`` scores: ``sc = exp(sc - m_new)``, ``l = l * alpha + sum sc``,
    ``acc *= alpha`` with ``alpha = exp(m_old - m_new)``. A row with no visible key so far keeps
    ``m = -inf`` and subtracts 0 instead (exp(-inf) = 0, never NaN) where ``st.guard``."""
    stat = st.stat

    def lanes(fn: Callable[[Var], Stmt]) -> Stmt:
        return _loop("rl", LANES, "vectorized", fn)

    def over(fn: Callable[[Expr, Var], Stmt]) -> Stmt:  # the block's scores, 16 a vector
        def vec(jo: Var) -> Stmt:
            return _loop("sm_v", LANES, "vectorized", lambda jv: fn(_lane(jo, LANES, jv), jv))

        return _loop("sm_o", cols // LANES, "serial", vec)

    m_old = _ld(st.m, ii)
    mnew = binary("max", m_old, _ld(stat, _c(0)))
    return seq(
        Store(stat, (_c(0),), _f(NEG_INF)),
        lanes(lambda v: Store(stat, (_c(0),), binary("max", _ld(stat, _c(0)), _ld(st.pmax, ii, v)))),
        Store(stat, (_c(1),), select(compare("==", mnew, _f(NEG_INF)), _f(0.0), mnew) if st.guard else mnew),
        Store(stat, (_c(2),), call("exp", binary("-", m_old, _ld(stat, _c(1))))),
        Store(st.m, (ii,), mnew),
        lanes(lambda v: Store(st.red, (v,), _f(0.0))),
        over(
            lambda j, jv: seq(
                Store(st.sc, (ii, j), _exp(binary("-", _ld(st.sc, ii, j), _ld(stat, _c(1))), floor)),
                Store(st.red, (jv,), binary("+", _ld(st.red, jv), _ld(st.sc, ii, j))),
            )
        ),
        Store(stat, (_c(3),), _f(0.0)),
        lanes(lambda v: Store(stat, (_c(3),), binary("+", _ld(stat, _c(3)), _ld(st.red, v)))),
        Store(st.l, (ii,), binary("+", binary("*", _ld(st.l, ii), _ld(stat, _c(2))), _ld(stat, _c(3)))),
        st.over_e(
            "rs_o",
            "rs_v",
            lambda e: Store(st.acc, (ii, e), binary("*", _ld(st.acc, ii, e), _ld(stat, _c(2)))),
        ),
    )


EXP_FLOOR = -87.0  # exp of it is 1.6e-38, still a normal float


def _exp(d: Expr, masked: bool) -> Expr:
    """``exp(d)`` of a score less the row max; where scores can be masked, exactly 0 below EXP_FLOOR.
    A masked score (-inf, or a large negative bias such as -3.4e38) would otherwise underflow inside
    exp, and denormal or underflowing results take microcode assists: 4 x 512 x 64 ran 3.4x slower
    with a quarter of its keys at -inf (23x with scores near -95) than unmasked, and causal 4 x 2048
    ~1.12x slower than with the floor in its diagonal blocks, one thread. Two vector ops per 16 scores
    (plain attention ran ~1.1x slower with them), so only in blocks whose scores may be -inf."""
    if not masked:
        return call("exp", d)
    floor = _f(EXP_FLOOR)
    return select(compare("<", d, floor), _f(0.0), call("exp", binary("max", d, floor)))


def store_row(st: RowState, ii: Expr, out: Buffer, index: tuple[Expr, Expr, Expr]) -> Stmt:
    """``out[index + (e,)] = acc[ii, e] / l[ii]`` over the value dim; ``index`` is (batch, head, query).
    With ``zero_rows``, a row that saw no key (l = 0, acc = 0) stores zeros."""
    total = _ld(st.l, ii)
    if st.zero_rows:
        total = select(compare("==", total, _f(0.0)), _f(1.0), total)
    return st.over_e("o_e", "o_v", lambda e: Store(out, (*index, e), binary("/", _ld(st.acc, ii, e), total)))
