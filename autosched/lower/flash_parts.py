"""Small builders of the flash-attention loop nest (:mod:`.flash`): loops, constants, the K^T pack."""

from __future__ import annotations

from collections.abc import Callable

from ..search_space.sketch_attention import LANES
from ..te.expr import Expr, Var, binary, const
from .ir import Buffer, For, Load, Stmt, Store


def _loop(name: str, extent: int, kind: str, body: Callable[[Var], Stmt]) -> Stmt:
    v = Var(name, "int32")
    return For(v, extent, kind, body(v))


def _c(v: int) -> Expr:
    return const(v, "int32")


def _f(v: float) -> Expr:
    return const(v, "float32")


def pack_transposed(k: Buffer, kt: Buffer, keys: int) -> Stmt:
    """``kt[a, b, j // T, d, j % T] = k[a, b, j, d]`` for tiles of ``T`` keys (a multiple of 16), 16 keys
    a vector, heads in parallel; the padding past the last key repeats it (its scores are masked to
    -inf)."""
    n0, n1, tiles, D, T = kt.shape
    lp = tiles * T

    def pack(f: Var) -> Stmt:
        a0, a1 = binary("//", f, _c(n1)), binary("%", f, _c(n1))

        def tile_body(t: Var) -> Stmt:
            def d_body(dd: Var) -> Stmt:
                def vec(jo: Var) -> Stmt:
                    def lane(jv: Var) -> Stmt:
                        jt = binary("+", binary("*", jo, _c(LANES)), jv)
                        j = binary("+", binary("*", t, _c(T)), jt)
                        jc = binary("min", j, _c(keys - 1)) if lp > keys else j
                        return Store(kt, (a0, a1, t, dd, jt), Load(k, (a0, a1, jc, dd), "float32"))

                    return _loop("pk_jv", LANES, "vectorized", lane)

                return _loop("pk_jo", T // LANES, "serial", vec)

            return _loop("pk_d", D, "serial", d_body)

        return _loop("pk_t", tiles, "serial", tile_body)

    return _loop("pk_h", n0 * n1, "parallel", pack)
