"""Convolutions in channels-first layouts: conv1d/2d/3d (with groups), depthwise and transposed conv2d.

Padding is its own "pad" compute guarded by te.if_then_else (as in TVM), so the convolution itself
reads in bounds everywhere and a scheduler may inline or materialize the padding.
"""

from __future__ import annotations

from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_int, check_ints, check_padding, check_same_dtype, check_tensor
from .index import named, offset, scaled
from .transform import pad

SPATIAL = {1: ("W",), 2: ("H", "W"), 3: ("D", "H", "W")}
KERNEL = {1: ("S",), 2: ("R", "S"), 3: ("T", "R", "S")}
OUT_AXES = {1: ("xx",), 2: ("yy", "xx"), 3: ("zz", "yy", "xx")}
REDUCE_AXES = {1: ("rx",), 2: ("ry", "rx"), 3: ("rz", "ry", "rx")}


def out_size(fn: str, size: int, k: int, stride: int, before: int, after: int, dilation: int) -> int:
    """The output length of one spatial dim; raises when the (dilated) kernel does not fit."""
    span = dilation * (k - 1) + 1
    if size + before + after < span:
        raise ValueError(
            f"{fn}: kernel of extent {span} (size {k}, dilation {dilation}) is larger than the padded "
            f"input ({size} + {before} + {after})"
        )
    return (size + before + after - span) // stride + 1


def pad_spatial(data: Tensor, before: tuple[int, ...], after: tuple[int, ...], value: float = 0.0) -> Tensor:
    """Pad the trailing spatial dims of a channels-first tensor; no stage at all when nothing pads."""
    if not any(before) and not any(after):
        return data
    lead = (0,) * (data.ndim - len(before))
    return pad(data, lead + before, lead + after, pad_value=value)


