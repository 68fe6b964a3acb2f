"""topi operators against independent numpy implementations, through the te reference evaluator."""

from __future__ import annotations

import math

import numpy as np
import pytest

from autosched import te, topi
from autosched.te.graph import topo_order
from autosched.te.reference import evaluate, random_inputs
from autosched.topi import workloads as W
from autosched.topi.workloads import SMALL_CASES

P = te.placeholder

# numpy implementations, written from the definitions, not from the topi code ---------------------


def np_conv(x, w, stride, padding, dilation=1, groups=1):
    """N-d channels-first conv by summing one shifted, strided slice per kernel offset."""
    n = x.ndim - 2
    st = (stride,) * n if isinstance(stride, int) else stride
    dl = (dilation,) * n if isinstance(dilation, int) else dilation
    pd = (padding,) * n if isinstance(padding, int) else padding
    x = np.pad(x.astype(np.float64), [(0, 0), (0, 0), *[(p, p) for p in pd]])
    N = x.shape[0]
    K, Cg = w.shape[:2]
    kern = w.shape[2:]
    outs = [(x.shape[2 + d] - dl[d] * (kern[d] - 1) - 1) // st[d] + 1 for d in range(n)]
    out = np.zeros((N, K, *outs))
    Kg = K // groups
    for off in np.ndindex(*kern):
        sl = tuple(slice(o * dl[d], o * dl[d] + (outs[d] - 1) * st[d] + 1, st[d]) for d, o in enumerate(off))
        patch = x[(slice(None), slice(None), *sl)]
        for g in range(groups):
            wg = w[(slice(g * Kg, (g + 1) * Kg), slice(None), *off)]
            xg = patch[:, g * Cg : (g + 1) * Cg]
            out[:, g * Kg : (g + 1) * Kg] += np.einsum("nc...,kc->nk...", xg, wg)
    return out


def np_conv2d_transpose(x, w, stride, padding, output_padding, dilation=1, groups=1):
    """Scatter definition: input pixel i adds x[i] * w[r] to output row i*stride - pad + r*dilation."""
    st, pd, op, dl = (
        (v, v) if isinstance(v, int) else v for v in (stride, padding, output_padding, dilation)
    )
    N, C, H, Wd = x.shape
    _, Kg, R, S = w.shape
    Cg = C // groups
    full = [(H - 1) * st[0] + dl[0] * (R - 1) + 1 + op[0], (Wd - 1) * st[1] + dl[1] * (S - 1) + 1 + op[1]]
    out = np.zeros((N, Kg * groups, *full))
    for g in range(groups):
        xg = x[:, g * Cg : (g + 1) * Cg].astype(np.float64)
        for r in range(R):
            for s in range(S):
                contrib = np.einsum("nchw,ck->nkhw", xg, w[g * Cg : (g + 1) * Cg, :, r, s])
                y0, x0 = r * dl[0], s * dl[1]
                out[:, g * Kg : (g + 1) * Kg, y0 : y0 + (H - 1) * st[0] + 1 : st[0],
                    x0 : x0 + (Wd - 1) * st[1] + 1 : st[1]] += contrib  # fmt: skip
    oh = full[0] - 2 * pd[0]
    ow = full[1] - 2 * pd[1]
    return out[:, :, pd[0] : pd[0] + oh, pd[1] : pd[1] + ow]


def np_pool(x, k, s, p, kind, count_include_pad=False):
    fill = -np.inf if kind == "max" else 0.0
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (p, p), (p, p)], constant_values=fill)
    ones = np.pad(np.ones(x.shape[2:]), [(p, p), (p, p)])
    oh, ow = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
    out = np.zeros((*x.shape[:2], oh, ow))
    for i in range(oh):
        for j in range(ow):
            win = xp[:, :, i * s : i * s + k, j * s : j * s + k]
            if kind == "max":
                out[:, :, i, j] = win.max(axis=(2, 3))
            else:
                n = k * k if count_include_pad else ones[i * s : i * s + k, j * s : j * s + k].sum()
                out[:, :, i, j] = win.sum(axis=(2, 3)) / n
    return out


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_gelu(x):
    return 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))


