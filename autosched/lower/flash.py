"""Lowering of a ``flash_attention`` step: one blocked loop nest with an online softmax.

For each (batch, head, block of ``bq`` queries), in parallel::

    Qp = the block's queries (zero rows past the end)
    m = -inf, l = 0, acc = 0                                 per query row
    for each key block (skipped when wholly above the causal diagonal):
        for each 16*cols keys, for each rows queries:  (the K^T tile stays in L1 over the rows)
            Sc = X(Qp @ Kt)            a rows x 16*cols register tile, K packed transposed up front;
                                       the rows' running maxima taken from it in 16 lanes
        for each pv_rows queries:
            per row: mnew = max(m, block max); p = exp(Sc - mnew); alpha = exp(m - mnew)
                     l = l * alpha + sum p;  acc *= alpha;  m = mnew
            acc += P @ V[block]        a pv_rows x pv_cols-vector register tile over the value dim
    out = acc / l

Causal: a key block wholly visible from the query block's first row is the plain body (no select,
no per-key test); in a block across the diagonal, score tiles above it are filled with -inf without
products and P @ V stops at a row tile's last visible key; blocks wholly above it are skipped.
``X`` is the scores stage's own expression (scale, causal select, additive mask) evaluated per score,
so the result is the te program's up to rounding. The key tail (L not a multiple of ``bk``) is a
separate, shorter copy of the block body whose padded keys score -inf; query rows past S compute on
zeros and are not stored. Buffers: Kt (the size of K) and per thread O(bq * (bk + D + E)); nothing
L x L. Other stages of the program are lowered as usual, around it. The per-row softmax state (m, l,
acc) is built by :mod:`.flash_rows`, the loop helpers and the K^T pack by :mod:`.flash_parts`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ScheduleError
from ..search_space.schedule import Schedule
from ..search_space.sketch_attention import LANES, FlashConfig, shape_of, value_lanes
from ..te.expr import Binary, Expr, Select, Var, binary, compare, select
from ..te.tensor import ComputeOp, Reduce, Tensor, TensorRead
from ..te.visit import rewrite, substitute
from .flash_parts import _c, _f, _loop, pack_transposed
from .flash_rows import NEG_INF, RowState, init_row, online_softmax_row, store_row
from .ir import Allocate, Buffer, IfThenElse, Load, PrimFunc, Stmt, Store, seq
from .schedule_ops import Lowerer


class FlashLowerer(Lowerer):
    """The usual lowering, except that each flash attention's seven stages become one nest."""

    def run(self) -> PrimFunc:
        self.inline_bodies()
        self.infer_bounds()
        self.make_buffers()
        members: dict[str, str] = {}
        for out, cfg in self.sch.flash.items():
            for name in cfg.pattern.members:
                st = self.sch[name]
                if st.attach[0] != "root" or (name in self.arg_stages and name != out):
                    raise ScheduleError(f"flash_attention: member stage {name!r} must stay a root stage")
                members[name] = out
            if self.sch[cfg.pattern.k_stage].attach[0] != "root":
                raise ScheduleError(f"flash_attention: K stage {cfg.pattern.k_stage!r} must not be inlined")
        stmts: list[Stmt] = []
        for st in self.order:
            if not st.is_compute or st.attach[0] != "root":
                continue
            if st.name in self.sch.flash:
                stmts.append(self.emit_flash(self.sch.flash[st.name]))
            elif st.name not in members:
                stmts.append(self.emit_stage(st))
        body = seq(*stmts)
        for st in reversed(self.order):
            info = self.info[st.name]
            if st.is_compute and st.name not in self.arg_stages and st.attach[0] == "root":
                if st.name in members and st.name not in self.sch.flash:
                    continue
                assert info.buffer is not None
                body = Allocate(info.buffer, body)
        return PrimFunc(self.name, tuple(self.params), body)

    # The pieces of the pattern, from the inlined bodies -----------------------------------------
    def _factors(self, cfg: FlashConfig) -> tuple[ComputeOp, Reduce, Expr, TensorRead, ComputeOp, Expr]:
        p = cfg.pattern
        qk = self.sch[p.qk].op
        out = self.sch[p.out].op
        assert isinstance(qk, ComputeOp) and isinstance(out, ComputeOp)
        qk_body = self.info[p.qk].body
        out_body = self.info[p.out].body
        assert isinstance(qk_body, Reduce) and isinstance(qk_body.source, Binary)
        assert isinstance(out_body, Reduce) and isinstance(out_body.source, Binary)
        a, b = qk_body.source.a, qk_body.source.b
        qf, kf = (a, b) if p.q_first else (b, a)
        if not isinstance(kf, TensorRead) or self.sch.stage_of(kf.tensor.op).name != p.k_stage:
            raise ScheduleError(f"flash_attention: K of {p.out!r} must be read directly from {p.k_stage!r}")
        probs_op = self.sch[p.probs].op
        pa, pb = out_body.source.a, out_body.source.b
        vf = pb if isinstance(pa, TensorRead) and pa.tensor.op is probs_op else pa
        return qk, qk_body, qf, kf, out, vf

    def emit_flash(self, cfg: FlashConfig) -> Stmt:
        p = cfg.pattern
        B, H, S, L, D, E = shape_of(self.sch, p)
        bq, bk, r, c, rp, pc = cfg.block_q, cfg.block_k, cfg.rows, cfg.cols, cfg.pv_rows, cfg.pv_cols
        w = value_lanes(E)
        tile = LANES * c
        qk, qk_body, qf, kf, out, vf = self._factors(cfg)
        xop = self.sch[p.scores].op
        assert isinstance(xop, ComputeOp)
        x_body = self.info[p.scores].body
        assert x_body is not None
        # the scores where the causal select holds: what a block below the diagonal evaluates
        visible_body = x_body.t if p.causal_offset is not None and isinstance(x_body, Select) else x_body
        kinfo = self.info[p.k_stage]
        kbuf = kinfo.buffer
        assert kbuf is not None and len(kbuf.shape) == 4
        nfull, tail = divmod(L, bk)
        tail_cols = -(-tail // tile) * tile
        lp = nfull * bk + tail_cols
        n0, n1 = kbuf.shape[0], kbuf.shape[1]
        # K^T in tiles of 16*cols keys: a score tile's D x tile panel is contiguous (rows of all keys
        # were 4*L bytes apart, so the panel's D lines fell in the same few L1 sets and missed)
        kt = Buffer(f"{p.out}.kt", (n0, n1, lp // tile, D, tile), "float32", "global")
        nqb = -(-S // bq)
        wd = value_lanes(D)

        pack_nest = pack_transposed(kbuf, kt, L)  # keys contiguous: a score tile's lanes are 16 keys

        qp = Buffer(f"{p.out}.q", (bq, D), "float32", "local")
        acc = Buffer(f"{p.out}.acc", (bq, E), "float32", "local")
        mrow = Buffer(f"{p.out}.m", (bq,), "float32", "local")
        lrow = Buffer(f"{p.out}.l", (bq,), "float32", "local")
        sc = Buffer(f"{p.out}.s", (bq, bk), "float32", "local")
        red = Buffer(f"{p.out}.red", (LANES,), "float32", "local")
        pmax = Buffer(f"{p.out}.pmax", (bq, LANES), "float32", "local")
        stat = Buffer(f"{p.out}.stat", (4,), "float32", "local")
        tt = Buffer(f"{p.out}.tile", (r, tile), "float32", "local")
        at = Buffer(f"{p.out}.ptile", (rp, w * pc), "float32", "local")
        locals_ = (qp, acc, mrow, lrow, sc, red, pmax, stat, tt, at)
        state = RowState(acc, mrow, lrow, sc, pmax, red, stat, E, w, p.hides_rows, p.zero_rows)
        obuf = self.info[p.out].buffer
        assert obuf is not None
        causal = p.causal_offset
        qaxes = qk.axis
        xaxes = xop.axis
        oaxes = out.axis
        kv_axis = out.reduce_axis[0]
        d_axis = qk.reduce_axis[0]

        def body(t: Var) -> Stmt:
            b = binary("//", t, _c(H * nqb))
            h = binary("%", binary("//", t, _c(nqb)), _c(H))
            qb = binary("%", t, _c(nqb))
            q0 = binary("*", qb, _c(bq))

            def row(ii: Expr) -> Expr:
                return binary("+", q0, ii)

            # Q block, zero rows past S.
            def q_row(ii: Var) -> Stmt:
                i = row(ii)

                def fill(zero: bool) -> Stmt:
                    def dvec(do: Var) -> Stmt:
                        def lane(dv: Var) -> Stmt:
                            dd = binary("+", binary("*", do, _c(wd)), dv)
                            val = (
                                _f(0.0)
                                if zero
                                else self._expr(qf, {qaxes[0]: b, qaxes[1]: h, qaxes[2]: i, d_axis: dd})
                            )
                            return Store(qp, (ii, dd), val)

                        return _loop("qd_v", wd, "vectorized", lane)

                    return _loop("qd_o", D // wd, "serial", dvec)

                if S % bq == 0:
                    return fill(False)
                return IfThenElse(compare("<", i, _c(S)), fill(False), fill(True))

            def block(kb: Expr, cols: int, keys: int, masked: bool) -> Stmt:
                """One key block; ``masked``: it may hold keys above the causal diagonal."""
                k0 = binary("*", kb, _c(bk))
                score_body = x_body if masked else visible_body

                # Scores: Sc[i, j] = X(sum_d Qp[i, d] * Kt[d, j]) in register tiles.
                def qk_tiles(jo: Var) -> Stmt:
                    def io_tiles(io: Var) -> Stmt:
                        def tile_nest(fn: Callable[[Var, Var, Var], Stmt]) -> Stmt:
                            return _loop(
                                "tr",
                                r,
                                "unrolled",
                                lambda ri: _loop(
                                    "tc",
                                    c,
                                    "unrolled",
                                    lambda ci: _loop("tv", LANES, "vectorized", lambda jv: fn(ri, ci, jv)),
                                ),
                            )

                        def col(ci: Var, jv: Var) -> Expr:
                            return binary("+", binary("*", ci, _c(LANES)), jv)

                        zero = tile_nest(lambda ri, ci, jv: Store(tt, (ri, col(ci, jv)), _f(0.0)))

                        def fma(dd: Var) -> Stmt:
                            e0, e1 = (self._expr(x, {qaxes[0]: b, qaxes[1]: h}) for x in kf.indices[:2])

                            def upd(ri: Var, ci: Var, jv: Var) -> Stmt:
                                qi = binary("+", binary("*", io, _c(r)), ri)
                                kt_tile = binary("+", binary("*", kb, _c(bk // tile)), jo)
                                kv = Load(kt, (e0, e1, kt_tile, dd, col(ci, jv)), "float32")
                                prod = binary("*", Load(qp, (qi, dd), "float32"), kv)
                                cur = Load(tt, (ri, col(ci, jv)), "float32")
                                return Store(tt, (ri, col(ci, jv)), binary("+", cur, prod))

                            return tile_nest(upd)

                        def epilogue(ri: Var, ci: Var, jv: Var) -> Stmt:
                            ii = binary("+", binary("*", io, _c(r)), ri)
                            jj = binary("+", binary("*", jo, _c(tile)), col(ci, jv))
                            i, j = row(ii), binary("+", k0, jj)
                            ic = binary("min", i, _c(S - 1)) if S % bq else i
                            jc = binary("min", j, _c(L - 1)) if keys < cols else j
                            s = self._score(
                                score_body, xaxes, p.qk, b, h, ic, jc, Load(tt, (ri, col(ci, jv)), "float32")
                            )
                            if keys < cols:
                                s = select(compare("<", j, _c(L)), s, _f(NEG_INF))
                            # the row's running maximum, 16 lanes wide, taken while the tile is in registers
                            top = binary(
                                "max", Load(pmax, (ii, jv), "float32"), Load(sc, (ii, jj), "float32")
                            )
                            return seq(Store(sc, (ii, jj), s), Store(pmax, (ii, jv), top))

                        nest = seq(zero, _loop("qk_d", D, "serial", fma), tile_nest(epilogue))
                        if causal is None or not masked:
                            return nest
                        # a tile wholly above the diagonal: no products, its scores are -inf
                        first_key = binary("+", k0, binary("*", jo, _c(tile)))
                        last_row = binary("+", q0, binary("+", binary("*", io, _c(r)), _c(r - 1 + causal)))
                        hidden = tile_nest(
                            lambda ri, ci, jv: Store(
                                sc,
                                (
                                    binary("+", binary("*", io, _c(r)), ri),
                                    binary("+", binary("*", jo, _c(tile)), col(ci, jv)),
                                ),
                                _f(NEG_INF),
                            )
                        )
                        return IfThenElse(compare("<=", first_key, last_row), nest, hidden)

                    return _loop("qk_i", bq // r, "serial", io_tiles)  # a K^T tile stays in L1 over the rows

                # acc += P @ V, pv_rows x pv_cols vectors in registers across the block's keys.
                def pv_tiles(io: Var) -> Stmt:
                    def eo_tiles(eo: Var) -> Stmt:
                        def tile_nest(fn: Callable[[Var, Var, Var], Stmt]) -> Stmt:
                            return _loop(
                                "pr",
                                rp,
                                "unrolled",
                                lambda ri: _loop(
                                    "pc",
                                    pc,
                                    "unrolled",
                                    lambda ci: _loop("pv", w, "vectorized", lambda ev: fn(ri, ci, ev)),
                                ),
                            )

                        def where(ri: Var, ci: Var, ev: Var) -> tuple[Expr, Expr, Expr]:
                            ii = binary("+", binary("*", io, _c(rp)), ri)
                            col = binary("+", binary("*", ci, _c(w)), ev)
                            e = binary("+", binary("*", eo, _c(w * pc)), col)
                            return ii, col, e

                        def load_acc(ri: Var, ci: Var, ev: Var) -> Stmt:
                            ii, col, e = where(ri, ci, ev)
                            return Store(at, (ri, col), Load(acc, (ii, e), "float32"))

                        def save_acc(ri: Var, ci: Var, ev: Var) -> Stmt:
                            ii, col, e = where(ri, ci, ev)
                            return Store(acc, (ii, e), Load(at, (ri, col), "float32"))

                        def per_key(jj: Var) -> Stmt:
                            kvj = binary("+", k0, jj)

                            def upd(ri: Var, ci: Var, ev: Var) -> Stmt:
                                ii, col, e = where(ri, ci, ev)
                                vv = self._expr(vf, {oaxes[0]: b, oaxes[1]: h, kv_axis: kvj, oaxes[3]: e})
                                prod = binary("*", Load(sc, (ii, jj), "float32"), vv)
                                return Store(at, (ri, col), binary("+", Load(at, (ri, col), "float32"), prod))

                            if causal is None or not masked:
                                return tile_nest(upd)
                            # keys past the row tile's last visible one have P = 0: skipped
                            last = binary("+", q0, binary("+", binary("*", io, _c(rp)), _c(rp - 1 + causal)))
                            return IfThenElse(compare("<=", kvj, last), tile_nest(upd))

                        return seq(
                            tile_nest(load_acc), _loop("pv_j", keys, "serial", per_key), tile_nest(save_acc)
                        )

                    return _loop("pv_e", E // (w * pc), "serial", eo_tiles)

                # exp's floor where this block's scores may be -inf: a mask, the causal diagonal, padded keys
                floor = p.hides_rows or masked or keys < cols

                def rows_then_pv(io: Var) -> Stmt:  # a row tile's probabilities, then at once its P @ V
                    rows = _loop(
                        "sm_r",
                        rp,
                        "unrolled",
                        lambda ri: online_softmax_row(
                            state, binary("+", binary("*", io, _c(rp)), ri), cols, floor
                        ),
                    )
                    return seq(rows, pv_tiles(io))

                init_max = _loop(
                    "mx_i",
                    bq,
                    "serial",
                    lambda ii: _loop(
                        "mx_v", LANES, "vectorized", lambda v: Store(pmax, (ii, v), _f(NEG_INF))
                    ),
                )
                stmt = seq(
                    init_max,
                    _loop("qk_j", cols // tile, "serial", qk_tiles),
                    _loop("pv_i", bq // rp, "serial", rows_then_pv),
                )
                if causal is not None and masked:  # a key block wholly above the diagonal is skipped
                    last_visible = binary("+", q0, _c(bq - 1 + causal))
                    stmt = IfThenElse(compare("<=", k0, last_visible), stmt)
                return stmt

            def full_block(kb: Var) -> Stmt:
                if causal is None:
                    return block(kb, bk, bk, False)
                # below the diagonal for the block's first query: no select, no skipped tiles or keys
                below = compare(
                    "<=", binary("+", binary("*", kb, _c(bk)), _c(bk - 1)), binary("+", q0, _c(causal))
                )
                return IfThenElse(below, block(kb, bk, bk, False), block(kb, bk, bk, True))

            def store(ii: Var) -> Stmt:
                nest = store_row(state, ii, obuf, (b, h, row(ii)))
                return nest if S % bq == 0 else IfThenElse(compare("<", row(ii), _c(S)), nest)

            parts = [
                _loop("q_i", bq, "serial", q_row),
                _loop("init_i", bq, "serial", lambda ii: init_row(state, ii)),
            ]
            if nfull:
                parts.append(_loop("kb", nfull, "serial", full_block))
            if tail:
                parts.append(block(_c(nfull), tail_cols, tail, causal is not None))
            parts.append(_loop("out_i", bq, "serial", store))
            stmt = seq(*parts)
            for buf in reversed(locals_):
                stmt = Allocate(buf, stmt)
            return stmt

        main = _loop("flash_t", B * H * nqb, "parallel", body)
        return Allocate(kt, seq(pack_nest, main))

    def _expr(self, e: Expr, mapping: dict) -> Expr:
        """``e`` (an inlined te expression) at the given axis values, its reads as loads."""
        return rewrite(substitute(e, mapping), self.load)

    def _score(
        self, x_body: Expr, axes: tuple, qk_name: str, b: Expr, h: Expr, i: Expr, j: Expr, value: Expr
    ) -> Expr:
        """The scores stage's expression at (b, h, i, j) with its read of QK replaced by ``value``."""
        e = substitute(x_body, dict(zip(axes, (b, h, i, j))))

        def swap(x: Expr) -> Expr | None:
            if isinstance(x, TensorRead) and self.sch.stage_of(x.tensor.op).name == qk_name:
                return value
            return self.load(x)

        return rewrite(e, swap)


def flash_to_loops(sch: Schedule, args: list[Tensor], name: str) -> PrimFunc:
    """:func:`~.schedule_ops.schedule_to_loops` for a schedule with flash attentions."""
    return FlashLowerer(sch, args, name).run()
