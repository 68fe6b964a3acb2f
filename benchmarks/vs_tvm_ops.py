"""The operators of ``vs_tvm.py``, each written three times with the same math and shapes: in autosched's
te (topi's makers where they exist), in TVM's te, and in numpy (the reference both are checked against).

The TVM versions copy autosched's formulation stage for stage (layer norm's shifted two-pass variance,
the transposed conv's phase decomposition that skips the zero-inserted taps, a pad stage before a conv
or pool), so the race is between two schedulers of one computation, not two algorithms.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from autosched import te
from autosched.topi.transform import lowest, pad
from autosched.topi.workloads import (
    make_conv1d,
    make_conv2d,
    make_conv2d_transpose,
    make_dense,
    make_layer_norm,
    make_matmul,
    make_softmax,
)

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Op:
    """One operator kind: its sizes, its three versions, and whether memory bounds its speed."""

    name: str
    full: Shape
    quick: Shape
    ours: Callable[[Shape], list[Any]]  # autosched tensors, inputs first
    theirs: Callable[[Shape], list[Any]]  # TVM tensors, inputs first
    reference: Callable[..., np.ndarray]  # (shape, *inputs) -> the output
    memory_bound: bool = False
    tvm_topi: Callable[[Shape], list[Any]] | None = None  # TVM's own topi formulation, where it differs


def _tvm() -> tuple[Any, Any]:
    import tvm
    from tvm import te as tte

    return tte, getattr(tvm, "tir", None) or tvm.tirx  # tir was renamed tirx in TVM 0.27


def _f32(x: float) -> Any:
    return _tvm()[1].const(x, "float32")


# --- the four workloads of search_efficiency.py ---------------------------------------------------------


def matmul_tvm(s: Shape) -> list[Any]:
    tte, _ = _tvm()
    m, n, kk = s
    a, b = tte.placeholder((m, kk), name="A"), tte.placeholder((kk, n), name="B")
    k = tte.reduce_axis((0, kk), name="k")
    return [a, b, tte.compute((m, n), lambda i, j: tte.sum(a[i, k] * b[k, j], axis=k), name="C")]


def conv2d_tvm(s: Shape) -> list[Any]:
    """NCHW 3x3, stride 1, zero padding 1 (a pad stage, as autosched's)."""
    tte, _ = _tvm()
    n, c, h, w, kf = s
    data, weight = tte.placeholder((n, c, h, w), name="data"), tte.placeholder((kf, c, 3, 3), name="weight")
    padded = tte.compute(
        (n, c, h + 2, w + 2),
        lambda b, ci, y, x: tte.if_then_else(
            tte.all(y >= 1, y <= h, x >= 1, x <= w), data[b, ci, y - 1, x - 1], _f32(0.0)
        ),
        name="pad",
    )
    rc, ry, rx = (tte.reduce_axis((0, e), nm) for e, nm in ((c, "rc"), (3, "ry"), (3, "rx")))
    out = tte.compute(
        (n, kf, h, w),
        lambda b, f, y, x: tte.sum(padded[b, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
        name="conv2d",
    )
    return [data, weight, out]


def softmax_tvm(s: Shape) -> list[Any]:
    tte, _ = _tvm()
    m, n = s
    x = tte.placeholder((m, n), name="x")
    k1, k2 = tte.reduce_axis((0, n), "k1"), tte.reduce_axis((0, n), "k2")
    mx = tte.compute((m,), lambda i: tte.max(x[i, k1], axis=k1), name="maxelem")
    ex = tte.compute((m, n), lambda i, j: tte.exp(x[i, j] - mx[i]), name="exp")
    sm = tte.compute((m,), lambda i: tte.sum(ex[i, k2], axis=k2), name="expsum")
    return [x, tte.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="softmax")]


def dense_tvm(s: Shape) -> list[Any]:
    """X @ W^T, then bias and relu as their own stage."""
    tte, tir = _tvm()
    m, n, kk = s
    x, w, b = (
        tte.placeholder((m, kk), name="X"),
        tte.placeholder((n, kk), name="W"),
        tte.placeholder((n,), name="b"),
    )
    k = tte.reduce_axis((0, kk), name="k")
    d = tte.compute((m, n), lambda i, j: tte.sum(x[i, k] * w[j, k], axis=k), name="dense")
    return [x, w, b, tte.compute((m, n), lambda i, j: tir.max(d[i, j] + b[j], _f32(0.0)), name="relu")]


def _softmax_np(_s: Shape, x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _conv2d_np(_s: Shape, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    win = np.lib.stride_tricks.sliding_window_view(
        np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), (2, 3)
    )
    return np.einsum("nchwrs,kcrs->nkhw", win, w, optimize=True)


# --- sum of squares of a whole tensor, then sqrt (a norm): one output, nothing to parallelize outside -----


def sumsq_ours(s: Shape) -> list[Any]:
    x = te.placeholder(s, name="x")
    k = [te.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(s)]
    ss = te.compute((1,), lambda _i: te.sum(x[tuple(k)] * x[tuple(k)], axis=k), name="sumsq")
    return [x, te.compute((1,), lambda i: te.sqrt(ss[i]), name="norm")]


def sumsq_tvm(s: Shape) -> list[Any]:
    tte, _ = _tvm()
    x = tte.placeholder(s, name="x")
    k = [tte.reduce_axis((0, d), name=f"k{i}") for i, d in enumerate(s)]
    ss = tte.compute((1,), lambda _i: tte.sum(x[tuple(k)] * x[tuple(k)], axis=k), name="sumsq")
    return [x, tte.compute((1,), lambda i: tte.sqrt(ss[i]), name="norm")]


def _sumsq_np(_s: Shape, x: np.ndarray) -> np.ndarray:
    return np.sqrt(np.sum(np.square(x.astype(np.float64)))).reshape(1)


# --- five-point stencil over the interior of a grid (out is (H-2, W-2)) -----------------------------------


def _stencil(x: Any, i: Any, j: Any, c: Callable[[float], Any]) -> Any:
    near = x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2]
    return c(0.5) * x[i + 1, j + 1] + c(0.125) * near


def stencil_ours(s: Shape) -> list[Any]:
    h, w = s
    x = te.placeholder(s, name="x")
    f32 = lambda v: te.const(v, "float32")  # noqa: E731
    return [x, te.compute((h - 2, w - 2), lambda i, j: _stencil(x, i, j, f32), name="stencil")]


def stencil_tvm(s: Shape) -> list[Any]:
    tte, _ = _tvm()
    h, w = s
    x = tte.placeholder(s, name="x")
    return [x, tte.compute((h - 2, w - 2), lambda i, j: _stencil(x, i, j, _f32), name="stencil")]


def _stencil_np(_s: Shape, x: np.ndarray) -> np.ndarray:
    near = x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:]
    return np.float32(0.5) * x[1:-1, 1:-1] + np.float32(0.125) * near


# --- layer norm over the last axis, with gamma and beta ---------------------------------------------------


def layer_norm_tvm(s: Shape) -> list[Any]:
    """autosched's formulation (norm.layer_norm): sums of ``x - x[i, 0]``, a two-pass variance, eps 1e-5."""
    tte, _ = _tvm()
    m, n = s
    x, gamma, beta = (
        tte.placeholder(s, name="x"),
        tte.placeholder((n,), name="gamma"),
        tte.placeholder((n,), name="beta"),
    )
    k1, k2 = tte.reduce_axis((0, n), "k1"), tte.reduce_axis((0, n), "k2")
    count = _f32(float(n))
    shift = tte.compute((m,), lambda i: x[i, 0], name="shift")
    total = tte.compute((m,), lambda i: tte.sum(x[i, k1] - shift[i], axis=k1), name="sum")

    def varsum(i: Any) -> Any:
        c = x[i, k2] - shift[i] - total[i] / count
        return tte.sum(c * c, axis=k2)

    var = tte.compute((m,), varsum, name="varsum")

    def body(i: Any, j: Any) -> Any:
        c = x[i, j] - shift[i] - total[i] / count
        return c * tte.rsqrt(var[i] / count + _f32(1e-5)) * gamma[j] + beta[j]

    return [x, gamma, beta, tte.compute(s, body, name="layer_norm")]


def layer_norm_tvm_topi(s: Shape) -> list[Any]:
    """TVM's topi.nn.layer_norm: mean and variance in one pass (a tuple reduction of x and x^2)."""
    import tvm.topi

    tte, _ = _tvm()
    x, gamma, beta = (
        tte.placeholder(shape, name=n) for shape, n in ((s, "x"), (s[1:], "gamma"), (s[1:], "beta"))
    )
    return [x, gamma, beta, tvm.topi.nn.layer_norm(x, gamma, beta, axis=[-1], epsilon=1e-5)]


def _layer_norm_np(_s: Shape, x: np.ndarray, gamma: np.ndarray, beta: np.ndarray) -> np.ndarray:
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = x64.var(axis=-1, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + 1e-5) * gamma + beta).astype(np.float32)


