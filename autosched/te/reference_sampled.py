"""The sampled reference: the values of a few outputs of a costly compute, without the rest.

A measured 1024^3 matmul is checked at a few thousand outputs (``measure/task.py``); a compute
costlier than ``max_grid`` points is evaluated only where its readers need it (:class:`_Lazy`), on
the same grids and with the same semantics as :func:`autosched.te.reference.evaluate`.

A chain of computes that is *row-separable* (every stage has the outputs' leading axes and reads the
stages before it at its own leading indices, as attention's scores, softmax and product do per
(batch, head, query)) is checked at whole rows instead (:func:`evaluate_rows`): each stage is evaluated
at the sampled rows only, so a 16 x 2048 x 2048 attention costs a few hundred rows, not its L x L scores.
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
from .tensor import ComputeOp, Reduce, Tensor, TensorRead, walk


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


ROW_BUDGET = 1 << 27  # evaluator points of a row-sampled reference (about a second of numpy)
MIN_ROWS = 64  # fewer sampled rows than this: the per-point sampling of evaluate_at instead


def row_axes(outputs: Sequence[Tensor]) -> int:
    """How many leading axes the computation of ``outputs`` is separable along (0: none).

    Every compute must have those axes with the outputs' extents, and read each compute it depends on
    at exactly its own leading axes (``p[b, h, i, kv]`` inside a compute over ``(b, h, i, ...)``);
    inputs may be read at any index. Then an output row depends on the same row of each stage only.
    """
    lead = outputs[0].shape
    k = min(len(t.shape) for t in outputs)
    reads_compute = False
    for op in topo_order(outputs):
        if not isinstance(op, ComputeOp):
            continue
        k = min(k, len(op.shape))
        while k and op.shape[:k] != lead[:k]:
            k -= 1
        for node in walk(op.body):
            if isinstance(node, TensorRead) and isinstance(node.tensor.op, ComputeOp):
                reads_compute = True
                same = 0
                while same < k and node.indices[same] is op.axis[same]:
                    same += 1
                k = same
    return k if reads_compute else 0  # a single stage: evaluate_at's points cost no more


def sample_rows(outputs: Sequence[Tensor], seed: int, budget: int | None = None) -> np.ndarray | None:
    """Rows (an (R, k) array of leading indices) to check ``outputs`` at, or None when the
    computation is not row-separable or too few rows fit ``budget`` evaluator points (default
    :data:`ROW_BUDGET`).

    The rows are a stratified sample of the flattened leading indices (one random row in each of R
    equal strides, so every batch and head and every stretch of queries is visited), plus the first
    and the last row (a kernel's tail blocks).
    """
    k = row_axes(outputs)
    if k == 0:
        return None
    lead = outputs[0].shape[:k]
    total = math.prod(lead)
    per_row = max(1, reference_work(outputs) // total)
    want = min(total, (ROW_BUDGET if budget is None else budget) // per_row)
    if want < min(total, MIN_ROWS) or want * 2 > total:
        return None  # a row costs too much, or the sample would be most of the rows anyway
    rng = np.random.default_rng(seed)
    edges = np.linspace(0, total, want + 1).astype(np.int64)
    flat = edges[:-1] + (rng.random(want) * (edges[1:] - edges[:-1])).astype(np.int64)
    flat = np.unique(np.concatenate([flat, [0, total - 1]]))
    return np.stack(np.unravel_index(flat, lead), axis=1)


def row_flat_indices(t: Tensor, rows: np.ndarray) -> np.ndarray:
    """The flat (row-major) indices of ``t``'s elements in ``rows``, row by row."""
    k = rows.shape[1]
    inner = math.prod(t.shape[k:])
    starts = np.ravel_multi_index(tuple(rows.T), t.shape[:k]) * inner
    return (starts[:, None] + np.arange(inner)[None, :]).reshape(-1)


def evaluate_rows(
    outputs: Sequence[Tensor],
    inputs: Mapping[Tensor | str, np.ndarray],
    rows: np.ndarray,
    *,
    max_grid: int = MAX_GRID,
) -> list[np.ndarray]:
    """Each output's values in ``rows`` (leading indices, from :func:`sample_rows`), shape
    ``(R, *t.shape[k:])``: every compute evaluated at those rows only, as
    :func:`~autosched.te.reference.evaluate` evaluates it everywhere. Example:
    ``(o,) = evaluate_rows([out], {q: a, k: b, v: c}, np.array([[0, 0, 5]]))`` is row (0, 0, 5).
    """
    ops = topo_order(outputs)
    values = _bind_inputs(ops, inputs)
    rows = np.asarray(rows, dtype=np.int64)
    with np.errstate(all="ignore"):
        for op in ops:
            if isinstance(op, ComputeOp):
                values[op] = _Rows(_compute_rows(op, values, rows, max_grid), op.shape, rows)
    return [values[t.op].data for t in outputs]


def _compute_rows(op: ComputeOp, values: dict[Any, Any], rows: np.ndarray, max_grid: int) -> np.ndarray:
    k = rows.shape[1]
    red = op.body if isinstance(op.body, Reduce) else None
    rest = op.axis[k:]
    raxes = red.axes if red is not None else ()
    inner = tuple(a.extent for a in rest)
    rshape = tuple(a.extent for a in raxes)
    out = np.empty((len(rows), *inner), op.dtype)
    chunk = max(1, max_grid // max(1, math.prod(inner) * math.prod(rshape)))
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        n = len(part)
        point = IterVar("row", "int32", n, "spatial")  # grid dimension 0: the rows
        box = {point: (0, n), **{a: (0, a.extent) for a in (*rest, *raxes)}}
        ones = (1,) * (len(rest) + len(raxes))
        env = {ax: part[:, j].reshape((n, *ones)) for j, ax in enumerate(op.axis[:k])}
        ev = _Evaluator(f"compute {op.name!r}", values, box, env)
        if red is None:
            out[start : start + n] = np.broadcast_to(ev.eval(op.body, None), (n, *inner))
        else:
            acc_dtype = _accumulate_dtype(red.reducer, op.dtype)
            out[start : start + n] = _reduce_box(ev, red, (n, *inner, *rshape), 1 + len(rest), acc_dtype)
    return out


class _Rows:
    """A compute's values at some rows: read like the whole tensor, at those rows only."""

    def __init__(self, data: np.ndarray, shape: tuple[int, ...], rows: np.ndarray):
        self.data, self.shape, self.k = data, shape, rows.shape[1]
        codes = np.ravel_multi_index(tuple(rows.T), shape[: self.k])
        self.order = np.argsort(codes)
        self.codes = codes[self.order]

    def at(self, idx: Sequence[Any]) -> np.ndarray:
        code = np.ravel_multi_index(tuple(np.asarray(i) for i in idx[: self.k]), self.shape[: self.k])
        where = np.minimum(np.searchsorted(self.codes, code), len(self.codes) - 1)
        if not np.array_equal(self.codes[where], code):
            raise ValueError("row-sampled reference: a read outside the sampled rows (not row-separable)")
        return self.data[(self.order[where], *idx[self.k :])]
