"""Neural-network ONNX ops: Conv, ConvTranspose, Gemm, MatMul, Einsum, pools, Col2Im, ReverseSequence.

Conv and ConvTranspose (2-d, and 1-d through it) reuse topi; pools are written in te here because
ONNX's (N-d, dilations, ceil_mode, count_include_pad, indices) are more general than topi's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import te, topi
from ...topi.elementwise import broadcast_read
from ...topi.transform import lowest
from .context import Node, Out
from .ops_tensor import clamp, compute
from .registry import converter

CONVS = {1: topi.conv1d, 2: topi.conv2d, 3: topi.conv3d}


def spatial_pads(
    node: Node, sizes: tuple[int, ...], kernel: list[int], strides: list[int], dils: list[int]
) -> tuple[list[int], list[int]]:
    """(before, after) padding per spatial dim, from ``pads`` or ``auto_pad``."""
    n = len(sizes)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = node.attr("pads") or [0] * (2 * n)
        return list(pads[:n]), list(pads[n:])
    if auto == "VALID":
        return [0] * n, [0] * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.error(f"auto_pad {auto!r} is not one of NOTSET, VALID, SAME_UPPER, SAME_LOWER")
    before, after = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dils, strict=True):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        before.append(small if auto == "SAME_UPPER" else large)
        after.append(large if auto == "SAME_UPPER" else small)
    return before, after


def channel_bias(node: Node, out: Any, bias_input: int) -> Any:
    if not node.has(bias_input):
        return out
    b = node.tensor(bias_input)
    return te.compute(out.shape, lambda *i: out[i] + b[i[1]], name="bias_add")


@converter("Conv", since=1)
@converter("Conv", since=11)
@converter("Conv", since=22)
def conv(node: Node) -> Any:
    x, w = node.shape(0), node.shape(1)
    n = len(x) - 2
    if n not in CONVS:
        raise node.error(f"input has {len(x)} dims; Conv supports 1-d, 2-d and 3-d (3 to 5 dims)")
    kernel = node.attr("kernel_shape") or list(w[2:])
    strides = node.attr("strides") or [1] * n
    dils = node.attr("dilations") or [1] * n
    before, after = spatial_pads(node, x[2:], kernel, strides, dils)
    out = CONVS[n](node.tensor(0), node.tensor(1), strides, [*before, *after], dils, node.attr("group", 1))
    return channel_bias(node, out, 2)


@converter("ConvTranspose", since=1)
@converter("ConvTranspose", since=11)
@converter("ConvTranspose", since=22)
def conv_transpose(node: Node) -> Any:
    x, w = node.shape(0), node.shape(1)
    n = len(x) - 2
    if n not in (1, 2):
        raise node.error(f"input has {len(x)} dims; ConvTranspose supports 1-d and 2-d")
    kernel = node.attr("kernel_shape") or list(w[2:])
    strides = node.attr("strides") or [1] * n
    dils = node.attr("dilations") or [1] * n
    opad = list(node.attr("output_padding") or [0] * n)
    out_shape = node.attr("output_shape")
    auto = node.attr("auto_pad", "NOTSET")
    if out_shape or auto in ("SAME_UPPER", "SAME_LOWER"):
        target = (
            list(out_shape)[-n:] if out_shape else [size * s for size, s in zip(x[2:], strides, strict=True)]
        )
        before: list[int] = []
        after: list[int] = []
        for size, k, s, d, o, t in zip(x[2:], kernel, strides, dils, opad, target, strict=True):
            total = s * (size - 1) + o + (k - 1) * d + 1 - t
            if total < 0:  # the requested output is larger: the extra rows are output padding
                opad[len(before)] += -total
                total = 0
            small, large = total // 2, total - total // 2
            before.append(small if auto == "SAME_UPPER" else large)
            after.append(large if auto == "SAME_UPPER" else small)
    elif auto == "VALID":
        before, after = [0] * n, [0] * n
    else:
        pads = node.attr("pads") or [0] * (2 * n)
        before, after = list(pads[:n]), list(pads[n:])
    data, weight = node.tensor(0), node.tensor(1)
    if n == 1:  # as a 2-d transposed conv of height 1
        data = topi.reshape(data, (x[0], x[1], 1, x[2]))
        weight = topi.reshape(weight, (w[0], w[1], 1, w[2]))
        strides, dils, opad = [1, *strides], [1, *dils], [0, *opad]
        before, after = [0, *before], [0, *after]
    out = topi.conv2d_transpose(data, weight, strides, [*before, *after], opad, dils, node.attr("group", 1))
    if n == 1:
        out = topi.reshape(out, (out.shape[0], out.shape[1], out.shape[3]))
    return channel_bias(node, out, 2)


@converter("Gemm", since=7)
@converter("Gemm", since=9)
@converter("Gemm", since=11)
@converter("Gemm", since=13)
def gemm(node: Node) -> Any:
    a, b = node.tensor(0), node.tensor(1)
    ta, tb = node.attr("transA", 0), node.attr("transB", 0)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    M, K = a.shape[::-1] if ta else a.shape
    Kb, N = b.shape[::-1] if tb else b.shape
    if K != Kb:
        raise node.error(
            f"A {list(a.shape)} (transA={ta}) and B {list(b.shape)} (transB={tb}) do not multiply"
        )
    k = te.reduce_axis((0, K), name="k")
    prod = te.compute(
        (M, N),
        lambda i, j: te.sum((a[k, i] if ta else a[i, k]) * (b[j, k] if tb else b[k, j]), axis=k),
        name="gemm",
    )
    if not node.has(2) and alpha == 1.0:
        return prod
    c = node.tensor(2) if node.has(2) else None
    c_shape = node.shape(2) if node.has(2) else ()

    def body(i: Any, j: Any) -> Any:
        v = prod[i, j] if alpha == 1.0 else alpha * prod[i, j]
        if c is None:
            return v
        cv = broadcast_read(c, (i, j)) if c_shape else c[0]
        return v + (cv if beta == 1.0 else beta * cv)

    return te.compute((M, N), body, name="gemm_epilogue")


@converter("MatMul", since=1)
@converter("MatMul", since=9)
@converter("MatMul", since=13)
def matmul(node: Node) -> Out:
    sa, sb = node.shape(0), node.shape(1)
    if not sa or not sb:
        raise node.error("MatMul does not take scalars")
    a2 = (1, *sa) if len(sa) == 1 else sa
    b2 = (*sb, 1) if len(sb) == 1 else sb
    if a2[-1] != b2[-2]:
        raise node.error(f"shapes {list(sa)} and {list(sb)} do not multiply (K {a2[-1]} vs {b2[-2]})")
    try:
        batch = tuple(int(d) for d in np.broadcast_shapes(a2[:-2], b2[:-2]))
    except ValueError:
        raise node.error(f"batch dims of {list(sa)} and {list(sb)} do not broadcast") from None
    M, K, N = a2[-2], a2[-1], b2[-1]
    a, b = node.tensor(0), node.tensor(1)
    k = te.reduce_axis((0, K), name="k")

    def operand_index(
        t_shape: tuple[int, ...], full: tuple[int, ...], bidx: Any, rows: Any
    ) -> tuple[Any, ...]:
        nb = len(full) - 2
        own = bidx[len(bidx) - nb :] if nb else ()
        lead = tuple(0 if d == 1 else i for i, d in zip(own, full[:nb], strict=True))
        return lead + rows

    def body(*i: Any) -> Any:
        bidx, row, col = i[: len(batch)], i[len(batch)], i[len(batch) + 1]
        ia = operand_index(sa, a2, bidx, (k,) if len(sa) == 1 else (row, k))
        ib = operand_index(sb, b2, bidx, (k,) if len(sb) == 1 else (k, col))
        return te.sum(a[ia] * b[ib], axis=k)

    full = compute(node, (*batch, M, N), body, name="matmul")
    shape = (*batch, *((M,) if len(sa) > 1 else ()), *((N,) if len(sb) > 1 else ()))
    if shape == (*batch, M, N):
        return full
    t = full.tensor
    return Out(topi.reshape(t, shape or (1,)) if shape else topi.reshape(t, (1,)), shape, full.dtype)


def pool(node: Node, kind: str) -> Any:
    x = node.shape(0)
    n = len(x) - 2
    kernel = node.attr("kernel_shape")
    strides = node.attr("strides") or [1] * n
    dils = node.attr("dilations") or [1] * n
    before, after = spatial_pads(node, x[2:], kernel, strides, dils)
    ceil_mode = node.attr("ceil_mode", 0)
    outs = []
    for size, k, s, d, b, e in zip(x[2:], kernel, strides, dils, before, after, strict=True):
        span = (k - 1) * d + 1
        if ceil_mode:
            o = -(-(size + b + e - span) // s) + 1
            if (o - 1) * s >= size + b:  # the last window would start in the padding only
                o -= 1
        else:
            o = (size + b + e - span) // s + 1
        outs.append(o)
    data = node.tensor(0)
    rs = [te.reduce_axis((0, k), name=f"r{j}") for j, k in enumerate(kernel)]

    def window(i: Any, axes: list[Any], with_pad: bool) -> tuple[list[Any], Any]:
        """The input position of each window tap, and whether it lies in the input (or its padding)."""
        pos, inside = [], []
        for j, (o, r, s, d, b) in enumerate(zip(i[2:], axes, strides, dils, before, strict=True)):
            p = o * s + r * d - b
            pos.append(p)
            lo, hi = (-b, x[2 + j] + after[j]) if with_pad else (0, x[2 + j])
            inside.extend([p >= lo, p < hi])
        return pos, te.all(*inside)

    shape = (*x[:2], *outs)
    zero = te.const(0, data.dtype)
    if kind == "max":
        low = te.const(lowest(data.dtype), data.dtype)

        def max_body(*i: Any) -> Any:
            pos, ok = window(i, rs, with_pad=False)
            return te.max(te.if_then_else(ok, data[(*i[:2], *pos)], low), axis=rs)

        pooled = compute(node, shape, max_body, name="max_pool")
        if len(node.proto.output) < 2 or not node.proto.output[1]:
            return pooled
        column_major = bool(node.attr("storage_order", 0))
        best = pooled.tensor
        ri = [te.reduce_axis((0, k), name=f"w{j}") for j, k in enumerate(kernel)]

        def index_body(*i: Any) -> Any:
            # The first window tap holding the max, as a flat index into the whole input: (n, c)
            # row-major, then the spatial dims row-major (or column-major with storage_order=1).
            pos, ok = window(i, ri, with_pad=False)
            flat: Any = te.cast("int64", i[0]) * x[1] + te.cast("int64", i[1])
            spatial = list(zip(pos, x[2:], strict=True))
            for p, size in reversed(spatial) if column_major else spatial:
                flat = flat * size + te.cast("int64", p)
            none = te.const(2**62, "int64")
            # Nested selects, not te.all: the read must be guarded (te.all evaluates both sides).
            at_max = te.if_then_else(data[(*i[:2], *pos)] == best[i], flat, none)
            return te.min(te.if_then_else(ok, at_max, none), axis=ri)

        return [pooled, compute(node, shape, index_body, "int64", name="max_pool_index")]
    p = node.attr("p", 2)

    def sum_body(*i: Any) -> Any:
        pos, ok = window(i, rs, with_pad=False)
        v = data[(*i[:2], *pos)]
        term = v if kind == "avg" else te.pow(te.abs(v), float(p))
        return te.sum(te.if_then_else(ok, term, zero), axis=rs)

    total = compute(node, shape, sum_body, name="pool_sum").tensor
    if kind == "lp":
        return te.compute(shape, lambda *i: te.pow(total[i], 1.0 / p), name="lp_pool")
    include_pad = bool(node.attr("count_include_pad", 0))
    rs_count = [te.reduce_axis((0, k), name=f"c{j}") for j, k in enumerate(kernel)]
    one = te.const(1, data.dtype)

    def count_body(*i: Any) -> Any:
        _, ok = window(i, rs_count, with_pad=include_pad)
        return te.sum(te.if_then_else(ok, one, zero), axis=rs_count)

    count = compute(node, shape, count_body, name="pool_count").tensor
    return te.compute(shape, lambda *i: total[i] / count[i], name="avg_pool")


for _v in (1, 8, 10, 11, 12, 22):
    converter("MaxPool", _v)(lambda node: pool(node, "max"))
for _v in (1, 7, 10, 11, 19, 22):
    converter("AveragePool", _v)(lambda node: pool(node, "avg"))
for _v in (1, 2, 11, 18, 22):
    converter("LpPool", _v)(lambda node: pool(node, "lp"))


@converter("GlobalAveragePool", since=1)
@converter("GlobalAveragePool", since=22)
def global_average_pool(node: Node) -> Any:
    return topi.mean(node.tensor(0), axis=tuple(range(2, len(node.shape(0)))), keepdims=True)


@converter("GlobalMaxPool", since=1)
@converter("GlobalMaxPool", since=22)
def global_max_pool(node: Node) -> Any:
    return topi.max(node.tensor(0), axis=tuple(range(2, len(node.shape(0)))), keepdims=True)


@converter("Einsum", since=12)
def einsum(node: Node) -> Any:
    """One te compute: the product of every operand at its letters, summed over the letters not kept."""
    equation = node.attr("equation").replace(" ", "")
    lhs, _, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(node):
        raise node.error(f"equation {equation!r} has {len(terms)} operands, the node {len(node)} inputs")
    spare = iter(c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in equation)
    ellipsis_rank = max(len(node.shape(i)) - len(t.replace("...", "")) for i, t in enumerate(terms))
    dots = "".join(next(spare) for _ in range(max(ellipsis_rank, 0)))
    sizes: dict[str, int] = {}
    expanded = []
    for i, term in enumerate(terms):
        shape = node.shape(i)
        own = len(shape) - len(term.replace("...", ""))
        letters = term.replace("...", dots[len(dots) - own :] if own else "")
        if len(letters) != len(shape):
            raise node.error(f"operand {i} ({term!r}) does not fit its shape {list(shape)}")
        for c, d in zip(letters, shape, strict=True):
            sizes[c] = d if sizes.get(c, 1) == 1 else sizes[c]
        expanded.append(letters)
    if "->" in equation:
        out = rhs.replace("...", dots)
    else:  # implicit output: the ellipsis, then the letters used once, sorted
        counts = "".join(expanded)
        out = dots + "".join(sorted(c for c in set(counts) if counts.count(c) == 1 and c not in dots))
    reduced = [c for c in dict.fromkeys("".join(expanded)) if c not in out]
    raxes = {c: te.reduce_axis((0, sizes[c]), name=f"r_{c}") for c in reduced}
    tensors = [node.tensor(i) for i in range(len(node))]

    def body(*i: Any) -> Any:
        at = dict(zip(out, i, strict=True)) | raxes
        value: Any = None
        for t, letters in zip(tensors, expanded, strict=True):
            if letters:  # size-1 dims of an operand broadcast (the ellipsis of numpy's einsum)
                read = t[tuple(0 if d == 1 else at[c] for c, d in zip(letters, t.shape, strict=True))]
            else:  # a scalar operand, held as one element
                read = t[0]
            value = read if value is None else value * read
        return te.sum(value, axis=list(raxes.values())) if raxes else value

    return compute(node, tuple(sizes[c] for c in out), body, name="einsum")


@converter("ReverseSequence", since=10)
def reverse_sequence(node: Node) -> Any:
    x = node.tensor(0)
    lens = node.tensor(1)
    batch, time = node.attr("batch_axis", 1), node.attr("time_axis", 0)
    steps = x.shape[time]

    def body(*i: Any) -> Any:
        n = te.cast("int32", lens[i[batch]])
        back = clamp(n - 1 - i[time], steps)
        src = tuple(te.if_then_else(i[time] < n, back, i[time]) if d == time else v for d, v in enumerate(i))
        return x[src]

    return te.compute(x.shape, body, name="reverse_sequence")


@converter("Col2Im", since=18)
def col2im(node: Node) -> Any:
    """Sum the columns (N, C * prod(block), L) back into the image: each output pixel adds every
    kernel tap whose sliding block covers it (the adjoint of im2col)."""
    x = node.tensor(0)
    image = [int(v) for v in node.const(1, "image_shape").reshape(-1)]
    block = [int(v) for v in node.const(2, "block_shape").reshape(-1)]
    n = len(image)
    strides = node.attr("strides") or [1] * n
    dils = node.attr("dilations") or [1] * n
    pads = node.attr("pads") or [0] * (2 * n)
    counts = [
        (img + pads[d] + pads[d + n] - dils[d] * (k - 1) - 1) // strides[d] + 1
        for d, (img, k) in enumerate(zip(image, block, strict=True))
    ]
    taps = math.prod(block)
    rk = [te.reduce_axis((0, k), name=f"k{d}") for d, k in enumerate(block)]

    def body(b: Any, c: Any, *y: Any) -> Any:
        offset: Any = rk[0]
        for d in range(1, n):
            offset = offset * block[d] + rk[d]
        where: list[Any] = []
        col: Any = 0
        # The block that puts kernel offset k at pixel y starts at (y + pad - k * dilation) / stride.
        for d in range(n):
            off = y[d] + pads[d] - rk[d] * dils[d]
            where.extend([off >= 0, off % strides[d] == 0, off < counts[d] * strides[d]])
            o = clamp(off // strides[d], counts[d])
            col = o if d == 0 else col * counts[d] + o
        return te.sum(x[b, c * taps + offset, col], axis=rk, where=te.all(*where))

    return te.compute((x.shape[0], x.shape[1] // taps, *image), body, name="col2im")
