"""Trigonometric ONNX ops and the cosine windows, from te arithmetic (te has no sin/cos intrinsics).

Sin and Cos reduce the argument by multiples of pi/2 (Cody-Waite: pi/2 in three parts, so the
reduction stays exact in float32 for the arguments models feed) and evaluate cephes' minimax
polynomials on [-pi/4, pi/4]; the quadrant picks which polynomial and sign. Atan uses cephes' two-step
reduction to [0, tan(pi/8)]; Tan, Asin and Acos follow from these. About 1e-7 relative error in
float32, within ONNX's node-test tolerance; float64 inputs get float32-grade accuracy.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import te
from .context import Node, Out, onnx_dtype, te_dtype
from .ops_elementwise import unary
from .ops_tensor import compute
from .registry import converter

PIO2_PARTS = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)  # sum: pi/2
TAN_3PI_8 = 2.414213562373095
TAN_PI_8 = 0.4142135623730950


def _poly(z: Any, coefficients: tuple[float, ...]) -> Any:
    acc: Any = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * z + c
    return acc


def _sin_small(r: Any) -> Any:
    z = r * r
    return r + r * z * _poly(z, (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1))


def _cos_small(r: Any) -> Any:
    z = r * r
    return (
        1.0 - 0.5 * z + z * z * _poly(z, (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2))
    )


def _quadrant(x: Any) -> tuple[Any, Any]:
    """``x = k * pi/2 + r`` with ``|r| <= pi/4``: (k mod 4, r)."""
    k = te.floor(x * (2.0 / math.pi) + 0.5)
    r = x - k * PIO2_PARTS[0] - k * PIO2_PARTS[1] - k * PIO2_PARTS[2]
    return te.cast("int64", k) % 4, r


def sin(x: Any) -> Any:
    q, r = _quadrant(x)
    s, c = _sin_small(r), _cos_small(r)
    return te.if_then_else(q == 0, s, te.if_then_else(q == 1, c, te.if_then_else(q == 2, -s, -c)))


def cos(x: Any) -> Any:
    q, r = _quadrant(x)
    s, c = _sin_small(r), _cos_small(r)
    return te.if_then_else(q == 0, c, te.if_then_else(q == 1, -s, te.if_then_else(q == 2, -c, s)))


def atan(x: Any) -> Any:
    a = te.abs(x)
    big, mid = a > TAN_3PI_8, a > TAN_PI_8
    # Reduce: a > tan(3pi/8) -> pi/2 + atan(-1/a); a > tan(pi/8) -> pi/4 + atan((a-1)/(a+1)).
    y0 = te.if_then_else(big, math.pi / 2, te.if_then_else(mid, math.pi / 4, 0.0))
    safe = te.max(a, 1e-30)  # the big branch only divides where a > 2.4; this keeps the other lanes finite
    t = te.if_then_else(big, -1.0 / safe, te.if_then_else(mid, (a - 1.0) / (a + 1.0), a))
    z = t * t
    p = _poly(z, (8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1))
    y = y0 + (p * z * t + t)
    return te.if_then_else(x < 0, -y, y)


def asin(x: Any) -> Any:
    # asin x = atan(x / sqrt(1 - x^2)); at |x| = 1 the quotient is +-inf and atan gives +-pi/2.
    return atan(x / te.sqrt(1.0 - x * x))


for _op, _fn in (
    ("Sin", sin),
    ("Cos", cos),
    ("Tan", lambda x: sin(x) / cos(x)),
    ("Atan", atan),
    ("Asin", asin),
    ("Acos", lambda x: math.pi / 2 - asin(x)),
):
    unary(_op, 7, lambda node, x, f=_fn: f(x))


def window(node: Node, terms: tuple[tuple[float, int], ...]) -> Out:
    """``sum(c * cos(k * 2 pi n / N))`` over ``terms`` (c, k): Hann, Hamming and Blackman windows."""
    size = int(np.asarray(node.const(0, "size")).reshape(-1)[0])
    span = size if node.attr("periodic", 1) else size - 1
    dtype = onnx_dtype(node.attr("output_datatype", 1), f"node {node.name!r}: output_datatype")

    def body(n: Any) -> Any:
        phase = te.cast("float32", n) * (2.0 * math.pi / span)
        value: Any = None
        for c, k in terms:
            term = c if k == 0 else c * cos(phase * float(k))
            value = term if value is None else value + term
        return te.cast(te_dtype(dtype), value)

    return compute(node, (size,), body, dtype, name=node.op_type.lower())


_HAMMING_ALPHA = 25.0 / 46.0
converter("HannWindow", 17)(lambda node: window(node, ((0.5, 0), (-0.5, 1))))
converter("HammingWindow", 17)(lambda node: window(node, ((_HAMMING_ALPHA, 0), (_HAMMING_ALPHA - 1.0, 1))))
converter("BlackmanWindow", 17)(lambda node: window(node, ((0.42, 0), (-0.5, 1), (0.08, 2))))


def turns(m: Any, span: int, dtype: str) -> tuple[Any, Any]:
    """(cos, sin) of ``2 pi m / span`` for an integer ``m``, the quadrant found in integers.

    ``4m = q span + rem`` with ``|rem| <= span / 2``: the angle is ``q`` quarter turns plus
    ``rem pi / (2 span)`` in [-pi/4, pi/4], so sin(pi) and cos(pi/2) come out exactly 0.
    """
    q = (8 * m + span) // (2 * span)
    r = te.cast(dtype, 4 * m - q * span) * (math.pi / (2 * span))
    quadrant = q % 4
    s, c = _sin_small(r), _cos_small(r)
    sin_v = te.if_then_else(
        quadrant == 0, s, te.if_then_else(quadrant == 1, c, te.if_then_else(quadrant == 2, -s, -c))
    )
    cos_v = te.if_then_else(
        quadrant == 0, c, te.if_then_else(quadrant == 1, -s, te.if_then_else(quadrant == 2, -c, s))
    )
    return cos_v, sin_v


def dft(node: Node, axis: int, length: int | None) -> Out:
    """``X[k] = sum_n x[n] e^(-+2 pi i k n / L)`` along ``axis``; the last dim holds (real[, imag])."""
    shape = node.shape(0)
    x = node.tensor(0)
    inverse, onesided = bool(node.attr("inverse", 0)), bool(node.attr("onesided", 0))
    if inverse and onesided:
        raise node.error("inverse with onesided=1 (a real inverse transform) is not supported")
    n_in = shape[axis]
    span = length or n_in
    n_out = span // 2 + 1 if onesided else span
    taps = min(span, n_in)  # dft_length pads the signal with zeros or cuts it
    r = te.reduce_axis((0, taps), name="n")
    complex_in = shape[-1] == 2
    sign = 1.0 if inverse else -1.0
    zero = te.const(0.0, x.dtype)

    def part(*i: Any) -> Any:
        k, comp = i[axis], i[-1]
        c, s = turns(k * r, span, x.dtype)
        s = sign * s
        at = (*i[:axis], r, *i[axis + 1 : -1])
        re_ = x[(*at, 0)]
        im = x[(*at, 1)] if complex_in else zero
        # (re + i im)(c + i s) = (re c - im s) + i (re s + im c)
        value = te.if_then_else(comp == 0, re_ * c - im * s, re_ * s + im * c)
        return te.sum(value, axis=r)

    out_shape = (*shape[:axis], n_out, *shape[axis + 1 : -1], 2)
    total = compute(node, out_shape, part, name="dft")
    if not inverse:
        return total
    t = total.tensor
    return compute(node, out_shape, lambda *i: t[i] / float(span), name="idft")


@converter("DFT", since=17)
def dft_v17(node: Node) -> Out:
    length = int(node.const(1, "dft_length").reshape(-1)[0]) if node.has(1) else None
    return dft(node, node.axis(node.attr("axis", 1), len(node.shape(0))), length)


@converter("DFT", since=20)
def dft_v20(node: Node) -> Out:
    length = int(node.const(1, "dft_length").reshape(-1)[0]) if node.has(1) else None
    axis = int(node.const(2, "axis").reshape(-1)[0]) if node.has(2) else -2
    return dft(node, node.axis(axis, len(node.shape(0))), length)
