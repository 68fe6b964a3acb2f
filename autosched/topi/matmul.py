"""Matrix products: matmul, batch_matmul and dense (with an optional fused bias + activation)."""

from __future__ import annotations

from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_float, check_same_dtype, check_tensor
from .elementwise import gelu_expr, relu_expr

ACTIVATIONS = {"relu": relu_expr, "gelu": gelu_expr, None: lambda v: v}


def matmul(a: Tensor, b: Tensor, transpose_b: bool = False, name: str = "matmul") -> Tensor:
    """``a @ b`` for a (M, K) and b (K, N), or b (N, K) with ``transpose_b``.

    Example: ``C = matmul(A, B)`` is ``C[i, j] = sum_k A[i, k] * B[k, j]``.
    """
    fn = "matmul"
    check_tensor(fn, "a", a, 2, "M, K")
    check_tensor(fn, "b", b, 2, "N, K" if transpose_b else "K, N")
    check_same_dtype(fn, a=a, b=b)
    M, K = a.shape
    N, Kb = b.shape if transpose_b else b.shape[::-1]
    if K != Kb:
        raise ValueError(
            f"{fn}: reduction dims differ: a is {a.shape}, b is {b.shape} (transpose_b={transpose_b})"
        )
    k = te.reduce_axis((0, K), name="k")
    if transpose_b:
        return te.compute((M, N), lambda i, j: te.sum(a[i, k] * b[j, k], axis=k), name=name)
    return te.compute((M, N), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name=name)


def batch_matmul(a: Tensor, b: Tensor, transpose_b: bool = False, name: str = "batch_matmul") -> Tensor:
    """A matmul per batch: a (B, M, K) and b (B, K, N), or b (B, N, K) with ``transpose_b``.

    A batch dim of 1 on either side broadcasts, as in numpy.
    Example: ``batch_matmul(Q, K, transpose_b=True)``.
    """
    fn = "batch_matmul"
    check_tensor(fn, "a", a, 3, "B, M, K")
    check_tensor(fn, "b", b, 3, "B, N, K" if transpose_b else "B, K, N")
    check_same_dtype(fn, a=a, b=b)
    Ba, M, K = a.shape
    Bb = b.shape[0]
    N, Kb = b.shape[1:] if transpose_b else b.shape[:0:-1]
    if K != Kb:
        raise ValueError(
            f"{fn}: reduction dims differ: a is {a.shape}, b is {b.shape} (transpose_b={transpose_b})"
        )
    if Ba != Bb and 1 not in (Ba, Bb):
        raise ValueError(f"{fn}: batch dims differ: a has {Ba}, b has {Bb} (one may be 1 to broadcast)")
    k = te.reduce_axis((0, K), name="k")

    def body(bb: Any, i: Any, j: Any) -> Any:
        ba = 0 if Ba == 1 else bb
        bbb = 0 if Bb == 1 else bb
        rhs = b[bbb, j, k] if transpose_b else b[bbb, k, j]
        return te.sum(a[ba, i, k] * rhs, axis=k)

    return te.compute((max(Ba, Bb), M, N), body, name=name)


def dense(
    data: Tensor,
    weight: Tensor,
    bias: Tensor | None = None,
    activation: str | None = None,
    name: str = "dense",
) -> Tensor:
    """``activation(data @ weight.T + bias)`` for data (M, K), weight (N, K), bias (N,).

    The product and the bias + activation are separate computes (e.g. "dense" then "bias_relu") so a
    scheduler can fuse the elementwise stage into the product's tiles.
    Example: ``dense(x, w, b, activation="relu")``.
    """
    fn = "dense"
    check_tensor(fn, "data", data, 2, "M, K")
    check_tensor(fn, "weight", weight, 2, "N, K")
    if activation not in ACTIVATIONS:
        raise ValueError(f"{fn}: activation must be 'relu', 'gelu' or None, got {activation!r}")
    check_same_dtype(fn, data=data, weight=weight)
    if activation is not None:
        check_float(fn, "data", data)
    M, K = data.shape
    N, Kw = weight.shape
    if K != Kw:
        raise ValueError(f"{fn}: data has K={K} but weight (N, K) has K={Kw}")
    if bias is not None:
        check_tensor(fn, "bias", bias, 1, "N")
        check_same_dtype(fn, data=data, bias=bias)
        if bias.shape[0] != N:
            raise ValueError(f"{fn}: bias has {bias.shape[0]} elements, expected N={N}")
    out = matmul(data, weight, transpose_b=True, name=name)
    if bias is None and activation is None:
        return out
    act = ACTIVATIONS[activation]
    stage = "_".join(p for p in ("bias" if bias is not None else "", activation or "add") if p)
    if bias is None:
        return te.compute((M, N), lambda i, j: act(out[i, j]), name=stage)
    return te.compute((M, N), lambda i, j: act(out[i, j] + bias[j]), name=stage)
