"""Reductions over chosen axes: sum, max, min and mean, with numpy's ``axis`` and ``keepdims``.

te has no 0-d tensors, so reducing every axis without ``keepdims`` gives shape (1,) where numpy
gives a scalar.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..te import Tensor
from .checks import check_float, check_tensor, normalize_axis
from .index import named

Axis = int | Sequence[int] | None


def reduce_axes(fn: str, x: Tensor, axis: Axis) -> tuple[int, ...]:
    """``axis`` as sorted, distinct, non-negative dims of ``x``; None means all of them."""
    if axis is None:
        return tuple(range(x.ndim))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if not axes:
        raise ValueError(f"{fn}: axis is empty; give None to reduce every axis")
    norm = [normalize_axis(fn, a, x.ndim) for a in axes]
    if len(set(norm)) != len(norm):
        raise ValueError(f"{fn}: axis {axis!r} repeats a dim")
    return tuple(sorted(norm))


def _reduce(
    fn: str, x: Tensor, axis: Axis, keepdims: bool, reducer: Callable[..., Any], name: str
) -> tuple[Tensor, int]:
    check_tensor(fn, "x", x)
    axes = reduce_axes(fn, x, axis)
    keep = [d for d in range(x.ndim) if d not in axes]
    if keepdims:
        shape = tuple(1 if d in axes else x.shape[d] for d in range(x.ndim))
    else:
        shape = tuple(x.shape[d] for d in keep) or (1,)
    rvars = [te.reduce_axis((0, x.shape[d]), name=f"k{d}") for d in axes]

    def body(*idx: Any) -> Any:
        src: list[Any] = [None] * x.ndim
        for d, r in zip(axes, rvars, strict=True):
            src[d] = r
        spatial = [idx[d] for d in keep] if keepdims else list(idx[: len(keep)])
        for d, i in zip(keep, spatial, strict=True):
            src[d] = i
        return reducer(x[tuple(src)], axis=rvars)

    out = te.compute(shape, named(body, [f"i{d}" for d in range(len(shape))]), name=name)
    return out, math.prod(x.shape[d] for d in axes)


def sum(x: Tensor, axis: Axis = None, keepdims: bool = False, name: str = "sum") -> Tensor:
    """Sum over ``axis`` (all when None). Example: ``sum(x, axis=(1, 2), keepdims=True)``."""
    return _reduce("sum", x, axis, keepdims, te.sum, name)[0]


def max(x: Tensor, axis: Axis = None, keepdims: bool = False, name: str = "max") -> Tensor:
    """Maximum over ``axis``. Example: ``max(x, axis=-1)``."""
    return _reduce("max", x, axis, keepdims, te.max, name)[0]


def min(x: Tensor, axis: Axis = None, keepdims: bool = False, name: str = "min") -> Tensor:
    """Minimum over ``axis``. Example: ``min(x, axis=0)``."""
    return _reduce("min", x, axis, keepdims, te.min, name)[0]


def mean(x: Tensor, axis: Axis = None, keepdims: bool = False, name: str = "mean") -> Tensor:
    """Mean over ``axis``: a "<name>_sum" reduction, then a divide stage. Example: ``mean(x, axis=1)``."""
    check_tensor("mean", "x", x)
    check_float("mean", "x", x)
    total, count = _reduce("mean", x, axis, keepdims, te.sum, f"{name}_sum")
    return te.compute(
        total.shape,
        named(lambda *i: total[i] / float(count), [f"i{d}" for d in range(total.ndim)]),
        name=name,
    )