# --- 3x3 stride-2 max pooling, NHWC, padding 1 (topi's max_pool2d is NCHW only) ------------------------


def _pool_out(h: int) -> int:
    return (h + 2 - 3) // 2 + 1


def max_pool_ours(s: Shape) -> list[Any]:
    n, h, w, c = s
    data = te.placeholder(s, name="data")
    padded = pad(data, (0, 1, 1, 0), (0, 1, 1, 0), pad_value=lowest("float32"))
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    out = te.compute(
        (n, _pool_out(h), _pool_out(w), c),
        lambda b, y, x, ch: te.max(padded[b, y * 2 + ry, x * 2 + rx, ch], axis=[ry, rx]),
        name="max_pool2d",
    )
    return [data, out]


def max_pool_tvm(s: Shape) -> list[Any]:
    """Padded with float32's lowest (as TVM's topi), where autosched pads with -inf: the same maxima, since
    every window holds a real element."""
    tte, tir = _tvm()
    n, h, w, c = s
    data = tte.placeholder(s, name="data")
    padded = tte.compute(
        (n, h + 2, w + 2, c),
        lambda b, y, x, ch: tte.if_then_else(
            tte.all(y >= 1, y <= h, x >= 1, x <= w), data[b, y - 1, x - 1, ch], tir.min_value("float32")
        ),
        name="pad",
    )
    ry, rx = tte.reduce_axis((0, 3), name="ry"), tte.reduce_axis((0, 3), name="rx")
    out = tte.compute(
        (n, _pool_out(h), _pool_out(w), c),
        lambda b, y, x, ch: tte.max(padded[b, y * 2 + ry, x * 2 + rx, ch], axis=[ry, rx]),
        name="max_pool2d",
    )
    return [data, out]


