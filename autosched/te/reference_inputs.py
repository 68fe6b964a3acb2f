"""The arrays a reference evaluation takes: fresh random ones, and given ones bound to placeholders."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .expr import is_float
from .tensor import Operation, PlaceholderOp, Tensor


def random_inputs(tensors: Sequence[Tensor], seed: int = 0, *, int_high: int = 2) -> list[np.ndarray]:
    """Fresh random arrays for the placeholders among ``tensors`` (computes are skipped), in order.

    Floats are uniform in [-1, 1) with no exact zero; integers (e.g. gather indices) are uniform in
    ``[0, int_high)`` and not all zero. Example: ``a, b = random_inputs([A, B, C], seed=1)``.
    """
    if int_high < 1:
        raise ValueError(f"random_inputs: int_high must be >= 1, got {int_high}")
    rng = np.random.default_rng(seed)
    arrays = []
    for t in tensors:
        if not isinstance(t.op, PlaceholderOp):
            continue
        if is_float(t.dtype):
            a = rng.uniform(-1.0, 1.0, size=t.shape).astype(t.dtype)
            a[a == 0] = 0.5  # a zero input can hide a wrong kernel (e.g. one that skips a term)
        else:
            a = rng.integers(0, int_high, size=t.shape).astype(t.dtype)
            if int_high > 1 and not a.any():
                a.flat[0] = 1
        arrays.append(a)
    return arrays


def _bind_inputs(ops: list[Operation], inputs: Mapping[Tensor | str, np.ndarray]) -> dict[Any, Any]:
    placeholders = [op for op in ops if isinstance(op, PlaceholderOp)]
    known = set(placeholders)
    by_name: dict[str, list[PlaceholderOp]] = {}
    for p in placeholders:
        by_name.setdefault(p.name, []).append(p)
    values: dict[Any, Any] = {}
    for key, array in inputs.items():
        if isinstance(key, Tensor):
            if key.op not in known:
                continue
            op = key.op
        elif isinstance(key, str):
            found = by_name.get(key, [])
            if len(found) != 1:
                why = "matches no placeholder" if not found else "names several placeholders; key by tensor"
                raise ValueError(f"input {key!r} {why} (placeholders: {', '.join(sorted(by_name))})")
            op = found[0]
        else:
            raise TypeError(f"inputs must be keyed by placeholder tensor or name, got {key!r}")
        if op in values:
            raise ValueError(f"input {op.name!r} is given twice")
        values[op] = _check_array(op, array)
    missing = [p.name for p in placeholders if p not in values]
    if missing:
        raise ValueError(f"missing input(s): {', '.join(missing)}")
    return values


def _check_array(op: PlaceholderOp, array: Any) -> np.ndarray:
    expected = f"{op.dtype} array of shape {op.shape}"
    if not isinstance(array, np.ndarray):
        raise ValueError(f"input {op.name!r}: expected {expected}, got {type(array).__name__}")
    if array.shape != op.shape or array.dtype != np.dtype(op.dtype):
        raise ValueError(f"input {op.name!r}: expected {expected}, got {array.dtype} of shape {array.shape}")
    return array
