"""The op library's workloads: the te programs behind ``autosched.ops``, as an op file to tune.

``autosched.ops.matmul(a, b)`` builds ``ops_matmul(M, N, K, dtype)`` from the arrays' shapes and looks
up its structural key in the logs, so records tuned from this file are found by the op library:

    autosched tune autosched/ops/workloads.py --workload ops_matmul --args M=256 N=256 K=256 \\
        --log tuning_logs/llvm-cpu-$(chip).jsonl

Names carry an ``ops_`` prefix so they never replace a user's ``matmul`` in the workload registry.
Placeholder and stage names are part of the key: renaming one here orphans the shipped records.
"""

from __future__ import annotations

from typing import Any

import autosched
from autosched import te, topi


@autosched.workload
def ops_matmul(M=64, N=64, K=64, dtype="float32"):
    A = te.placeholder((M, K), dtype, name="A")
    B = te.placeholder((K, N), dtype, name="B")
    return [A, B, topi.matmul(A, B)]


@autosched.workload
def ops_batch_matmul(B=4, M=64, N=64, K=64, Bb=None, transpose_b=False, dtype="float32"):
    """A (B, M, K) @ B (Bb, K, N), or (Bb, N, K) with ``transpose_b``; Bb defaults to B (1 broadcasts)."""
    Bb = B if Bb is None else Bb
    a = te.placeholder((B, M, K), dtype, name="A")
    b = te.placeholder((Bb, N, K) if transpose_b else (Bb, K, N), dtype, name="B")
    return [a, b, topi.batch_matmul(a, b, transpose_b=transpose_b)]


@autosched.workload
def ops_dense(M=64, N=64, K=64, bias=True, activation=None, dtype="float32"):
    X = te.placeholder((M, K), dtype, name="X")
    W = te.placeholder((N, K), dtype, name="W")
    b = te.placeholder((N,), dtype, name="bias") if bias else None
    out = topi.dense(X, W, b, activation=activation)
    return [X, W, out] if b is None else [X, W, b, out]


@autosched.workload
def ops_conv2d(
    N=1, C=16, H=28, W=28, K=16, R=3, S=3, stride=1, padding=1, dilation=1, groups=1, dtype="float32"
):
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((K, C // groups, R, S), dtype, name="weight")
    return [data, weight, topi.conv2d(data, weight, stride, padding, dilation, groups)]


@autosched.workload
def ops_depthwise_conv2d(
    N=1, C=16, H=28, W=28, M=1, R=3, S=3, stride=1, padding=1, dilation=1, dtype="float32"
):
    data = te.placeholder((N, C, H, W), dtype, name="data")
    weight = te.placeholder((C, M, R, S), dtype, name="weight")
    return [data, weight, topi.depthwise_conv2d(data, weight, stride, padding, dilation)]


@autosched.workload
def ops_max_pool2d(N=1, C=16, H=28, W=28, kernel=2, stride=None, padding=0, dtype="float32"):
    data = te.placeholder((N, C, H, W), dtype, name="data")
    return [data, topi.max_pool2d(data, kernel, stride, padding)]


@autosched.workload
def ops_avg_pool2d(
    N=1, C=16, H=28, W=28, kernel=2, stride=None, padding=0, count_include_pad=False, dtype="float32"
):
    data = te.placeholder((N, C, H, W), dtype, name="data")
    return [data, topi.avg_pool2d(data, kernel, stride, padding, count_include_pad)]


@autosched.workload
def ops_softmax(shape=(64, 64), axis=-1, dtype="float32"):
    x = te.placeholder(tuple(shape), dtype, name="x")
    return [x, topi.softmax(x, axis=axis)]


@autosched.workload
def ops_layer_norm(shape=(64, 64), axis=-1, epsilon=1e-5, dtype="float32"):
    x = te.placeholder(tuple(shape), dtype, name="x")
    inner = tuple(shape)[axis % len(shape) :]
    gamma = te.placeholder(inner, dtype, name="gamma")
    beta = te.placeholder(inner, dtype, name="beta")
    return [x, gamma, beta, topi.layer_norm(x, gamma, beta, axis=axis, epsilon=epsilon)]


@autosched.workload
def ops_attention(
    B=1, H=4, S=64, L=64, D=32, Dv=None, causal=False, scale=None, dtype="float32", Hkv=None, masked=False
):
    """``Hkv``: K/V heads (grouped-query attention when fewer than ``H``); ``masked``: an additive
    (B, H, S, L) mask is a fourth input."""
    Dv = D if Dv is None else Dv
    Hkv = H if Hkv is None else Hkv
    q = te.placeholder((B, H, S, D), dtype, name="q")
    k = te.placeholder((B, Hkv, L, D), dtype, name="k")
    v = te.placeholder((B, Hkv, L, Dv), dtype, name="v")
    mask = te.placeholder((B, H, S, L), dtype, name="mask") if masked else None
    out = topi.scaled_dot_product_attention(q, k, v, scale=scale, causal=causal, mask=mask)
    return [q, k, v, out] if mask is None else [q, k, v, mask, out]


BINARY: dict[str, Any] = {
    "add": topi.add, "subtract": topi.subtract, "multiply": topi.multiply, "divide": topi.divide,
    "maximum": topi.maximum, "minimum": topi.minimum,
}  # fmt: skip
UNARY: dict[str, Any] = {
    "relu": topi.relu,
    "exp": topi.exp,
    "tanh": topi.tanh,
    "sigmoid": topi.sigmoid,
    "gelu": topi.gelu,
}
REDUCE: dict[str, Any] = {"sum": topi.sum, "max": topi.max, "min": topi.min, "mean": topi.mean}


@autosched.workload
def ops_binary(op="add", shape_a=(64, 64), shape_b=(64, 64), dtype="float32"):
    """``op`` (a key of BINARY) of two arrays that broadcast as in numpy."""
    a = te.placeholder(tuple(shape_a), dtype, name="a")
    b = te.placeholder(tuple(shape_b), dtype, name="b")
    return [a, b, BINARY[op](a, b)]


@autosched.workload
def ops_binary_scalar(op="add", shape=(64, 64), value=1.0, scalar_first=False, dtype="float32"):
    """``op`` of an array and a Python number (``value`` is baked into the kernel)."""
    a = te.placeholder(tuple(shape), dtype, name="a")
    out = BINARY[op](value, a) if scalar_first else BINARY[op](a, value)
    return [a, out]


@autosched.workload
def ops_unary(op="relu", shape=(64, 64), dtype="float32"):
    x = te.placeholder(tuple(shape), dtype, name="x")
    return [x, UNARY[op](x)]


@autosched.workload
def ops_reduce(op="sum", shape=(64, 64), axis=None, keepdims=False, dtype="float32"):
    x = te.placeholder(tuple(shape), dtype, name="x")
    return [x, REDUCE[op](x, axis=axis, keepdims=keepdims)]
