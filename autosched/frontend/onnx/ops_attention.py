"""ONNX Attention (opsets 23-25): scaled dot-product attention as a few te stages.

Q, K, V in 3-d (heads folded into the hidden dim) or 4-d (B, heads, S, head size); grouped-query
heads; a past key/value cache; a bool or additive mask (shorter than the keys: padded); causal and
sliding-window masks aligned bottom-right; softcap; the four ``qk_matmul_output`` modes. Like ONNX's
reference, a row whose every key is masked gives zeros.
Graph fusion makes the whole attention one flash-attention task (:mod:`autosched.graph.attention`).
Where no row can be wholly masked (no mask input, padding lengths or window: plain or causal attention)
the softmax is topi's; otherwise it is topi's ``zero_row_softmax`` (a row of -inf gives zeros), whose
guards flash attention keeps: ``exp(x - (max == -inf ? 0 : max)) / (sum == 0 ? 1 : sum)``. ONNX's
reference decides a wholly masked row on the bias, not the scores: the same wherever Q and K are
finite (a finite score plus -inf is -inf), so no second row reduction over the bias is kept.
"""

from __future__ import annotations

import math
from typing import Any

from ... import te, topi
from ...topi.attention import zero_row_softmax
from ...topi.elementwise import broadcast_read
from .context import Node
from .registry import converter

NEG_INF = float("-inf")


def split_heads(x: Any, heads: int, name: str) -> Any:
    """(B, S, heads * d) -> (B, heads, S, d)."""
    b, s, hidden = x.shape
    d = hidden // heads
    return te.compute((b, heads, s, d), lambda bb, h, ss, dd: x[bb, ss, h * d + dd], name=name)


def attention(node: Node) -> list[Any]:
    q, k, v = (node.tensor(i) for i in range(3))
    three_d = q.ndim == 3
    if three_d:
        qh, kvh = node.attr("q_num_heads", 0), node.attr("kv_num_heads", 0)
        if not qh or not kvh:
            raise node.error("3-d Q, K, V need the q_num_heads and kv_num_heads attributes")
        q, k, v = (
            split_heads(q, qh, "q_heads"),
            split_heads(k, kvh, "k_heads"),
            split_heads(v, kvh, "v_heads"),
        )
    batch, heads, sq, hd = q.shape
    past = node.has(4)
    if past:
        k = topi.concatenate([node.tensor(4), k], axis=2, name="present_key")
        v = topi.concatenate([node.tensor(5), v], axis=2, name="present_value")
    kv_heads, skv, vd = k.shape[1], k.shape[2], v.shape[3]
    reps = heads // kv_heads
    scale = node.attr("scale", 0.0) or 1.0 / math.sqrt(hd)
    softcap = node.attr("softcap", 0.0)
    dtype = q.dtype

    r = te.reduce_axis((0, hd), name="d")

    def score_body(b: Any, h: Any, i: Any, j: Any) -> Any:
        kh = h // reps if reps > 1 else h
        # Q alone carries the scale (ONNX's reference scales Q and K by sqrt(scale) each: the same up to
        # rounding) so that K is read as it is, as flash attention packs it.
        return te.sum((q[b, h, i, r] * scale) * k[b, kh, j, r], axis=r)

    scores = te.compute((batch, heads, sq, skv), score_body, name="attention_scores")
    if softcap > 0:
        raw = scores
        scores = te.compute(
            raw.shape, lambda *i: te.tanh(raw[i] / softcap) * softcap, name="attention_softcap"
        )
    past_len = node.shape(4)[2] if past else 0
    if can_mask_a_row(node):
        bias = mask_bias(node, (batch, heads, sq, skv), past_len=past_len, dtype=dtype)
        with_bias = te.compute(scores.shape, lambda *i: scores[i] + bias[i], name="attention_biased")
        probs = zero_row_softmax(with_bias, name="attention_softmax")
    else:  # plain softmax: the graph fuses it with both products into one flash attention
        with_bias = scores
        if node.attr("is_causal", 0):  # the select at the top lets flash skip blocks above the diagonal
            neg_inf = te.const(NEG_INF, dtype)
            with_bias = te.compute(
                scores.shape,
                lambda b, h, i, j: te.if_then_else(j <= i + past_len, scores[b, h, i, j], neg_inf),
                name="attention_causal",
            )
        probs = topi.softmax(with_bias, axis=3, name="attention_softmax")
    rv = te.reduce_axis((0, skv), name="j")

    def out_body(b: Any, h: Any, i: Any, d: Any) -> Any:
        kh = h // reps if reps > 1 else h
        return te.sum(probs[b, h, i, rv] * v[b, kh, rv, d], axis=rv)

    y = te.compute((batch, heads, sq, vd), out_body, name="attention")
    if three_d:
        y4 = y
        y = te.compute(
            (batch, sq, heads * vd), lambda b, s, c: y4[b, c // vd, s, c % vd], name="attention_merge"
        )
    mode = node.attr("qk_matmul_output_mode", 0)
    qk_out = {2: with_bias, 3: probs}.get(mode, scores)
    return [y, k, v, qk_out]


def can_mask_a_row(node: Node) -> bool:
    """Whether some query may see no key at all: a mask input, padding lengths or a sliding window.

    A causal mask alone never does (key 0, or the past, is always visible)."""
    windows = node.attr("left_window_size", -1) >= 0 or node.attr("right_window_size", -1) >= 0
    return node.has(3) or node.has(6) or windows


def mask_bias(node: Node, shape: tuple[int, ...], past_len: int, dtype: str) -> Any:
    """The additive bias (0 or -inf, plus a float mask) of every (batch, head, query, key)."""
    batch, heads, sq, skv = shape
    mask = node.tensor(3) if node.has(3) else None
    is_bool = node.has(3) and node.dtype(3) == "bool"
    nonpad = node.tensor(6) if node.has(6) else None
    causal = bool(node.attr("is_causal", 0))
    left, right = node.attr("left_window_size", -1), node.attr("right_window_size", -1)
    zero, neg_inf = te.const(0.0, dtype), te.const(NEG_INF, dtype)

    def body(b: Any, h: Any, i: Any, j: Any) -> Any:
        allowed = []
        total: Any = zero
        if mask is not None:
            mlen = mask.shape[-1]
            padded = mlen < skv  # keys past the mask are masked; no test per score where none are
            jj = te.min(j, mlen - 1) if padded else j
            m = broadcast_read(mask, (b, h, i, jj)) if mask.ndim > 1 or mlen > 1 else mask[0]
            inside = j < mlen
            if is_bool:
                allowed.append(te.all(inside, m != 0) if padded else m != 0)
            else:
                total = te.if_then_else(inside, m, neg_inf) if padded else m
        offset: Any = past_len
        if nonpad is not None:
            offset = te.cast("int32", nonpad[b]) - sq
            allowed.append(j < te.cast("int32", nonpad[b]))
        if causal:
            allowed.append(j <= i + offset)
        if left >= 0:
            allowed.append(i + offset - j <= left)
        if right >= 0:
            allowed.append(j - (i + offset) <= right)
        if allowed:
            return te.if_then_else(te.all(*allowed), total, neg_inf)
        return total

    return te.compute(shape, body, name="attention_bias")


for _v in (23, 24, 25):
    converter("Attention", _v)(attention)
