"""Index helpers shared by the operators: named axes and tidy integer index arithmetic."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any


def named(fcompute: Callable[..., Any], names: Sequence[str]) -> Callable[..., Any]:
    """Give a ``lambda *idx`` real parameter names, so te.compute names its axes (for records).

    te.compute reads the names with ``inspect.signature``, which honours ``__signature__``.
    """
    params = [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in names]

    def wrapper(*idx: Any) -> Any:
        return fcompute(*idx)

    wrapper.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    return wrapper


def axis_names(ndim: int, prefix: str = "i") -> list[str]:
    return [f"{prefix}{d}" for d in range(ndim)]


def scaled(i: Any, factor: int) -> Any:
    """``i * factor``, leaving ``i`` alone when the factor is 1 so the IR stays readable."""
    return i if factor == 1 else i * factor


def offset(i: Any, amount: int) -> Any:
    """``i + amount``, leaving ``i`` alone when the amount is 0."""
    if amount == 0:
        return i
    return i + amount if amount > 0 else i - (-amount)