def np_layer_norm(x, g, b, axis):
    axes = tuple(range(axis % x.ndim, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axes, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def np_attention(q, k, v, causal=False):
    s = np.einsum("bhid,bhjd->bhij", q, k) / math.sqrt(q.shape[-1])
    if causal:
        S, L = s.shape[-2:]
        s = np.where(np.arange(L)[None, :] <= np.arange(S)[:, None] + (L - S), s, -np.inf)
    return np.einsum("bhij,bhjd->bhid", np_softmax(s), v)


def np_dense(x, w, b, act):
    y = x @ w.T + b
    return np.maximum(y, 0) if act == "relu" else np_gelu(y)


EXPECTED = {
    "matmul": lambda a, b: a @ b,
    "batch_matmul": lambda a, b: a @ b,
    "batch_matmul_nt": lambda a, b: a @ b.transpose(0, 2, 1),
    "dense_bias_relu": lambda x, w, b: np_dense(x, w, b, "relu"),
    "dense_bias_gelu": lambda x, w, b: np_dense(x, w, b, "gelu"),
    "conv1d": lambda x, w: np_conv(x, w, 2, 2, 2, 2),
    "conv2d": lambda x, w: np_conv(x, w, 1, 1),
    "conv2d_strided_dilated_grouped": lambda x, w: np_conv(x, w, 2, 2, 2, 2),
    "conv3d": lambda x, w: np_conv(x, w, (1, 2, 1), 1),
    # Depthwise is a grouped conv with one group per input channel: weight (C, M) -> (C*M, 1).
    "depthwise_conv2d": lambda x, w: np_conv(x, w.reshape(-1, 1, *w.shape[2:]), 2, 1, 1, x.shape[1]),
    "conv2d_transpose": lambda x, w: np_conv2d_transpose(x, w, 2, 1, 1),
    "conv2d_transpose_grouped": lambda x, w: np_conv2d_transpose(x, w, 3, (0, 2), 0, 2, 2),
    "max_pool2d": lambda x: np_pool(x, 3, 2, 1, "max"),
    "avg_pool2d": lambda x: np_pool(x, 3, 2, 1, "avg"),
    "avg_pool2d_include_pad": lambda x: np_pool(x, 2, 2, 1, "avg", count_include_pad=True),
    "broadcast_add": lambda a, b: a + b,
    "broadcast_divide": lambda a, b: a.astype(np.float64) / b,
    "broadcast_maximum": np.maximum,
    "gelu": np_gelu,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x.astype(np.float64))),
    "reduce_sum": lambda x: x.astype(np.float64).sum(axis=(0, 2)),
    "reduce_max_keepdims": lambda x: x.max(axis=-1, keepdims=True),
    "reduce_min_all": lambda x: x.min().reshape(1),
    "reduce_mean": lambda x: x.astype(np.float64).mean(axis=1),
    "softmax": lambda x: np_softmax(x.astype(np.float64)),
    "layer_norm": lambda x, g, b: np_layer_norm(x.astype(np.float64), g, b, -1),
    "layer_norm_2d": lambda x, g, b: np_layer_norm(x.astype(np.float64), g, b, 1),
    "batch_norm": lambda x, g, b, m, v: (
        (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5) * g[:, None, None] + b[:, None, None]
    ),
    "attention": lambda q, k, v: np_attention(q.astype(np.float64), k, v),
    "attention_causal": lambda q, k, v: np_attention(q.astype(np.float64), k, v, causal=True),
    "transpose": lambda x: x.transpose(0, 2, 3, 1),
    "reshape": lambda x: x.reshape(4, -1),
    "pad": lambda x: np.pad(x, [(0, 1), (1, 0), (2, 3)], constant_values=0.5),
    "take": lambda x, i: np.take(x, i, axis=0, mode="clip"),
    "gather": lambda x, i: np.take_along_axis(x, np.clip(i, 0, x.shape[1] - 1), axis=1),
    "concatenate": lambda *xs: np.concatenate(xs, axis=1),
}


