"""Normalizations: softmax, layer_norm and batch_norm (inference)."""

from __future__ import annotations

import math
from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_float, check_same_dtype, check_tensor, normalize_axis
from .index import named


def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    """Numerically stable softmax along ``axis``, in TVM's four stages.

    "<name>_maxelem" (max reduce), "<name>_exp" (``exp(x - max)``), "<name>_expsum" (sum reduce) and
    "<name>_norm" (``exp / expsum``); a scheduler may inline the exp stage into its two readers.
    Example: ``softmax(scores)`` normalizes the last axis.
    """
    fn = "softmax"
    check_tensor(fn, "x", x)
    check_float(fn, "x", x)
    ax = normalize_axis(fn, axis, x.ndim)
    n = x.ndim
    red_shape = tuple(d for i, d in enumerate(x.shape) if i != ax) or (1,)
    red_names = [f"i{d}" for d in range(len(red_shape))]
    names = [f"i{d}" for d in range(n)]
    k1 = te.reduce_axis((0, x.shape[ax]), name="k")
    k2 = te.reduce_axis((0, x.shape[ax]), name="k")

    def at(idx: Any, k: Any) -> tuple[Any, ...]:
        """The full index of x from a reduced index and a position along ``axis``."""
        outer = list(idx) if n > 1 else []
        return (*outer[:ax], k, *outer[ax:])

    def dropped(idx: Any) -> tuple[Any, ...]:
        return tuple(i for d, i in enumerate(idx) if d != ax) if n > 1 else (0,)

    maxelem = te.compute(
        red_shape, named(lambda *i: te.max(x[at(i, k1)], axis=k1), red_names), name=f"{name}_maxelem"
    )
    exp = te.compute(x.shape, named(lambda *i: te.exp(x[i] - maxelem[dropped(i)]), names), name=f"{name}_exp")
    expsum = te.compute(
        red_shape, named(lambda *i: te.sum(exp[at(i, k2)], axis=k2), red_names), name=f"{name}_expsum"
    )
    return te.compute(x.shape, named(lambda *i: exp[i] / expsum[dropped(i)], names), name=f"{name}_norm")


def layer_norm(
    x: Tensor, gamma: Tensor, beta: Tensor, axis: int = -1, epsilon: float = 1e-5, name: str = "layer_norm"
) -> Tensor:
    """Normalize over the dims from ``axis`` to the end, then scale by gamma and shift by beta.

    gamma and beta have shape ``x.shape[axis:]``. Stages: "<name>_sum", "<name>_varsum" (a two-pass
    variance, steadier in float32 than E[x^2] - E[x]^2) and "<name>". Both sums are of ``x - s``,
    ``s`` ("<name>_shift") the first element of each normalized block: near the mean, so the sums
    stay small and the mean of 1000 + N(0, 1) data keeps its digits (unshifted, float32 rounding of
    the sum of 256 such values moved the normalized output by 3e-4; shifted, by 1e-6).
    Example: ``layer_norm(x, g, b, axis=-1)`` for x (B, S, D), g and b (D,).
    """
    fn = "layer_norm"
    check_tensor(fn, "x", x)
    check_float(fn, "x", x)
    ax = normalize_axis(fn, axis, x.ndim)
    inner = x.shape[ax:]
    for arg, t in (("gamma", gamma), ("beta", beta)):
        check_tensor(fn, arg, t)
        if t.shape != inner:
            raise ValueError(f"{fn}: {arg} has shape {t.shape}, expected x.shape[{axis}:] = {inner}")
    check_same_dtype(fn, x=x, gamma=gamma, beta=beta)
    count = float(math.prod(inner))
    outer = x.shape[:ax] or (1,)
    outer_names = [f"i{d}" for d in range(len(outer))]
    rk = [te.reduce_axis((0, d), name=f"k{j}") for j, d in enumerate(inner)]
    rk2 = [te.reduce_axis((0, d), name=f"k{j}") for j, d in enumerate(inner)]

    def lead(idx: Any) -> tuple[Any, ...]:
        return tuple(idx) if ax > 0 else ()

    def outer_of(idx: Any) -> tuple[Any, ...]:
        return tuple(idx[:ax]) if ax > 0 else (0,)

    first = (0,) * len(inner)
    # Its own (inlined) stage, so the normalize reads it per row like the sums: a broadcast.
    shift = te.compute(outer, named(lambda *i: x[(*lead(i), *first)], outer_names), name=f"{name}_shift")

    def shifted(i: Any, k: Any) -> Any:
        return x[(*lead(i), *k)] - shift[i]

    total = te.compute(
        outer, named(lambda *i: te.sum(shifted(i, rk), axis=rk), outer_names), name=f"{name}_sum"
    )

    def varsum(*i: Any) -> Any:
        centered = shifted(i, rk2) - total[i] / count
        return te.sum(centered * centered, axis=rk2)

    var = te.compute(outer, named(varsum, outer_names), name=f"{name}_varsum")

    def body(*i: Any) -> Any:
        o, r = outer_of(i), i[ax:]
        centered = x[i] - shift[o] - total[o] / count
        return centered * te.rsqrt(var[o] / count + epsilon) * gamma[r] + beta[r]

    return te.compute(x.shape, named(body, [f"i{d}" for d in range(x.ndim)]), name=name)


def batch_norm(
    x: Tensor,
    gamma: Tensor,
    beta: Tensor,
    moving_mean: Tensor,
    moving_var: Tensor,
    axis: int = 1,
    epsilon: float = 1e-5,
    name: str = "batch_norm",
) -> Tensor:
    """Inference batch norm: ``(x - mean) / sqrt(var + eps) * gamma + beta`` per channel of ``axis``.

    The four parameter tensors have shape (C,). Example: ``batch_norm(x, g, b, mu, var)`` for NCHW x.
    """
    fn = "batch_norm"
    check_tensor(fn, "x", x)
    check_float(fn, "x", x)
    ax = normalize_axis(fn, axis, x.ndim)
    C = x.shape[ax]
    params = {"gamma": gamma, "beta": beta, "moving_mean": moving_mean, "moving_var": moving_var}
    for arg, t in params.items():
        check_tensor(fn, arg, t, 1, "C")
        if t.shape[0] != C:
            raise ValueError(f"{fn}: {arg} has {t.shape[0]} elements, expected C={C} (x.shape[{axis}])")
    check_same_dtype(fn, x=x, **params)

    def body(*i: Any) -> Any:
        c = i[ax]
        return (x[i] - moving_mean[c]) * te.rsqrt(moving_var[c] + epsilon) * gamma[c] + beta[c]

    return te.compute(x.shape, named(body, [f"i{d}" for d in range(x.ndim)]), name=name)
