"""The sampled reference: the values of a few outputs of a costly compute, without the rest.

A measured 1024^3 matmul is checked at a few thousand outputs (``measure/task.py``); a compute
costlier than ``max_grid`` points is evaluated only where its readers need it (:class:`_Lazy`), on
the same grids and with the same semantics as :func:`autosched.te.reference.evaluate`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .expr import IterVar
from .graph import topo_order
from .reference import MAX_GRID, _accumulate_dtype, _compute, _Evaluator, _reduce_box
from .reference_inputs import _bind_inputs
from .tensor import ComputeOp, Reduce, Tensor


def reference_work(outputs: Sequence[Tensor]) -> int:
    """Points the evaluator visits for ``outputs`` (each compute's spatial x reduce extents)."""
    return sum(_work(op) for op in topo_order(outputs) if isinstance(op, ComputeOp))


def _work(op: ComputeOp) -> int:
    return math.prod(op.shape) * math.prod(a.extent for a in op.reduce_axis)


def evaluate_at(
    outputs: Sequence[Tensor],
    inputs: Mapping[Tensor | str, np.ndarray],
    flat_indices: Sequence[np.ndarray],
    *,
    max_grid: int = MAX_GRID,
) -> list[np.ndarray]:
    """The values of each output at its flat (row-major) indices only, as 1-D arrays.

    A large matmul is checked at a few thousand outputs without computing the rest: a costly compute
    (more than ``max_grid`` points) is evaluated only where its readers need it; cheaper producers
    (pads, elementwise stages) are evaluated whole, once. Example:
    ``(c_at,) = evaluate_at([C], {A: a, B: b}, [np.array([0, 5])])`` is ``(a @ b).flat[[0, 5]]``.
    """
    ops = topo_order(outputs)
    values = _bind_inputs(ops, inputs)
    with np.errstate(all="ignore"):
        for op in ops:
            if isinstance(op, ComputeOp):
                cheap = _work(op) <= max_grid
                values[op] = _compute(op, values, max_grid) if cheap else _Lazy(op, values, max_grid)
        got = []
        for t, flat in zip(outputs, flat_indices, strict=True):
            idx = np.unravel_index(np.asarray(flat, dtype=np.int64), t.shape)
            value = values[t.op]
            got.append(value.at(idx) if isinstance(value, _Lazy) else np.asarray(value[idx]))
    return got


class _Lazy:
    """A compute evaluated only at the points asked for: one grid dimension of points, then the
    reduce axes, in chunks of at most ``max_grid`` points."""

    def __init__(self, op: ComputeOp, values: dict[Any, Any], max_grid: int):
        self.op, self.values, self.max_grid = op, values, max_grid
        self.shape = op.shape

    def at(self, idx: Sequence[Any]) -> np.ndarray:
        op = self.op
        arrays = np.broadcast_arrays(*idx)
        flat = [np.asarray(a).reshape(-1) for a in arrays]
        red = op.body if isinstance(op.body, Reduce) else None
        raxes = red.axes if red is not None else ()
        rshape = tuple(a.extent for a in raxes)
        out = np.empty(flat[0].size, op.dtype)
        chunk = max(1, self.max_grid // max(1, math.prod(rshape)))
        for start in range(0, out.size, chunk):
            part = [f[start : start + chunk] for f in flat]
            n = part[0].size
            point = IterVar("point", "int32", n, "spatial")  # grid dimension 0: the points
            box = {point: (0, n), **{a: (0, a.extent) for a in raxes}}
            env = {ax: p.reshape((n,) + (1,) * len(raxes)) for ax, p in zip(op.axis, part, strict=True)}
            ev = _Evaluator(f"compute {op.name!r}", self.values, box, env)
            if red is None:
                out[start : start + n] = np.broadcast_to(ev.eval(op.body, None), (n,))
            else:
                acc_dtype = _accumulate_dtype(red.reducer, op.dtype)
                out[start : start + n] = _reduce_box(ev, red, (n, *rshape), 1, acc_dtype)
        return out.reshape(arrays[0].shape)