def _conv_nd(
    fn: str,
    n: int,
    data: Tensor,
    weight: Tensor,
    stride: Any,
    padding: Any,
    dilation: Any,
    groups: int,
    name: str,
) -> Tensor:
    sp, ks = SPATIAL[n], KERNEL[n]
    check_tensor(fn, "data", data, n + 2, ", ".join(("N", "C", *sp)))
    check_tensor(fn, "weight", weight, n + 2, ", ".join(("K", "C/groups", *ks)))
    check_same_dtype(fn, data=data, weight=weight)
    strides = check_ints(fn, "stride", stride, n, minimum=1)
    dils = check_ints(fn, "dilation", dilation, n, minimum=1)
    before, after = check_padding(fn, padding, n)
    check_int(fn, "groups", groups, minimum=1)
    N, C, *in_sp = data.shape
    K, Cg, *kern = weight.shape
    if C % groups:
        raise ValueError(f"{fn}: groups={groups} does not divide the {C} input channels")
    if K % groups:
        raise ValueError(f"{fn}: groups={groups} does not divide the {K} output channels")
    if Cg != C // groups:
        raise ValueError(
            f"{fn}: weight has {Cg} input channels per group, expected C/groups = "
            f"{C}/{groups} = {C // groups}"
        )
    outs = tuple(out_size(fn, *args) for args in zip(in_sp, kern, strides, before, after, dils, strict=True))
    padded = pad_spatial(data, before, after)
    Kg = K // groups
    rc = te.reduce_axis((0, Cg), name="rc")
    rs = [te.reduce_axis((0, k), name=nm) for k, nm in zip(kern, REDUCE_AXES[n], strict=True)]

    def body(nn: Any, ff: Any, *pos: Any) -> Any:
        chan = rc if groups == 1 else (ff // Kg) * Cg + rc
        src = tuple(scaled(p, s) + scaled(r, d) for p, s, r, d in zip(pos, strides, rs, dils, strict=True))
        return te.sum(padded[(nn, chan, *src)] * weight[(ff, rc, *rs)], axis=[rc, *rs])

    return te.compute((N, K, *outs), named(body, ("nn", "ff", *OUT_AXES[n])), name=name)


def conv1d(
    data: Tensor, weight: Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
    name: str = "conv1d",
) -> Tensor:  # fmt: skip
    """1-d convolution: data (N, C, W), weight (K, C/groups, S) -> (N, K, W_out).

    Example: ``conv1d(x, w, stride=2, padding=1)``.
    """
    return _conv_nd("conv1d", 1, data, weight, stride, padding, dilation, groups, name)


def conv2d(
    data: Tensor, weight: Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
    name: str = "conv2d",
) -> Tensor:  # fmt: skip
    """2-d convolution NCHW: data (N, C, H, W), weight (K, C/groups, R, S) -> (N, K, H_out, W_out).

    ``stride``/``dilation`` are an int or (h, w); ``padding`` an int, (h, w) or (top, left, bottom, right).
    Example: ``conv2d(x, w, stride=2, padding=1, dilation=1, groups=2)``.
    """
    return _conv_nd("conv2d", 2, data, weight, stride, padding, dilation, groups, name)


def conv3d(
    data: Tensor, weight: Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
    name: str = "conv3d",
) -> Tensor:  # fmt: skip
    """3-d convolution NCDHW: data (N, C, D, H, W), weight (K, C/groups, T, R, S).

    Example: ``conv3d(x, w, padding=1)``.
    """
    return _conv_nd("conv3d", 3, data, weight, stride, padding, dilation, groups, name)


def depthwise_conv2d(
    data: Tensor, weight: Tensor, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
    name: str = "depthwise_conv2d",
) -> Tensor:  # fmt: skip
    """Depthwise NCHW conv, TVM layout: weight (C, M, R, S) -> (N, C*M, H_out, W_out).

    Output channel ``c * M + m`` convolves input channel ``c`` with ``weight[c, m]``.
    Example: ``depthwise_conv2d(x, w, stride=1, padding=1)``.
    """
    fn = "depthwise_conv2d"
    check_tensor(fn, "data", data, 4, "N, C, H, W")
    check_tensor(fn, "weight", weight, 4, "C, M, R, S")
    check_same_dtype(fn, data=data, weight=weight)
    strides = check_ints(fn, "stride", stride, 2, minimum=1)
    dils = check_ints(fn, "dilation", dilation, 2, minimum=1)
    before, after = check_padding(fn, padding, 2)
    N, C, H, W = data.shape
    Cw, M, R, S = weight.shape
    if Cw != C:
        raise ValueError(f"{fn}: weight has {Cw} channels, data has {C}; expected weight (C, M, R, S)")
    oh, ow = (out_size(fn, *args) for args in zip((H, W), (R, S), strides, before, after, dils, strict=True))
    padded = pad_spatial(data, before, after)
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")
    (sh, sw), (dh, dw) = strides, dils

    def body(nn: Any, cc: Any, yy: Any, xx: Any) -> Any:
        c = cc if M == 1 else cc // M
        m = 0 if M == 1 else cc % M
        y, x = scaled(yy, sh) + scaled(ry, dh), scaled(xx, sw) + scaled(rx, dw)
        return te.sum(padded[nn, c, y, x] * weight[c, m, ry, rx], axis=[ry, rx])

    return te.compute((N, C * M, oh, ow), body, name=name)


def conv2d_transpose(
    data: Tensor, weight: Tensor, stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
    dilation: Any = 1, groups: int = 1, name: str = "conv2d_transpose",
) -> Tensor:  # fmt: skip
    """Transposed (fractionally strided) conv NCHW, PyTorch's ConvTranspose2d semantics.

    data (N, C, H, W), weight (C, K/groups, R, S) -> (N, K, H_out, W_out) with
    ``H_out = (H - 1) * stride - pad_top - pad_bottom + dilation * (R - 1) + output_padding + 1``.
    Built as TVM does: a "pad" stage that dilates the input by ``stride`` and pads it by
    ``dilation * (R - 1) - padding`` (cropping where that is negative), then a direct conv with the
    flipped kernel. Example: ``conv2d_transpose(x, w, stride=2, padding=1, output_padding=1)``.
    """
    fn = "conv2d_transpose"
    check_tensor(fn, "data", data, 4, "N, C, H, W")
    check_tensor(fn, "weight", weight, 4, "C, K/groups, R, S")
    check_same_dtype(fn, data=data, weight=weight)
    strides = check_ints(fn, "stride", stride, 2, minimum=1)
    dils = check_ints(fn, "dilation", dilation, 2, minimum=1)
    before, after = check_padding(fn, padding, 2)
    opad = check_ints(fn, "output_padding", output_padding, 2)
    check_int(fn, "groups", groups, minimum=1)
    for o, s, d in zip(opad, strides, dils, strict=True):
        if o >= s and o >= d:
            raise ValueError(f"{fn}: output_padding {opad} must be smaller than stride {strides} or dilation")
    N, C, H, W = data.shape
    Cw, Kg, R, S = weight.shape
    if Cw != C:
        raise ValueError(
            f"{fn}: weight has {Cw} input channels, data has {C}; expected weight (C, K/groups, R, S)"
        )
    if C % groups:
        raise ValueError(f"{fn}: groups={groups} does not divide the {C} input channels")
    Cg, K = C // groups, Kg * groups
    outs = []
    for size, k, s, b, a, d, o in zip((H, W), (R, S), strides, before, after, dils, opad, strict=True):
        out = (size - 1) * s - b - a + d * (k - 1) + o + 1
        if out < 1:
            raise ValueError(
                f"{fn}: padding {b}+{a} leaves no output for input {size}, kernel {k}, stride {s}"
            )
        outs.append(out)
    oh, ow = outs
    if dils == (1, 1) and strides != (1, 1):
        return _transpose_by_phase(data, weight, strides, before, groups, (N, K, oh, ow), name)
    # Leading offset of the dilated input inside the padded grid, and the grid's extent per dim.
    lead = [d * (k - 1) - b for k, b, d in zip((R, S), before, dils, strict=True)]
    grid = [o + d * (k - 1) for o, k, d in zip(outs, (R, S), dils, strict=True)]
    (sh, sw), (dh, dw) = strides, dils

    def dilate_pad(nn: Any, cc: Any, y: Any, x: Any) -> Any:
        conds, src = [], []
        for i, off, s, size, extent in ((y, lead[0], sh, H, grid[0]), (x, lead[1], sw, W, grid[1])):
            j = offset(i, -off)
            # Bounds that the grid already implies would only clutter the guard.
            if off > 0:
                conds.append(j >= 0)
            if off + (size - 1) * s + 1 < extent:
                conds.append(j < (size - 1) * s + 1)
            if s > 1:
                conds.append(j % s == 0)
            src.append(j // s if s > 1 else j)
        read = data[nn, cc, src[0], src[1]]
        return te.if_then_else(te.all(*conds), read, te.const(0, data.dtype)) if conds else read

    if lead == [0, 0] and strides == (1, 1) and grid == [H, W]:
        padded = data  # the pad stage would be an identity copy
    else:
        padded = te.compute((N, C, grid[0], grid[1]), dilate_pad, name="pad")
    rc = te.reduce_axis((0, Cg), name="rc")
    ry = te.reduce_axis((0, R), name="ry")
    rx = te.reduce_axis((0, S), name="rx")

    def body(nn: Any, ff: Any, yy: Any, xx: Any) -> Any:
        g_base = 0 if groups == 1 else (ff // Kg) * Cg
        f = ff if groups == 1 else ff % Kg
        chan = rc if groups == 1 else g_base + rc
        src = padded[nn, chan, yy + scaled(ry, dh), xx + scaled(rx, dw)]
        return te.sum(src * weight[chan, f, R - 1 - ry, S - 1 - rx], axis=[rc, ry, rx])

    return te.compute((N, K, oh, ow), body, name=name)


def _transpose_by_phase(
    data: Tensor, weight: Tensor, strides: tuple[int, ...], before: tuple[int, ...], groups: int,
    shape: tuple[int, ...], name: str,
) -> Tensor:  # fmt: skip
    """A strided transposed conv that skips the zeros the dilated input would hold.

    Output row ``y`` gets ``data[i] * w[q]`` where ``i * stride + q = y + pad``: only the taps
    ``q = (y + pad) % stride + stride * t`` meet a real input row, ``i = (y + pad) // stride - t``.
    So each output reads ``ceil(R / stride)`` taps per dim instead of R (a 4x4 kernel of stride 2:
    4 of 16), where the zero-inserted form multiplies by the zeros too.
    """
    _, _, H, W = data.shape
    _, Kg, R, S = weight.shape
    Cg = data.shape[1] // groups
    (sh, sw), (bh, bw) = strides, before
    rc = te.reduce_axis((0, Cg), name="rc")
    ty = te.reduce_axis((0, -(-R // sh)), name="ty")
    tx = te.reduce_axis((0, -(-S // sw)), name="tx")

    def phase(o: Any, t: Any, pad: int, s: int, k: int, size: int) -> tuple[Any, Any, list[Any]]:
        """(input index, kernel tap, conditions for both to exist) along one dim."""
        shifted = offset(o, pad)
        tap = shifted % s + scaled(t, s)
        src = shifted // s - t
        conds = [src >= 0, src < size]
        if k % s:
            conds.append(tap < k)  # the last group of taps is short
        return src, tap, conds

    def body(nn: Any, ff: Any, yy: Any, xx: Any) -> Any:
        chan = rc if groups == 1 else (ff // Kg) * Cg + rc
        f = ff if groups == 1 else ff % Kg
        iy, qy, cy = phase(yy, ty, bh, sh, R, H)
        ix, qx, cx = phase(xx, tx, bw, sw, S, W)
        term = data[nn, chan, iy, ix] * weight[chan, f, qy, qx]
        return te.sum(te.if_then_else(te.all(*cy, *cx), term, te.const(0, data.dtype)), axis=[rc, ty, tx])

    return te.compute(shape, body, name=name)
