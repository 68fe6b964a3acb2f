"""The op library's functions: numpy (or DLPack) arrays in, new numpy arrays out.

Every function takes ``platform="auto"`` (the best device here, ``autosched.hai.detect()``; or a target
string such as ``"llvm-cpu -mcpu=haswell"``) and ``logs=`` (tuning logs searched before
``$AUTOSCHED_LOGS`` and the shipped ``tuning_logs/``).

Example::

    c = autosched.ops.matmul(a, b)                                  # tuned kernel when a log has one
    y = autosched.ops.conv2d(x, w, stride=2, padding=1, logs="my_log.jsonl")
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .dispatch import as_array, run_op

Platform = str
Logs = Any


def _t(v: Any) -> Any:
    """Lists as tuples (hashable, and what the workload key sees either way)."""
    return tuple(_t(x) for x in v) if isinstance(v, (list, tuple)) else v


def _dt(x: np.ndarray) -> np.dtype:
    return x.dtype  # made a string once per shape, in dispatch: str(dtype) costs microseconds per call


def matmul(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``a @ b`` for a (M, K), b (K, N). Example: ``c = matmul(a, b)``."""
    a, b = as_array("matmul", "a", a), as_array("matmul", "b", b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"autosched.ops.matmul: a and b must be 2-d, got shapes {a.shape} and {b.shape}")
    args = {"M": a.shape[0], "N": b.shape[1], "K": a.shape[1], "dtype": _dt(a)}
    if b.shape[0] != a.shape[1]:
        raise ValueError(
            f"autosched.ops.matmul: a is {a.shape}, b is {b.shape}: a's columns must equal b's rows"
        )
    return run_op("matmul", "ops_matmul", args, [a, b], platform, logs)


def batch_matmul(
    a: Any, b: Any, transpose_b: bool = False, *, platform: Platform = "auto", logs: Logs = None
) -> np.ndarray:
    """A matmul per batch: a (B, M, K), b (B, K, N) or (B, N, K) with ``transpose_b``; batch 1 broadcasts."""
    a, b = as_array("batch_matmul", "a", a), as_array("batch_matmul", "b", b)
    if a.ndim != 3 or b.ndim != 3:
        raise ValueError(f"autosched.ops.batch_matmul: a and b must be 3-d, got {a.shape} and {b.shape}")
    N = b.shape[1] if transpose_b else b.shape[2]
    Kb = b.shape[2] if transpose_b else b.shape[1]
    if Kb != a.shape[2]:
        raise ValueError(f"autosched.ops.batch_matmul: reduction dims differ: a is {a.shape}, b is {b.shape}")
    args = {"B": a.shape[0], "M": a.shape[1], "N": N, "K": a.shape[2], "Bb": b.shape[0],
            "transpose_b": bool(transpose_b), "dtype": _dt(a)}  # fmt: skip
    return run_op("batch_matmul", "ops_batch_matmul", args, [a, b], platform, logs)


