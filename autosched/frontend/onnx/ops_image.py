"""Resize, Upsample, GridSample (nearest, linear and cubic interpolation), AffineGrid, CenterCropPad.

Each output element maps back to a fractional source coordinate per resized axis (the
``coordinate_transformation_mode``), then reads its taps: one (nearest), two (linear) or four (cubic)
per axis, clamped to the edge (ONNX's edge padding), weighted and summed as one te expression.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np

from ... import te
from .context import Node, Out
from .ops_elementwise import round_half_even
from .ops_tensor import clamp, compute, int_list, read
from .registry import converter


def source_coordinate(
    mode: str, x: Any, scale: float, size_in: int, size_out: int, roi: tuple[float, float]
) -> Any:
    """The source coordinate (float32) of output index ``x`` along one axis.

    As ONNX's reference, the output width in these formulas is ``scale * size_in`` (not floored).
    """
    xf = te.cast("float32", x)
    width = scale * size_in
    if mode == "asymmetric":
        return xf / scale
    if mode == "align_corners":
        return xf * ((size_in - 1) / (width - 1)) if width != 1 else te.const(0.0, "float32")
    if mode == "pytorch_half_pixel":
        return (xf + 0.5) / scale - 0.5 if width > 1 else te.const(0.0, "float32")
    if mode == "half_pixel_symmetric":
        adjustment = size_out / (scale * size_in)
        offset = size_in / 2 * (1 - adjustment)
        return offset + (xf + 0.5) / scale - 0.5
    if mode == "tf_crop_and_resize":
        start, end = roi
        if width == 1:
            return te.const(0.5 * (start + end) * (size_in - 1), "float32")
        return start * (size_in - 1) + xf * ((end - start) * (size_in - 1) / (width - 1))
    return (xf + 0.5) / scale - 0.5  # half_pixel


def nearest_index(mode: str, c: Any) -> Any:
    if mode == "floor":
        r = te.floor(c)
    elif mode == "ceil":
        r = te.ceil(c)
    elif mode == "round_prefer_ceil":
        r = te.floor(c + 0.5)
    else:  # round_prefer_floor
        r = te.ceil(c - 0.5)
    return te.cast("int32", r)


def cubic_weight(a: float, s: Any) -> Any:
    s = te.abs(s)
    near = ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0
    far = ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a
    return te.if_then_else(s <= 1.0, near, te.if_then_else(s < 2.0, far, te.const(0.0, "float32")))


def taps(node: Node, method: str, c: Any, size: int) -> list[tuple[Any, Any]]:
    """(source index, weight) pairs of one axis for source coordinate ``c``."""
    if method == "nearest":
        return [(clamp(nearest_index(node.attr("nearest_mode", "round_prefer_floor"), c), size), None)]
    base = te.floor(c)
    t = c - base
    i0 = te.cast("int32", base)
    if method == "linear":
        return [(clamp(i0, size), 1.0 - t), (clamp(i0 + 1, size), t)]
    a = node.attr("cubic_coeff_a", -0.75)
    offsets = (-1, 0, 1, 2)
    weights = [cubic_weight(a, t - o) for o in offsets]
    if node.attr("exclude_outside", 0):  # taps outside the input get no weight; the rest renormalize
        weights = [
            te.if_then_else(te.all(i0 + o >= 0, i0 + o < size), w, te.const(0.0, "float32"))
            for o, w in zip(offsets, weights, strict=True)
        ]
        total = weights[0] + weights[1] + weights[2] + weights[3]
        weights = [w / total for w in weights]
    return [(clamp(i0 + o, size), w) for o, w in zip(offsets, weights, strict=True)]


def resize(
    node: Node, method: str, coord_mode: str, scales: list[float], sizes: list[int], roi: list[float]
) -> Out:
    shape = node.shape(0)
    x = node.tensor(0)
    if x.dtype != "float32" and method != "nearest":
        raise node.error(f"{method} interpolation of {x.dtype} is not supported (float32 is)")
    n = len(shape)
    moved = [d for d in range(n) if sizes[d] != shape[d] or scales[d] != 1.0]
    extrapolate = coord_mode == "tf_crop_and_resize"
    fill = te.const(node.attr("extrapolation_value", 0.0), x.dtype)

    def body(*i: Any) -> Any:
        per_axis, outside = [], []
        for d in moved:
            c = source_coordinate(coord_mode, i[d], scales[d], shape[d], sizes[d], (roi[d], roi[d + n]))
            if extrapolate:
                outside.extend([c < 0.0, c > float(shape[d] - 1)])
            per_axis.append(taps(node, method, c, shape[d]))
        value: Any = None
        for combo in itertools.product(*per_axis):
            idx = list(i)
            weight: Any = None
            for d, (src, w) in zip(moved, combo, strict=True):
                idx[d] = src
                weight = w if weight is None else (weight * w if w is not None else weight)
            term = read(node, 0, idx) if weight is None else read(node, 0, idx) * weight
            value = term if value is None else value + term
        return te.if_then_else(te.any(*outside), fill, value) if outside else value

    return compute(node, tuple(sizes), body, name="resize")


def output_plan(node: Node, shape: tuple[int, ...], scales: Any, sizes: Any) -> tuple[list[float], list[int]]:
    """Per-axis (scale, output size), from the scales or sizes input, over ``axes`` when given."""
    n = len(shape)
    axes = [node.axis(a, n, "axes") for a in node.attr("axes", list(range(n)))]
    full_scales, full_sizes = [1.0] * n, list(shape)
    if sizes is not None and sizes.size:
        given = [int(v) for v in sizes.reshape(-1)]
        policy = node.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(g / shape[a] for a, g in zip(axes, given, strict=True))
            given = [math.floor(common * shape[a] + 0.5) for a in axes]
            for a in axes:
                full_scales[a] = common
        for a, g in zip(axes, given, strict=True):
            full_sizes[a] = g
            if policy == "stretch":
                full_scales[a] = g / shape[a]
    elif scales is not None and scales.size:
        for a, s in zip(axes, [float(v) for v in scales.reshape(-1)], strict=True):
            full_scales[a] = s
            full_sizes[a] = math.floor(shape[a] * s)
    else:
        raise node.error("needs a scales or a sizes input")
    return full_scales, full_sizes


@converter("Resize", since=10)
@converter("Resize", since=11)
@converter("Resize", since=13)
@converter("Resize", since=18)
@converter("Resize", since=19)
def resize_op(node: Node) -> Out:
    shape = node.shape(0)
    if node.attr("antialias", 0):
        raise node.error("antialias=1 is not supported")
    method = node.attr("mode", "nearest")
    if node.opset < 11:
        plan = output_plan(node, shape, node.const(1, "scales"), None)
        return resize(node, method, "asymmetric", *plan, [0.0] * (2 * len(shape)))
    roi = node.optional_const(1, "roi")
    scales, sizes = node.optional_const(2, "scales"), node.optional_const(3, "sizes")
    plan = output_plan(node, shape, scales, sizes)
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    n = len(shape)
    full_roi = [0.0] * n + [1.0] * n
    if roi is not None and roi.size:
        axes = [node.axis(a, n, "axes") for a in node.attr("axes", list(range(n)))]
        values = [float(v) for v in roi.reshape(-1)]
        for j, a in enumerate(axes):
            full_roi[a], full_roi[a + n] = values[j], values[j + len(axes)]
    return resize(node, method, coord, *plan, full_roi)


@converter("Upsample", since=7)
@converter("Upsample", since=9)
def upsample(node: Node) -> Out:
    shape = node.shape(0)
    scales = np.asarray(node.attr("scales") if node.opset < 9 else node.const(1, "scales"), np.float32)
    method = "linear" if node.attr("mode", "nearest") in ("linear", "bilinear") else "nearest"
    plan = output_plan(node, shape, scales, None)
    node.attrs.setdefault("nearest_mode", "floor")  # Upsample's nearest is floor(x / scale)
    return resize(node, method, "asymmetric", *plan, [0.0] * (2 * len(shape)))


def reflect(x: Any, lo: float, hi: float) -> Any:
    """``x`` reflected off the borders ``lo`` and ``hi`` until it lies between them (float)."""
    span = hi - lo

    def fold(dx: Any, near: float, far: float, sign: float) -> Any:
        n = te.floor(dx / span)
        r = dx - n * span
        even = n - 2.0 * te.floor(n * 0.5) == 0.0
        return te.if_then_else(even, near + sign * r, far - sign * r)

    below = fold(lo - x, lo, hi, 1.0)
    above = fold(x - hi, hi, lo, -1.0)
    return te.if_then_else(x < lo, below, te.if_then_else(x > hi, above, x))


def grid_taps(node: Node, method: str, c: Any) -> list[tuple[Any, Any]]:
    """(integer tap, weight) pairs of one axis for the (border-fixed) source coordinate ``c``."""
    if method == "nearest":
        return [(te.cast("int32", c), None)]
    base = te.floor(c)
    t = c - base
    i0 = te.cast("int32", base)
    if method == "linear":
        return [(i0, 1.0 - t), (i0 + 1, t)]
    offsets = (-1, 0, 1, 2)
    return [(i0 + o, cubic_weight(-0.75, t - o)) for o in offsets]


@converter("GridSample", since=16)
@converter("GridSample", since=20)
@converter("GridSample", since=22)
def grid_sample(node: Node) -> Out:
    shape, grid_shape = node.shape(0), node.shape(1)
    x, grid = node.tensor(0), node.tensor(1)
    mode = {"bilinear": "linear", "bicubic": "cubic"}.get(
        node.attr("mode", "linear"), node.attr("mode", "linear")
    )
    padding = node.attr("padding_mode", "zeros")
    align = bool(node.attr("align_corners", 0))
    dims = shape[2:]
    k = len(dims)
    lo = [0.0 if align else -0.5] * k
    hi = [d - 1.0 if align else d - 0.5 for d in dims]
    zero = te.const(0, x.dtype)

    def body(*i: Any) -> Any:
        n, c, out = i[0], i[1], i[2:]
        per_axis = []
        for d in range(k):
            g = grid[(n, *out, k - 1 - d)]  # the grid lists coordinates innermost dim first
            size = dims[d]
            pos = (g + 1.0) * 0.5 * (size - 1) if align else ((g + 1.0) * size - 1.0) * 0.5
            if mode == "nearest":
                pos = round_half_even(pos)
            if padding == "border":
                pos = te.max(te.min(pos, float(size - 1)), 0.0)
            elif padding == "reflection":
                pos = reflect(pos, lo[d], hi[d])
            per_axis.append([(src, w, size, d) for src, w in grid_taps(node, mode, pos)])
        value: Any = None
        for combo in itertools.product(*per_axis):
            idx, inside, weight = [n, c], [], None
            for src, w, size, d in combo:
                if padding == "reflection":
                    src = te.cast("int32", reflect(te.cast(grid.dtype, src), lo[d], hi[d]))
                inside.extend([src >= 0, src < size])
                idx.append(clamp(src, size))
                weight = w if weight is None else (weight * w if w is not None else weight)
            pixel: te.Expr = x[tuple(idx)]
            if padding == "zeros":
                pixel = te.if_then_else(te.all(*inside), pixel, zero)
            term = pixel if weight is None else pixel * weight
            value = term if value is None else value + term
        return value

    return compute(node, (*shape[:2], *grid_shape[1:-1]), body, name="grid_sample")


@converter("AffineGrid", since=20)
def affine_grid(node: Node) -> Out:
    """The sampling grid of ``theta`` (N, k, k+1) over a normalized [-1, 1] grid of ``size``."""
    theta = node.tensor(0)
    size = [int(v) for v in node.const(1, "size").reshape(-1)]
    spatial = size[2:]
    k = len(spatial)
    align = bool(node.attr("align_corners", 0))

    def base(i: Any, n: int) -> Any:
        f = te.cast(theta.dtype, i)
        if align:
            return -1.0 + f * (2.0 / (n - 1)) if n > 1 else te.const(0.0, theta.dtype)
        return (2.0 * f + 1.0) / n - 1.0

    def body(*i: Any) -> Any:
        b, pos, comp = i[0], i[1 : 1 + k], i[1 + k]
        # The base point lists coordinates innermost dim first (x, y[, z]), then 1 for the shift.
        point = [base(pos[k - 1 - d], spatial[k - 1 - d]) for d in range(k)]
        value: Any = theta[b, comp, k]
        for d, p in enumerate(point):
            value = value + theta[b, comp, d] * p
        return value

    return compute(node, (size[0], *spatial, k), body, name="affine_grid")


@converter("CenterCropPad", since=18)
def center_crop_pad(node: Node) -> Out:
    """Each listed axis cropped or zero-padded to its target size, centred (the odd one on the end)."""
    shape = node.shape(0)
    axes = [node.axis(a, len(shape), "axes") for a in node.attr("axes", list(range(len(shape))))]
    out, shift = list(shape), [0] * len(shape)
    for a, target in zip(axes, int_list(node, 1, "shape"), strict=True):
        out[a] = target
        shift[a] = (shape[a] - target) // 2 if target < shape[a] else -((target - shape[a]) // 2)
    padded = [o > d for o, d in zip(out, shape, strict=True)]
    zero = te.const(0, node.tensor(0).dtype)

    def body(*i: Any) -> Any:
        src = [j + s if s else j for j, s in zip(i, shift, strict=True)]
        inside = [c for p, d, pad in zip(src, shape, padded, strict=True) if pad for c in (p >= 0, p < d)]
        if not inside:
            return read(node, 0, src)
        clamped = [clamp(p, d) if pad else p for p, d, pad in zip(src, shape, padded, strict=True)]
        return te.if_then_else(te.all(*inside), read(node, 0, clamped), zero)

    return compute(node, tuple(out), body)