def _inputs(case: str, tensors: list, seed: int = 0) -> list[np.ndarray]:
    # int_high beyond the gathered dims exercises clipping of out-of-range indices.
    arrays = random_inputs(tensors, seed=seed, int_high=14)
    if case == "batch_norm":
        arrays[-1] = np.abs(arrays[-1]) + 0.1  # a variance is positive
    return arrays


def test_every_case_has_an_expectation():
    assert set(SMALL_CASES) == set(EXPECTED)


@pytest.mark.parametrize("case", sorted(SMALL_CASES))
def test_small_case_matches_numpy(case):
    tensors = SMALL_CASES[case]()
    inputs = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    outputs = tensors[len(inputs) :]
    assert all(isinstance(t.op, te.ComputeOp) for t in outputs), "inputs come first, then outputs"
    assert all(d <= 16 for t in tensors for d in t.shape)
    arrays = _inputs(case, tensors)
    (got,) = evaluate(outputs, dict(zip(inputs, arrays, strict=True)))
    want = EXPECTED[case](*arrays)
    assert got.shape == want.shape
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "make, expect",
    [
        (lambda: W.make_conv2d(C=4, H=7, W=7, K=4, stride=2, padding=1, groups=2, dtype="float64"),
         lambda x, w: np_conv(x, w, 2, 1, 1, 2)),
        (lambda: W.make_softmax((3, 7), dtype="float64"), np_softmax),
        (lambda: W.make_layer_norm((2, 5), dtype="float64"), lambda x, g, b: np_layer_norm(x, g, b, -1)),
        (lambda: W.make_dense(M=3, N=4, K=5, activation="gelu", dtype="float64"),
         lambda x, w, b: np_dense(x, w, b, "gelu")),
        (lambda: W.make_avg_pool2d(C=2, H=6, W=6, kernel=3, stride=1, padding=1, dtype="float64"),
         lambda x: np_pool(x, 3, 1, 1, "avg")),
    ],
)  # fmt: skip
def test_float64(make, expect):
    tensors = make()
    inputs = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    arrays = random_inputs(tensors, seed=3)
    (got,) = evaluate([tensors[-1]], dict(zip(inputs, arrays, strict=True)))
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, expect(*arrays), rtol=1e-12, atol=1e-12)


def test_asymmetric_padding_and_int_pool():
    # (top, left, bottom, right) padding equals a conv over the explicitly padded input.
    x, w = P((1, 2, 6, 7), name="x"), P((3, 2, 3, 2), name="w")
    a, b = random_inputs([x, w], seed=5)
    (got,) = evaluate([topi.conv2d(x, w, stride=(2, 1), padding=(1, 0, 2, 1))], {x: a, w: b})
    want = np_conv(np.pad(a, [(0, 0), (0, 0), (1, 2), (0, 1)]), b, (2, 1), 0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # Integer max pooling pads with the smallest int32, so padding never wins.
    xi = P((1, 1, 4, 4), "int32", name="xi")
    ai = -np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4)
    (got,) = evaluate([topi.max_pool2d(xi, kernel=2, stride=2, padding=1)], {xi: ai})
    np.testing.assert_array_equal(got, np_pool(ai, 2, 2, 1, "max").astype(np.int32))


def _stage_names(out):
    return [op.name for op in topo_order([out]) if isinstance(op, te.ComputeOp)]