def _max_pool_np(_s: Shape, x: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    oh, ow = _pool_out(x.shape[1]), _pool_out(x.shape[2])
    taps = [xp[:, ry : ry + 2 * oh : 2, rx : rx + 2 * ow : 2, :] for ry in range(3) for rx in range(3)]
    return np.max(np.stack(taps), axis=0)


# --- conv1d NCW, kernel 3, stride 2, padding 1 -------------------------------------------------------------


def conv1d_ours(s: Shape) -> list[Any]:
    n, c, length, f = s
    return make_conv1d(n, c, length, f, 3, stride=2, padding=1)


def conv1d_tvm(s: Shape) -> list[Any]:
    tte, _ = _tvm()
    n, c, length, f = s
    data, weight = tte.placeholder((n, c, length), name="data"), tte.placeholder((f, c, 3), name="weight")
    padded = tte.compute(
        (n, c, length + 2),
        lambda b, ci, x: tte.if_then_else(tte.all(x >= 1, x <= length), data[b, ci, x - 1], _f32(0.0)),
        name="pad",
    )
    rc, rx = tte.reduce_axis((0, c), "rc"), tte.reduce_axis((0, 3), "rx")
    out_w = (length + 2 - 3) // 2 + 1
    out = tte.compute(
        (n, f, out_w),
        lambda b, ff, x: tte.sum(padded[b, rc, x * 2 + rx] * weight[ff, rc, rx], axis=[rc, rx]),
        name="conv1d",
    )
    return [data, weight, out]


def _conv1d_np(_s: Shape, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1))), 3, axis=2)[:, :, ::2]
    return np.einsum("ncws,kcs->nkw", win, w, optimize=True)