def dense(
    x: Any, weight: Any, bias: Any = None, activation: str | None = None, *,
    platform: Platform = "auto", logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """``activation(x @ weight.T + bias)``: x (M, K), weight (N, K), bias (N,); activation relu/gelu/None."""
    x, w = as_array("dense", "x", x), as_array("dense", "weight", weight)
    if x.ndim != 2 or w.ndim != 2:
        raise ValueError(f"autosched.ops.dense: x and weight must be 2-d, got {x.shape} and {w.shape}")
    inputs = [x, w] if bias is None else [x, w, as_array("dense", "bias", bias)]
    args = {"M": x.shape[0], "N": w.shape[0], "K": x.shape[1], "bias": bias is not None,
            "activation": activation, "dtype": _dt(x)}  # fmt: skip
    return run_op("dense", "ops_dense", args, inputs, platform, logs)


def conv2d(
    data: Any, weight: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1, *,
    platform: Platform = "auto", logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """NCHW conv: data (N, C, H, W), weight (K, C/groups, R, S); padding int, (h, w) or (t, l, b, r)."""
    d, w = as_array("conv2d", "data", data), as_array("conv2d", "weight", weight)
    if d.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"autosched.ops.conv2d: data and weight must be 4-d (NCHW, KCRS), got {d.shape}, {w.shape}"
        )
    N, C, H, W = d.shape
    K, _, R, S = w.shape
    args = {"N": N, "C": C, "H": H, "W": W, "K": K, "R": R, "S": S, "stride": _t(stride),
            "padding": _t(padding), "dilation": _t(dilation), "groups": int(groups),
            "dtype": _dt(d)}  # fmt: skip
    return run_op("conv2d", "ops_conv2d", args, [d, w], platform, logs)


def depthwise_conv2d(
    data: Any, weight: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, *,
    platform: Platform = "auto", logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """Depthwise NCHW conv with weight (C, M, R, S): output channel c*M + m."""
    d, w = as_array("depthwise_conv2d", "data", data), as_array("depthwise_conv2d", "weight", weight)
    if d.ndim != 4 or w.ndim != 4:
        raise ValueError(
            f"autosched.ops.depthwise_conv2d: data and weight must be 4-d, got {d.shape}, {w.shape}"
        )
    N, C, H, W = d.shape
    _, M, R, S = w.shape
    args = {"N": N, "C": C, "H": H, "W": W, "M": M, "R": R, "S": S, "stride": _t(stride),
            "padding": _t(padding), "dilation": _t(dilation), "dtype": _dt(d)}  # fmt: skip
    return run_op("depthwise_conv2d", "ops_depthwise_conv2d", args, [d, w], platform, logs)


def _pool(op: str, data: Any, extra: dict[str, Any], platform: str, logs: Logs) -> np.ndarray:
    d = as_array(op, "data", data)
    if d.ndim != 4:
        raise ValueError(f"autosched.ops.{op}: data must be 4-d (N, C, H, W), got {d.shape}")
    N, C, H, W = d.shape
    args = {"N": N, "C": C, "H": H, "W": W, **{k: _t(v) for k, v in extra.items()}, "dtype": _dt(d)}
    return run_op(op, f"ops_{op}", args, [d], platform, logs)


def max_pool2d(
    data: Any, kernel: Any, stride: Any = None, padding: Any = 0, *, platform: Platform = "auto",
    logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """Max over kernel windows of NCHW data; ``stride`` defaults to ``kernel``."""
    return _pool("max_pool2d", data, {"kernel": kernel, "stride": stride, "padding": padding}, platform, logs)


def avg_pool2d(
    data: Any, kernel: Any, stride: Any = None, padding: Any = 0, count_include_pad: bool = False, *,
    platform: Platform = "auto", logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """Mean over kernel windows; padding is left out of the divisor unless ``count_include_pad``."""
    extra = {
        "kernel": kernel,
        "stride": stride,
        "padding": padding,
        "count_include_pad": bool(count_include_pad),
    }
    return _pool("avg_pool2d", data, extra, platform, logs)


def softmax(x: Any, axis: int = -1, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """Softmax along ``axis``. Example: ``p = softmax(scores)``."""
    x = as_array("softmax", "x", x)
    return run_op("softmax", "ops_softmax", {"shape": x.shape, "axis": int(axis), "dtype": _dt(x)}, [x],
                  platform, logs)  # fmt: skip


def layer_norm(
    x: Any, gamma: Any, beta: Any, axis: int = -1, epsilon: float = 1e-5, *, platform: Platform = "auto",
    logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """Normalize over the dims from ``axis`` on; gamma and beta have shape ``x.shape[axis:]``."""
    x = as_array("layer_norm", "x", x)
    g, b = as_array("layer_norm", "gamma", gamma), as_array("layer_norm", "beta", beta)
    args = {"shape": x.shape, "axis": int(axis), "epsilon": float(epsilon), "dtype": _dt(x)}
    return run_op("layer_norm", "ops_layer_norm", args, [x, g, b], platform, logs)


def attention(
    q: Any, k: Any, v: Any, *, causal: bool = False, mask: Any = None, scale: float | None = None,
    platform: Platform = "auto", logs: Logs = None,
) -> np.ndarray:  # fmt: skip
    """``softmax(q @ k^T * scale + mask) @ v``: q (B, H, S, D), k (B, Hkv, L, D), v (B, Hkv, L, Dv).

    ``Hkv`` may divide ``H`` (grouped-query / multi-query attention: query head h reads K/V head
    ``h // (H // Hkv)``); ``mask`` is additive, broadcast to (B, H, S, L) (-inf hides a key); ``causal``
    lets query i see keys up to ``i + L - S``. On CPUs it runs as a flash-attention loop nest (memory
    linear in the sequence). ``causal``, ``mask`` and ``scale`` are keyword-only (an older signature
    took ``scale`` fourth). Example: ``ops.attention(q, k, v, causal=True)``.
    """
    q, k, v = (as_array("attention", n, t) for n, t in (("q", q), ("k", k), ("v", v)))
    if q.ndim != 4 or k.ndim != 4 or v.ndim != 4:
        raise ValueError(f"autosched.ops.attention: q, k, v must be 4-d, got {q.shape}, {k.shape}, {v.shape}")
    B, H, S, D = q.shape
    L = k.shape[2]
    arrays = [q, k, v]
    if mask is not None:
        m = as_array("attention", "mask", mask)
        try:
            m = np.ascontiguousarray(np.broadcast_to(m, (B, H, S, L)), dtype=q.dtype)
        except ValueError:
            raise ValueError(
                f"autosched.ops.attention: mask of shape {m.shape} does not broadcast to (B, H, S, L) = "
                f"{(B, H, S, L)}"
            ) from None
        arrays.append(m)
    args = {"B": B, "H": H, "S": S, "L": L, "D": D, "Dv": v.shape[3], "causal": bool(causal),
            "scale": None if scale is None else float(scale), "dtype": _dt(q)}  # fmt: skip
    if k.shape[1] != H:
        args["Hkv"] = k.shape[1]
    if mask is not None:
        args["masked"] = True
    return run_op("attention", "ops_attention", args, arrays, platform, logs)


def _binary(op: str, a: Any, b: Any, platform: str, logs: Logs) -> np.ndarray:
    scalars = tuple(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    if all(scalars):
        raise TypeError(f"autosched.ops.{op}: at least one of a, b must be an array")
    if any(scalars):
        first = scalars[0]
        x = as_array(op, "b" if first else "a", b if first else a)
        value = a if first else b
        args = {"op": op, "shape": x.shape, "value": value, "scalar_first": first, "dtype": _dt(x)}
        return run_op(op, "ops_binary_scalar", args, [x], platform, logs)
    x, y = as_array(op, "a", a), as_array(op, "b", b)
    args = {"op": op, "shape_a": x.shape, "shape_b": y.shape, "dtype": _dt(x)}
    return run_op(op, "ops_binary", args, [x, y], platform, logs)


def add(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``a + b`` with numpy broadcasting; either may be a Python number."""
    return _binary("add", a, b, platform, logs)


def subtract(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``a - b`` with numpy broadcasting."""
    return _binary("subtract", a, b, platform, logs)


def multiply(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``a * b`` with numpy broadcasting."""
    return _binary("multiply", a, b, platform, logs)


def divide(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``a / b`` (floats) with numpy broadcasting."""
    return _binary("divide", a, b, platform, logs)


def maximum(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """Elementwise maximum with numpy broadcasting."""
    return _binary("maximum", a, b, platform, logs)


def minimum(a: Any, b: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """Elementwise minimum with numpy broadcasting."""
    return _binary("minimum", a, b, platform, logs)


def _unary(op: str, x: Any, platform: str, logs: Logs) -> np.ndarray:
    x = as_array(op, "x", x)
    return run_op(op, "ops_unary", {"op": op, "shape": x.shape, "dtype": _dt(x)}, [x], platform, logs)


def relu(x: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``max(x, 0)``."""
    return _unary("relu", x, platform, logs)


def exp(x: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``e ** x``."""
    return _unary("exp", x, platform, logs)


def tanh(x: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """Hyperbolic tangent."""
    return _unary("tanh", x, platform, logs)


def sigmoid(x: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """``1 / (1 + e ** -x)``."""
    return _unary("sigmoid", x, platform, logs)


def gelu(x: Any, *, platform: Platform = "auto", logs: Logs = None) -> np.ndarray:
    """Exact (erf) gelu."""
    return _unary("gelu", x, platform, logs)


def _reduce(op: str, x: Any, axis: Any, keepdims: bool, platform: str, logs: Logs) -> np.ndarray:
    x = as_array(op, "x", x)
    args = {"op": op, "shape": x.shape, "axis": _t(axis), "keepdims": bool(keepdims), "dtype": _dt(x)}
    return run_op(op, "ops_reduce", args, [x], platform, logs)


def sum(x: Any, axis: Any = None, keepdims: bool = False, *, platform: Platform = "auto",
        logs: Logs = None) -> np.ndarray:  # fmt: skip
    """Sum over ``axis`` (all when None)."""
    return _reduce("sum", x, axis, keepdims, platform, logs)


def max(x: Any, axis: Any = None, keepdims: bool = False, *, platform: Platform = "auto",
        logs: Logs = None) -> np.ndarray:  # fmt: skip
    """Maximum over ``axis``."""
    return _reduce("max", x, axis, keepdims, platform, logs)


def min(x: Any, axis: Any = None, keepdims: bool = False, *, platform: Platform = "auto",
        logs: Logs = None) -> np.ndarray:  # fmt: skip
    """Minimum over ``axis``."""
    return _reduce("min", x, axis, keepdims, platform, logs)


def mean(x: Any, axis: Any = None, keepdims: bool = False, *, platform: Platform = "auto",
         logs: Logs = None) -> np.ndarray:  # fmt: skip
    """Mean over ``axis``."""
    return _reduce("mean", x, axis, keepdims, platform, logs)