def test_stage_structure():
    # Schedulers rely on these boundaries: elementwise epilogues apart from their reductions.
    assert _stage_names(W.make_dense(activation="relu")[-1]) == ["dense", "bias_relu"]
    assert _stage_names(W.make_dense(bias=False, activation=None)[-1]) == ["dense"]
    assert _stage_names(W.make_softmax()[-1]) == [
        "softmax_maxelem", "softmax_exp", "softmax_expsum", "softmax_norm"
    ]  # fmt: skip
    assert _stage_names(W.make_conv2d(padding=1)[-1]) == ["pad", "conv2d"]
    assert _stage_names(W.make_conv2d(padding=0)[-1]) == ["conv2d"]
    assert _stage_names(W.make_avg_pool2d()[-1]) == ["pad", "pool_sum", "avg_pool2d"]
    conv = W.make_conv2d()[-1]
    assert [a.name for a in conv.op.axis] == ["nn", "ff", "yy", "xx"]
    assert [a.name for a in conv.op.reduce_axis] == ["rc", "ry", "rx"]


def test_scalar_operands_and_defaults():
    x = te.placeholder((3, 4), name="x")
    a = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    (got,) = evaluate([topi.maximum(x, 0.0)], {x: a})
    np.testing.assert_array_equal(got, np.maximum(a, 0))
    (got,) = evaluate([topi.subtract(1, x)], {x: a})
    np.testing.assert_array_equal(got, 1 - a)
    (got,) = evaluate([topi.transpose(x)], {x: a})
    np.testing.assert_array_equal(got, a.T)
    (got,) = evaluate([topi.sum(x, axis=0, keepdims=True)], {x: a})
    np.testing.assert_allclose(got, a.sum(axis=0, keepdims=True))