# --- transposed conv2d NCHW, 4x4 kernel, stride 2, padding 1 (H -> 2H) -------------------------------------


def conv_transpose_ours(s: Shape) -> list[Any]:
    n, c, h, w, k = s
    return make_conv2d_transpose(n, c, h, w, k, 4, 4, stride=2, padding=1, output_padding=0)


def conv_transpose_tvm(s: Shape) -> list[Any]:
    """autosched's stride-aware form (conv._transpose_by_phase): output row y reads the 2 taps
    ``q = (y + 1) % 2 + 2 t`` of input row ``(y + 1) // 2 - t``, never the zeros of a dilated input."""
    tte, _ = _tvm()
    n, c, h, w, k = s
    data, weight = tte.placeholder((n, c, h, w), name="data"), tte.placeholder((c, k, 4, 4), name="weight")
    rc, ty, tx = tte.reduce_axis((0, c), "rc"), tte.reduce_axis((0, 2), "ty"), tte.reduce_axis((0, 2), "tx")

    def body(b: Any, f: Any, y: Any, x: Any) -> Any:
        iy, ix = (y + 1) // 2 - ty, (x + 1) // 2 - tx
        qy, qx = (y + 1) % 2 + 2 * ty, (x + 1) % 2 + 2 * tx
        term = data[b, rc, iy, ix] * weight[rc, f, qy, qx]
        inside = tte.all(iy >= 0, iy < h, ix >= 0, ix < w)
        return tte.sum(tte.if_then_else(inside, term, _f32(0.0)), axis=[rc, ty, tx])

    return [data, weight, tte.compute((n, k, 2 * h, 2 * w), body, name="conv2d_transpose")]


def conv_transpose_tvm_topi(s: Shape) -> list[Any]:
    """TVM's topi.nn.conv2d_transpose_nchw: the input dilated by zeros, then a direct conv of all 16 taps."""
    import tvm.topi

    tte, _ = _tvm()
    n, c, h, w, k = s
    data, weight = tte.placeholder((n, c, h, w), name="data"), tte.placeholder((c, k, 4, 4), name="weight")
    out = tvm.topi.nn.conv2d_transpose_nchw(data, weight, (2, 2), (1, 1, 1, 1), "float32", (0, 0))
    return [data, weight, out]


