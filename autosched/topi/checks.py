"""Argument checks shared by the operators: every message names the function and the argument.

Checks raise (never ``assert``) because ``python -O`` strips asserts and these guard user input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..te import Tensor
from ..te.expr import FLOAT_DTYPES


def check_tensor(fn: str, arg: str, t: Any, ndim: int | None = None, layout: str = "") -> Tensor:
    """``t`` as a Tensor with ``ndim`` dims.

    Example: ``check_tensor("conv2d", "data", x, 4, "N, C, H, W")``.
    """
    if not isinstance(t, Tensor):
        raise TypeError(f"{fn}: {arg} must be a te.Tensor, got {type(t).__name__}")
    if ndim is not None and t.ndim != ndim:
        what = f" ({layout})" if layout else ""
        raise ValueError(f"{fn}: {arg} has {t.ndim} dims, expected {ndim}{what}; shape is {t.shape}")
    return t


def check_float(fn: str, arg: str, t: Tensor) -> None:
    if t.dtype not in FLOAT_DTYPES:
        raise TypeError(f"{fn}: {arg} must be float32 or float64, got {t.dtype}")


def check_same_dtype(fn: str, **tensors: Tensor) -> str:
    """The common dtype of ``tensors``; raises naming each one when they differ."""
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} is {d}" for name, d in dtypes.items())
        raise TypeError(f"{fn}: dtypes differ ({listed}); cast them to one dtype first")
    return next(iter(dtypes.values()))


def check_int(fn: str, arg: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{fn}: {arg} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{fn}: {arg} must be >= {minimum}, got {value}")
    return value


def check_ints(fn: str, arg: str, value: Any, n: int, minimum: int = 0) -> tuple[int, ...]:
    """An int or a sequence of ``n`` ints, as a tuple of ``n`` ints (``2`` -> ``(2, 2)`` for n=2)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return (check_int(fn, arg, value, minimum),) * n
    if not isinstance(value, Sequence) or len(value) != n:
        raise ValueError(f"{fn}: {arg} must be an int or {n} ints, got {value!r}")
    return tuple(check_int(fn, arg, v, minimum) for v in value)


def check_padding(fn: str, value: Any, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Padding as (before, after) per spatial dim, from an int, ``n`` ints (symmetric) or ``2n`` ints.

    ``2n`` ints are all the befores then all the afters, as TVM writes (top, left, bottom, right).
    """
    if isinstance(value, Sequence) and len(value) == 2 * n:
        ints = tuple(check_int(fn, "padding", v) for v in value)
        return ints[:n], ints[n:]
    if isinstance(value, Sequence) and len(value) != n:
        raise ValueError(f"{fn}: padding must be an int, {n} ints or {2 * n} ints, got {value!r}")
    sym = check_ints(fn, "padding", value, n)
    return sym, sym


def normalize_axis(fn: str, axis: Any, ndim: int, arg: str = "axis") -> int:
    """``axis`` in ``[0, ndim)``; negative axes count from the end, as in numpy."""
    check_int(fn, arg, axis, minimum=-ndim)
    if axis >= ndim:
        raise ValueError(f"{fn}: {arg} {axis} is out of range for {ndim} dims")
    return axis % ndim