# Argument errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, exc, match",
    [
        (lambda: topi.conv2d(P((1, 4, 8)), P((4, 4, 3, 3))), ValueError,
         r"conv2d: data has 3 dims, expected 4 \(N, C, H, W\)"),
        (lambda: topi.conv2d(P((1, 4, 8, 8)), P((4, 3, 3, 3))), ValueError,
         r"conv2d: weight has 3 input channels per group, expected C/groups = 4/1 = 4"),
        (lambda: topi.conv2d(P((1, 6, 8, 8)), P((4, 2, 3, 3)), groups=4), ValueError,
         r"conv2d: groups=4 does not divide the 6 input channels"),
        (lambda: topi.conv2d(P((1, 4, 8, 8)), P((6, 1, 3, 3)), groups=4), ValueError,
         r"groups=4 does not divide the 6 output channels"),
        (lambda: topi.conv2d(P((1, 4, 4, 4)), P((4, 4, 3, 3)), dilation=3), ValueError,
         r"conv2d: kernel of extent 7 .* larger than the padded input"),
        (lambda: topi.conv2d(P((1, 4, 8, 8)), P((4, 4, 3, 3)), stride=0), ValueError,
         r"conv2d: stride must be >= 1, got 0"),
        (lambda: topi.conv2d(P((1, 4, 8, 8)), P((4, 4, 3, 3)), padding=(1, 2, 3)), ValueError,
         r"conv2d: padding must be an int, 2 ints or 4 ints"),
        (lambda: topi.conv2d(P((1, 4, 8, 8)), P((4, 4, 3, 3), "float64")), TypeError,
         r"conv2d: dtypes differ \(data is float32, weight is float64\)"),
        (lambda: topi.conv2d(np.zeros((1, 4, 8, 8)), P((4, 4, 3, 3))), TypeError,
         r"conv2d: data must be a te.Tensor, got ndarray"),
        (lambda: topi.conv1d(P((1, 4, 8, 8)), P((4, 4, 3))), ValueError,
         r"conv1d: data has 4 dims, expected 3"),
        (lambda: topi.conv3d(P((1, 4, 8, 8, 8)), P((4, 4, 3, 3))), ValueError, r"conv3d: weight has 4 dims"),
        (lambda: topi.depthwise_conv2d(P((1, 4, 8, 8)), P((3, 1, 3, 3))), ValueError,
         r"depthwise_conv2d: weight has 3 channels, data has 4"),
        (lambda: topi.conv2d_transpose(P((1, 4, 8, 8)), P((4, 2, 3, 3)), stride=2, output_padding=2),
         ValueError, r"conv2d_transpose: output_padding"),
        (lambda: topi.max_pool2d(P((1, 4, 8, 8)), kernel=2, padding=2), ValueError,
         r"max_pool2d: padding before \(2, 2\) must be smaller than the kernel"),
        (lambda: topi.avg_pool2d(P((1, 4, 8, 8), "int32"), kernel=2), TypeError,
         r"avg_pool2d: data must be float32 or float64, got int32"),
        (lambda: topi.matmul(P((4, 5)), P((6, 3))), ValueError, r"matmul: reduction dims differ"),
        (lambda: topi.batch_matmul(P((2, 4, 5)), P((3, 5, 3))), ValueError,
         r"batch_matmul: batch dims differ"),
        (lambda: topi.dense(P((4, 5)), P((3, 5)), activation="swish"), ValueError,
         r"dense: activation must be 'relu', 'gelu' or None, got 'swish'"),
        (lambda: topi.dense(P((4, 5)), P((3, 5)), P((4,))), ValueError,
         r"dense: bias has 4 elements, expected N=3"),
        (lambda: topi.add(P((3, 4)), P((2, 4))), ValueError,
         r"add: shapes \(3, 4\) and \(2, 4\) do not broadcast"),
        (lambda: topi.add(P((3, 4)), "x"), TypeError, r"add: b must be a te.Tensor or a Python number"),
        (lambda: topi.divide(P((3,), "int32"), P((3,), "int32")), TypeError, r"divide: a must be float"),
        (lambda: topi.sum(P((3, 4)), axis=2), ValueError, r"sum: axis 2 is out of range for 2 dims"),
        (lambda: topi.mean(P((3, 4)), axis=(1, -1)), ValueError, r"mean: axis \(1, -1\) repeats a dim"),
        (lambda: topi.softmax(P((3, 4), "int32")), TypeError, r"softmax: x must be float32 or float64"),
        (lambda: topi.layer_norm(P((2, 3, 4)), P((3, 4)), P((4,))), ValueError,
         r"layer_norm: gamma has shape \(3, 4\), expected x.shape\[-1:\] = \(4,\)"),
        (lambda: topi.batch_norm(P((2, 3, 4, 4)), *[P((4,))] * 4), ValueError,
         r"batch_norm: gamma has 4 elements, expected C=3"),
        (lambda: topi.scaled_dot_product_attention(P((1, 2, 4, 8)), P((1, 2, 5, 6)), P((1, 2, 5, 8))),
         ValueError, r"k has dim 6, q has 8"),
        (lambda: topi.transpose(P((2, 3, 4)), (0, 1, 1)), ValueError,
         r"transpose: axes must be a permutation of 0..2"),
        (lambda: topi.reshape(P((2, 3)), (4, -1)), ValueError, r"reshape: cannot reshape \(2, 3\)"),
        (lambda: topi.pad(P((2, 3)), (1,)), ValueError, r"pad: pad_before must have 2 ints"),
        (lambda: topi.take(P((5, 3)), P((4,))), TypeError, r"take: indices must be int32, got float32"),
        (lambda: topi.gather(P((5, 3)), 0, P((2, 4), "int32")), ValueError,
         r"gather: indices dim 1 is 4, expected 3"),
        (lambda: topi.concatenate([P((2, 3)), P((3, 3))], axis=1), ValueError,
         r"concatenate: tensors\[1\] has shape \(3, 3\)"),
    ],
)  # fmt: skip
def test_argument_errors(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize(
    "stride, padding, output_padding, dilation", [(1, 2, 0, 1), (1, 0, 0, 2), (2, 3, 1, 1)]
)
def test_conv2d_transpose_variants(stride, padding, output_padding, dilation):
    x, w = P((1, 2, 5, 4), name="x"), P((2, 3, 3, 3), name="w")
    a, b = random_inputs([x, w], seed=7)
    out = topi.conv2d_transpose(x, w, stride, padding, output_padding, dilation)
    (got,) = evaluate([out], {x: a, w: b})
    want = np_conv2d_transpose(a, b, stride, padding, output_padding, dilation)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