def _conv_transpose_np(_s: Shape, x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The definition: input (i, j) adds ``x * w[r, s]`` to output (2i + r - 1, 2j + s - 1)."""
    n, _, h, wd = x.shape
    full = np.zeros((n, w.shape[1], 2 * h + 2, 2 * wd + 2), np.float64)
    for r in range(4):
        for q in range(4):
            full[:, :, r : r + 2 * h : 2, q : q + 2 * wd : 2] += np.einsum("nchw,ck->nkhw", x, w[:, :, r, q])
    return full[:, :, 1 : 1 + 2 * h, 1 : 1 + 2 * wd].astype(np.float32)


# --- conv2d over 4x4 capsules, NHWIJC (the capsule conv of Ansor's single-op benchmark) -------------------


CAPSULE = 4


def _capsule(tte: Any, padded: Any, kernel: Any, s: Shape) -> Any:
    n, h, _w, ci, co, ksize, stride = s
    out = (h + 2 - ksize) // stride + 1
    rh, rw = tte.reduce_axis((0, ksize), name="rh"), tte.reduce_axis((0, ksize), name="rw")
    ck, rc = tte.reduce_axis((0, CAPSULE), name="cap_k"), tte.reduce_axis((0, ci), name="rc")
    return tte.compute(
        (n, out, out, CAPSULE, CAPSULE, co),
        lambda b, y, x, i, j, o: tte.sum(
            padded[b, y * stride + rh, x * stride + rw, i, ck, rc] * kernel[rh, rw, ck, j, rc, o],
            axis=[rh, rw, ck, rc],
        ),
        name="conv2d_capsule",
    )


def _capsule_inputs(tte: Any, s: Shape) -> tuple[Any, Any]:
    n, h, w, ci, co, ksize, _ = s
    data = tte.placeholder((n, h, w, CAPSULE, CAPSULE, ci), name="data")
    return data, tte.placeholder((ksize, ksize, CAPSULE, CAPSULE, ci, co), name="kernel")


def capsule_ours(s: Shape) -> list[Any]:
    data, kernel = _capsule_inputs(te, s)
    padded = pad(data, (0, 1, 1, 0, 0, 0), (0, 1, 1, 0, 0, 0))
    return [data, kernel, _capsule(te, padded, kernel, s)]


def capsule_tvm(s: Shape) -> list[Any]:
    tte, _ = _tvm()
    data, kernel = _capsule_inputs(tte, s)
    h, w = s[1], s[2]
    padded = tte.compute(
        (s[0], h + 2, w + 2, CAPSULE, CAPSULE, s[3]),
        lambda b, y, x, i, j, c: tte.if_then_else(
            tte.all(y >= 1, y <= h, x >= 1, x <= w), data[b, y - 1, x - 1, i, j, c], _f32(0.0)
        ),
        name="pad",
    )
    return [data, kernel, _capsule(tte, padded, kernel, s)]


def _capsule_np(s: Shape, x: np.ndarray, k: np.ndarray) -> np.ndarray:
    ksize, stride = s[5], s[6]
    out = (x.shape[1] + 2 - ksize) // stride + 1
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0), (0, 0), (0, 0)))
    acc = np.zeros((x.shape[0], out, out, CAPSULE, CAPSULE, k.shape[-1]), np.float64)
    for rh in range(ksize):
        for rw in range(ksize):
            patch = xp[:, rh : rh + stride * out : stride, rw : rw + stride * out : stride]
            acc += np.einsum("nhwikc,kjco->nhwijo", patch, k[rh, rw], optimize=True)
    return acc.astype(np.float32)


OPS: dict[str, Op] = {
    op.name: op
    for op in [
        Op("matmul", (1024, 1024, 1024), (64, 64, 64), lambda s: make_matmul(s[0], s[1], s[2]), matmul_tvm,
           lambda _s, a, b: a @ b),
        Op("conv2d", (1, 64, 56, 56, 64), (1, 8, 14, 14, 16),
           lambda s: make_conv2d(s[0], s[1], s[2], s[3], s[4], 3, 3, stride=1, padding=1), conv2d_tvm,
           _conv2d_np),
        Op("softmax", (4096, 1024), (64, 128), lambda s: make_softmax(s), softmax_tvm, _softmax_np),
        Op("dense", (512, 1024, 1024), (32, 64, 64),
           lambda s: make_dense(s[0], s[1], s[2], bias=True, activation="relu"), dense_tvm,
           lambda _s, x, w, b: np.maximum(x @ w.T + b, 0)),
        Op("sumsq", (1024, 1024), (64, 64), sumsq_ours, sumsq_tvm, _sumsq_np, memory_bound=True),
        Op("stencil", (2048, 2048), (66, 66), stencil_ours, stencil_tvm, _stencil_np, memory_bound=True),
        Op("layer_norm", (4096, 1024), (64, 128), lambda s: make_layer_norm(s, axis=-1), layer_norm_tvm,
           _layer_norm_np, memory_bound=True, tvm_topi=layer_norm_tvm_topi),
        Op("max_pool", (1, 112, 112, 64), (1, 14, 14, 16), max_pool_ours, max_pool_tvm, _max_pool_np,
           memory_bound=True),
        Op("conv1d", (1, 64, 8192, 64), (1, 8, 64, 8), conv1d_ours, conv1d_tvm, _conv1d_np),
        Op("conv2d_transpose", (1, 64, 28, 28, 64), (1, 8, 6, 6, 8), conv_transpose_ours,
           conv_transpose_tvm, _conv_transpose_np, tvm_topi=conv_transpose_tvm_topi),
        Op("capsule_conv2d", (1, 16, 16, 32, 32, 3, 2), (1, 6, 6, 4, 4, 3, 2), capsule_ours, capsule_tvm,
           _capsule_np),
    ]
}  # fmt: skip


def nbytes(tensors: list[Any]) -> int:
    """Bytes a memory-bound op must move at the least: every input read once, every output written once."""
    return sum(math.prod(int(d) for d in t.shape) * 4 for t in tensors)
