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
    """``kt[a, b, d, j] = k[a, b, j, d]``, 16 keys a vector, heads in parallel; the padding past the last
    key repeats it (its scores are masked to -inf)."""
    n0, n1, D, lp = kt.shape

    def pack(f: Var) -> Stmt:
        a0, a1 = binary("//", f, _c(n1)), binary("%", f, _c(n1))

        def jo_body(jo: Var) -> Stmt:
            def d_body(dd: Var) -> Stmt:
                def lane(jv: Var) -> Stmt:
                    j = binary("+", binary("*", jo, _c(LANES)), jv)
                    jc = binary("min", j, _c(keys - 1)) if lp > keys else j
                    return Store(kt, (a0, a1, dd, j), Load(k, (a0, a1, jc, dd), "float32"))

                return _loop("pk_jv", LANES, "vectorized", lane)

            return _loop("pk_d", D, "serial", d_body)

        return _loop("pk_jo", lp // LANES, "serial", jo_body)

    return _loop("pk_h", n0 * n1, "parallel", pack)
