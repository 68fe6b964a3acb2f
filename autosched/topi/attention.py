"""Scaled dot-product attention over (batch, heads, seq, dim) tensors."""

from __future__ import annotations

import math
from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_float, check_same_dtype, check_tensor
from .index import named
from .norm import softmax


def scaled_dot_product_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    scale: float | None = None,
    causal: bool = False,
    name: str = "attention",
    mask: Tensor | None = None,
) -> Tensor:
    """``softmax(q @ k^T * scale) @ v`` per batch and head; ``scale`` defaults to ``1 / sqrt(dim)``.

    q (B, H, S, D), k (B, Hkv, L, D), v (B, Hkv, L, Dv) -> (B, H, S, Dv); with Hkv < H (grouped-query
    or multi-query attention) query head h reads K/V head ``h // (H // Hkv)``. ``mask``: an optional
    additive (B, H, S, L) float tensor added to the scaled scores (-inf hides a key).
    Stages: "<name>_qk" (the product),
    "<name>_scale" (scaling, and with ``causal`` the mask: query i sees keys j <= i + L - S), the four
    softmax stages, and "<name>" (the product with v).
    Example: ``scaled_dot_product_attention(Q, K, V, causal=True)``.
    """
    fn = "scaled_dot_product_attention"
    check_tensor(fn, "q", q, 4, "B, H, S, D")
    check_tensor(fn, "k", k, 4, "B, H, L, D")
    check_tensor(fn, "v", v, 4, "B, H, L, Dv")
    check_same_dtype(fn, q=q, k=k, v=v)
    check_float(fn, "q", q)
    B, H, S, D = q.shape
    hkv = k.shape[1]
    if k.shape[0] != B or v.shape[:2] != k.shape[:2] or hkv < 1 or H % hkv:
        raise ValueError(
            f"{fn}: k and v need q's batch and a number of heads dividing q's: q is {q.shape}, "
            f"k is {k.shape}, v is {v.shape}"
        )
    reps = H // hkv
    L = k.shape[2]
    if k.shape[3] != D:
        raise ValueError(f"{fn}: k has dim {k.shape[3]}, q has {D}; they must match")
    if v.shape[2] != L:
        raise ValueError(f"{fn}: v has {v.shape[2]} keys, k has {L}; they must match")
    if causal and L < S:
        raise ValueError(f"{fn}: causal needs at least as many keys as queries, got L={L} < S={S}")
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"{fn}: scale must be a number, got {type(scale).__name__}")
    scale = float(scale)
    if mask is not None:
        check_tensor(fn, "mask", mask, 4, "B, H, S, L")
        check_same_dtype(fn, q=q, mask=mask)
        if mask.shape != (B, H, S, L):
            raise ValueError(f"{fn}: mask has shape {mask.shape}, expected (B, H, S, L) = {(B, H, S, L)}")

    def kv_head(h: Any) -> Any:
        return h // reps if reps > 1 else h

    d = te.reduce_axis((0, D), name="d")
    qk = te.compute(
        (B, H, S, L),
        lambda b, h, i, j: te.sum(q[b, h, i, d] * k[b, kv_head(h), j, d], axis=d),
        name=f"{name}_qk",
    )

    def scaled(b: Any, h: Any, i: Any, j: Any) -> Any:
        s = qk[b, h, i, j] * scale
        if mask is not None:
            s = s + mask[b, h, i, j]
        # -inf, not a large negative number: exp gives exactly 0, and every row keeps key 0 unmasked.
        return te.if_then_else(j <= i + (L - S), s, -math.inf) if causal else s

    scores = te.compute((B, H, S, L), scaled, name=f"{name}_scale")
    soft = zero_row_softmax if mask is not None else softmax
    probs = soft(scores, axis=-1, name=f"{name}_softmax")
    kv = te.reduce_axis((0, L), name="kv")
    return te.compute(
        (B, H, S, v.shape[3]),
        lambda b, h, i, e: te.sum(probs[b, h, i, kv] * v[b, kv_head(h), kv, e], axis=kv),
        name=name,
    )


def zero_row_softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    """Softmax over the last axis where a row whose every value is -inf gives zeros, not NaN.

    ONNX's reference writes it so: ``m = max x``, ``e = exp(x - (m == -inf ? 0 : m))``, ``s = sum e``,
    ``p = e / (s == 0 ? 1 : s)``; a row with a finite value has ``s >= 1``, so elsewhere it is the plain
    softmax. Stages named as :func:`~.norm.softmax`'s ("<name>_maxelem", "_exp", "_expsum", "_norm"), and
    flash attention takes the guarded form too. Example: ``zero_row_softmax(masked_scores)``.
    """
    fn = "zero_row_softmax"
    check_tensor(fn, "x", x)
    check_float(fn, "x", x)
    if axis not in (-1, x.ndim - 1):
        raise ValueError(f"{fn}: only the last axis is supported, got axis={axis} for a {x.ndim}-d x")
    *lead, n = x.shape
    rows, names = [f"i{d}" for d in range(len(lead))], [f"i{d}" for d in range(x.ndim)]
    zero, one, neg_inf = (te.const(c, x.dtype) for c in (0.0, 1.0, -math.inf))
    k1 = te.reduce_axis((0, n), name="k")
    row_max = te.compute(
        tuple(lead), named(lambda *i: te.max(x[(*i, k1)], axis=k1), rows), name=f"{name}_maxelem"
    )

    def exp_body(*i: Any) -> Any:
        m = row_max[i[:-1]]
        return te.exp(x[i] - te.if_then_else(m == neg_inf, zero, m))

    exps = te.compute(x.shape, named(exp_body, names), name=f"{name}_exp")
    k2 = te.reduce_axis((0, n), name="k")
    total = te.compute(
        tuple(lead), named(lambda *i: te.sum(exps[(*i, k2)], axis=k2), rows), name=f"{name}_expsum"
    )

    def norm_body(*i: Any) -> Any:
        s = total[i[:-1]]
        return exps[i] / te.if_then_else(s == zero, one, s)

    return te.compute(x.shape, named(norm_body, names), name=f"{name}_norm")
