"""The numpy reference evaluator: the ground truth every generated kernel is checked against.

Example::

    A, B = te.placeholder((4, 3), name="A"), te.placeholder((3, 5), name="B")
    k = te.reduce_axis((0, 3), name="k")
    C = te.compute((4, 5), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    (c,) = evaluate([C], {"A": a, "B": b})          # == a @ b

Each compute is evaluated, producers first, on broadcastable index grids (one grid dimension per spatial
axis, then one per reduce axis), in boxes of at most ``max_grid`` points so that a 1024^3 matmul does not
need a 10^9-point grid. Semantics, matching generated code:

- Expressions compute in their own dtype (float32 stays float32). Sum and product reductions of floats
  accumulate in float64 and are cast back at the end: the reference is the most accurate answer, and a
  kernel is compared to it with a tolerance. Integer reductions wrap in their dtype, as in C.
- ``//`` and ``%`` on integers floor (numpy's rule); an integer division by zero raises.
- Cast from float to int truncates toward zero.
- ``te.if_then_else`` is lazy and so is a reduction's ``where=``: their untaken side may read out of
  bounds (padding). A boolean "needed" mask travels down the tree; a read checks its indices only where
  they are needed and clips them elsewhere. A needed out-of-bounds read raises IndexError. ``te.all`` and
  ``te.any`` evaluate both sides, so a read inside them must always be in bounds.

Random inputs and the binding of given arrays are in :mod:`.reference_inputs`, the evaluation of a
few points of a costly compute (``evaluate_at``, ``reference_work``) in :mod:`.reference_sampled`;
all stay importable from here.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from .expr import Binary, Call, Cast, Compare, Const, Expr, IterVar, Logical, Not, Select, Var, is_float
from .graph import topo_order
from .reference_inputs import _bind_inputs
from .reference_inputs import random_inputs as random_inputs  # re-exported: callers import it from here
from .tensor import ComputeOp, PlaceholderOp, Reduce, Reducer, Tensor, TensorRead

try:  # scipy's erf is vectorised and keeps float32; math.erf per element is the fallback
    from scipy.special import erf as _scipy_erf
except ImportError:  # pragma: no cover - depends on the environment
    _scipy_erf = None

MAX_GRID = 1 << 24  # points of one evaluated box: a few float64 temporaries of this size stay < 1 GiB

_BINARY = {
    "+": np.add, "-": np.subtract, "*": np.multiply, "/": np.true_divide, "//": np.floor_divide,
    "%": np.remainder, "min": np.minimum, "max": np.maximum,
}  # fmt: skip
_COMPARE = {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
            "==": np.equal, "!=": np.not_equal}  # fmt: skip
# Reducers whose combine is one of these binary ops reduce with numpy directly; others fold.
_REDUCE_UFUNCS = {"+": np.add, "*": np.multiply, "max": np.maximum, "min": np.minimum}


def _erf(x: Any) -> Any:
    if _scipy_erf is not None:
        return _scipy_erf(x)
    return np.asarray(np.frompyfunc(math.erf, 1, 1)(x)).astype(np.asarray(x).dtype)


def _sigmoid(x: Any) -> Any:
    one = np.asarray(x).dtype.type(1)
    return one / (one + np.exp(-x))


_CALLS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: np.reciprocal(np.sqrt(x)),
    "tanh": np.tanh, "sigmoid": _sigmoid, "erf": _erf, "abs": np.abs, "pow": np.power,
    "floor": np.floor, "ceil": np.ceil,
}  # fmt: skip


def evaluate(
    outputs: Sequence[Tensor], inputs: Mapping[Tensor | str, np.ndarray], *, max_grid: int = MAX_GRID
) -> list[np.ndarray]:
    """The values of ``outputs``, in order, given an array per placeholder (keyed by tensor or name).

    Example: ``(c,) = evaluate([C], {A: a, "B": b})``. A placeholder given by tensor but not read by the
    outputs is ignored; a name that matches no placeholder is an error (it is usually a typo).
    """
    ops = topo_order(outputs)
    values = _bind_inputs(ops, inputs)
    with np.errstate(all="ignore"):  # untaken branches may overflow or divide by zero, harmlessly
        for op in ops:
            if isinstance(op, ComputeOp):
                values[op] = _compute(op, values, max_grid)
    return [values[t.op].copy() if isinstance(t.op, PlaceholderOp) else values[t.op] for t in outputs]


def reference_for(tensors: Sequence[Tensor], arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """The expected values of the computed tensors of a workload list ``[inputs..., outputs...]``.

    ``arrays`` holds either one array per placeholder or one per tensor (as passed to a built kernel:
    the output buffers are ignored). Example: ``(c,) = reference_for([A, B, C], [a, b, c])``.
    """
    placeholders = [t for t in tensors if isinstance(t.op, PlaceholderOp)]
    if len(arrays) == len(tensors):
        given = [a for t, a in zip(tensors, arrays, strict=True) if isinstance(t.op, PlaceholderOp)]
    elif len(arrays) == len(placeholders):
        given = list(arrays)
    else:
        raise ValueError(
            f"reference_for: got {len(arrays)} array(s) for {len(tensors)} tensor(s) of which "
            f"{len(placeholders)} are inputs; pass one array per input or one per tensor"
        )
    outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
    return evaluate(outputs, dict(zip(placeholders, given, strict=True)))


# Computes ---------------------------------------------------------------------------------------


def _boxes(extents: tuple[int, ...], max_grid: int) -> Iterator[tuple[tuple[int, int], ...]]:
    """Boxes (a range per axis) that tile the iteration space, each of at most ``max_grid`` points.

    The first axis whose inner axes fit is cut in chunks; axes before it go one index at a time.
    """
    n = len(extents)
    d = next((d for d in range(n) if math.prod(extents[d + 1 :]) <= max_grid), n)
    if d == n:  # no axes at all: one point
        yield ()
        return
    step = max(1, max_grid // math.prod(extents[d + 1 :]))
    outer = itertools.product(*(range(e) for e in extents[:d]))
    for head in outer:
        for start in range(0, extents[d], step):
            yield (
                *((h, h + 1) for h in head),
                (start, min(start + step, extents[d])),
                *((0, e) for e in extents[d + 1 :]),
            )


def _accumulate_dtype(reducer: Reducer, dtype: str) -> str:
    ufunc = _reduce_ufunc(reducer)
    if is_float(dtype) and ufunc in (np.add, np.multiply):
        return "float64"
    return dtype


def _compute(op: ComputeOp, values: dict[Any, Any], max_grid: int) -> np.ndarray:
    body = op.body
    red = body if isinstance(body, Reduce) else None
    axes = op.axis + (red.axes if red is not None else ())
    nsp = len(op.axis)
    acc_dtype = _accumulate_dtype(red.reducer, op.dtype) if red is not None else op.dtype
    if red is None:
        out = np.empty(op.shape, op.dtype)
    else:
        out = np.full(op.shape, np.dtype(op.dtype).type(red.reducer.identity), acc_dtype)
    for box in _boxes(tuple(a.extent for a in axes), max_grid):
        ev = _Evaluator(f"compute {op.name!r}", values, dict(zip(axes, box, strict=True)))
        where = tuple(slice(a, b) for a, b in box[:nsp])
        if red is None:
            out[where] = ev.eval(body, None)
        else:
            partial = _reduce_box(ev, red, tuple(b - a for a, b in box), nsp, acc_dtype)
            out[where] = _combine(red.reducer, out[where], partial)
    return out if out.dtype == np.dtype(op.dtype) else out.astype(op.dtype)


def _reduce_ufunc(reducer: Reducer) -> np.ufunc | None:
    c = reducer.combined
    if isinstance(c, Binary) and c.op in _REDUCE_UFUNCS:
        if {id(c.a), id(c.b)} == {id(reducer.lhs), id(reducer.rhs)}:
            return _REDUCE_UFUNCS[c.op]
    return None


def _neutral(ufunc: np.ufunc, dtype: str) -> Any:
    """The element that ``ufunc`` ignores, to mask the points a ``where=`` excludes."""
    t = np.dtype(dtype).type
    if ufunc is np.add:
        return t(0)
    if ufunc is np.multiply:
        return t(1)
    if is_float(dtype):
        return t(-np.inf if ufunc is np.maximum else np.inf)
    info = np.iinfo(dtype)
    return t(info.min if ufunc is np.maximum else info.max)


def _combine(reducer: Reducer, acc: Any, x: Any) -> Any:
    ufunc = _reduce_ufunc(reducer)
    if ufunc is not None:
        return ufunc(acc, x)
    ev = _Evaluator(f"reducer {reducer.name!r}", {}, {}, {reducer.lhs: acc, reducer.rhs: x})
    return ev.eval(reducer.combined, None)


def _reduce_box(ev: _Evaluator, red: Reduce, shape: tuple[int, ...], nsp: int, acc_dtype: str) -> Any:
    cond = None if red.condition is None else ev.eval(red.condition, None)
    src = ev.eval(red.source, cond)  # lazy where=: the source is needed only where the condition holds
    ufunc = _reduce_ufunc(red.reducer)
    if ufunc is not None:
        if cond is not None:
            src = np.where(cond, src, _neutral(ufunc, red.dtype))
        src = np.broadcast_to(src, shape)  # a source that ignores a reduce axis still counts it
        return ufunc.reduce(src, axis=tuple(range(nsp, len(shape))), dtype=acc_dtype)
    # A custom reducer: fold its combine template over the reduce points, vectorised over space.
    flat = np.broadcast_to(src, shape).reshape((*shape[:nsp], -1))
    mask = None if cond is None else np.broadcast_to(cond, shape).reshape((*shape[:nsp], -1))
    acc = np.full(shape[:nsp], np.dtype(red.dtype).type(red.reducer.identity))
    for t in range(flat.shape[-1]):
        step = _combine(red.reducer, acc, flat[..., t])
        acc = step if mask is None else np.where(mask[..., t], step, acc)
    return acc


# Expressions ------------------------------------------------------------------------------------


class _Evaluator:
    """Evaluates expressions of one compute on one box of its iteration space.

    ``box`` maps each axis to its index range; axis ``n`` of the box is grid dimension ``n``.
    """

    def __init__(
        self,
        where: str,
        values: dict[Any, Any],
        box: dict[IterVar, tuple[int, int]],
        env: dict[Var, Any] | None = None,
    ):
        self.where = where
        self.values = values
        self.dims = {id(ax): (g, lo, hi) for g, (ax, (lo, hi)) in enumerate(box.items())}
        self.axes = list(box)
        self.ndim = len(box)
        self.env = {id(v): x for v, x in (env or {}).items()}
        self.memo: dict[tuple[int, int], tuple[Any, Any]] = {}

    def eval(self, e: Expr, needed: Any) -> Any:
        """The value of ``e`` on the grid; ``needed`` (None: everywhere) marks the points that count."""
        key = (id(e), id(needed))
        hit = self.memo.get(key)
        if hit is None:
            value = self._eval(e, needed)
            if value.dtype != np.dtype(e.dtype):
                value = value.astype(e.dtype)
            hit = self.memo[key] = (value, needed)  # holding `needed` keeps its id from being reused
        return hit[0]

    def _eval(self, e: Expr, needed: Any) -> Any:
        if isinstance(e, Const):
            return np.dtype(e.dtype).type(e.value)
        if isinstance(e, Var):
            return self._var(e)
        if isinstance(e, Binary):
            a, b = self.eval(e.a, needed), self.eval(e.b, needed)
            if e.op in ("//", "%") and not is_float(e.dtype):
                self._check_nonzero(e, b, needed)
            return _BINARY[e.op](a, b)
        if isinstance(e, Compare):
            return _COMPARE[e.op](self.eval(e.a, needed), self.eval(e.b, needed))
        if isinstance(e, Logical):
            ufunc = np.logical_and if e.op == "and" else np.logical_or
            return ufunc(self.eval(e.a, needed), self.eval(e.b, needed))
        if isinstance(e, Not):
            return np.logical_not(self.eval(e.a, needed))
        if isinstance(e, Select):
            return self._select(e, needed)
        if isinstance(e, Cast):
            v = self.eval(e.value, needed)
            return (v != 0) if e.dtype == "bool" else v.astype(e.dtype)  # float -> int truncates
        if isinstance(e, Call):
            return _CALLS[e.name](*(self.eval(a, needed) for a in e.args))
        if isinstance(e, TensorRead):
            return self._read(e, needed)
        if isinstance(e, Reduce):
            raise ValueError(f"{self.where}: a reduction must be the whole body of its compute: {e!r}")
        raise TypeError(f"{self.where}: cannot evaluate {type(e).__name__} {e!r}")

    def _var(self, v: Var) -> Any:
        if id(v) in self.dims:
            g, lo, hi = self.dims[id(v)]
            shape = [1] * self.ndim
            shape[g] = hi - lo
            return np.arange(lo, hi, dtype=v.dtype).reshape(shape)
        if id(v) in self.env:
            return self.env[id(v)]
        raise ValueError(f"{self.where}: variable {v.name!r} is not an axis of this compute")

    def _select(self, e: Select, needed: Any) -> Any:
        cond = self.eval(e.cond, needed)
        take_t = cond if needed is None else needed & cond
        take_f = ~cond if needed is None else needed & ~cond
        # Skipping a branch nobody needs saves a gather (and its bounds checks) on most padded reads.
        if not np.any(take_f):
            return self.eval(e.t, take_t)
        if not np.any(take_t):
            return self.eval(e.f, take_f)
        return np.where(cond, self.eval(e.t, take_t), self.eval(e.f, take_f))

    def _check_nonzero(self, e: Binary, b: Any, needed: Any) -> None:
        zero = b == 0
        if needed is not None:
            zero = zero & needed
        if np.any(zero):
            raise ZeroDivisionError(f"{self.where}: integer division by zero in {e!r}{self._at(zero)}")

    def _read(self, e: TensorRead, needed: Any) -> Any:
        array = self.values[e.tensor.op]
        lazy = not isinstance(array, np.ndarray)  # a compute evaluated on demand (reference_sampled)
        view = None if lazy else self._read_view(e, array)
        if view is not None:
            return view
        indices = []
        for d, (ix, size) in enumerate(zip(e.indices, array.shape, strict=True)):
            i = self.eval(ix, needed)
            bad = (i < 0) | (i >= size)
            if np.any(bad):
                if needed is not None:
                    bad = bad & needed
                if np.any(bad):
                    value = np.broadcast_to(i, bad.shape)[tuple(np.argwhere(bad)[0])]
                    raise IndexError(
                        f"{self.where}: {e!r} reads out of bounds: index {value} in dimension {d} of "
                        f"{e.tensor.name!r} (shape {array.shape}){self._at(bad)}"
                    )
                i = np.clip(i, 0, size - 1)  # an untaken branch: any in-bounds value will do
            indices.append(i)
        return array.at(indices) if lazy else array[tuple(indices)]

    def _read_view(self, e: TensorRead, array: np.ndarray) -> Any:
        """``A[i, k]`` with plain axes (or constants) in range: a strided view, no gather."""
        slices: list[Any] = []
        grid_dims: list[int] = []
        for ix, size in zip(e.indices, array.shape, strict=True):
            if isinstance(ix, IterVar) and id(ix) in self.dims:
                g, lo, hi = self.dims[id(ix)]
                if hi > size or g in grid_dims:
                    return None
                slices.append(slice(lo, hi))
                grid_dims.append(g)
            elif isinstance(ix, Const) and 0 <= ix.value < size:
                slices.append(int(ix.value))
            else:
                return None
        view = array[tuple(slices)].transpose(np.argsort(grid_dims))
        shape = [1] * self.ndim
        for g, n in zip(sorted(grid_dims), view.shape, strict=True):
            shape[g] = n
        return view.reshape(shape)

    def _at(self, bad: Any) -> str:
        """Where on the grid the first offending point is, as ``at i=3, k=7``."""
        pos = np.argwhere(bad)[0]
        offset = self.ndim - len(pos)  # leading grid dimensions the mask does not have
        parts = [
            f"{ax.name}={self.dims[id(ax)][1] + (int(pos[g - offset]) if g >= offset else 0)}"
            for g, ax in enumerate(self.axes)
        ]
        return f" at {', '.join(parts)}" if parts else ""


def __getattr__(name: str) -> Any:
    """The sampled evaluator (:mod:`.reference_sampled`, which builds on this module) stays
    importable from here: ``from autosched.te.reference import evaluate_at``."""
    if name in ("evaluate_at", "reference_work"):
        from . import reference_sampled

        return getattr(reference_sampled, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
