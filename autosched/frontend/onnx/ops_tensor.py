"""Layout and indexing ONNX ops: Reshape, Transpose, Concat, Split, Slice, Gather, Expand, Pad, Tile...

Shape-like inputs (Reshape's shape, Slice's starts, Expand's shape, ...) must be constants known at
import; the importer folds Shape -> Gather -> Concat chains into such constants before they arrive.
Shape, Size, Constant, ConstantOfShape and Range produce constants directly.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ... import te, topi
from ...te import Tensor
from ...topi.elementwise import broadcast_read
from ...topi.index import axis_names, named
from .context import Node, Out, Value, onnx_dtype, te_shape
from .registry import converter


def compute(node: Node, shape: tuple[int, ...], body: Any, dtype: str | None = None, name: str = "") -> Out:
    """A te compute of ONNX shape ``shape``; ``body`` takes the output indices (none for a scalar)."""
    if any(d < 1 for d in shape):
        raise node.error(f"output shape {list(shape)} has an empty dim; te tensors need every dim >= 1")
    tshape = te_shape(shape)
    fn = (lambda *i: body(*i)) if shape else (lambda _: body())
    t = te.compute(tshape, named(fn, axis_names(len(tshape))), name=name or node.op_type.lower())
    return Out(t, shape, dtype or node.dtype(0))


def clamp(index: Any, size: int) -> Any:
    """``index`` clamped into [0, size): te reads must stay in bounds, provably, for lowering."""
    return te.max(te.min(index, size - 1), 0)


def each(x: Tensor, fn: Any, name: str) -> Tensor:
    """An elementwise stage over ``x``'s shape; ``fn`` takes the index tuple."""
    return te.compute(x.shape, named(lambda *i: fn(i), axis_names(x.ndim)), name=name)


def read(node: Node, i: int, idx: Any) -> Any:
    """Input ``i`` at ONNX index ``idx`` (a scalar reads its single element)."""
    t = node.tensor(i)
    return t[tuple(idx)] if idx else t[0]


def reshaped(node: Node, shape: tuple[int, ...]) -> Out | Value:
    v = node.input(0)
    if math.prod(shape) != math.prod(v.shape):
        raise node.error(f"cannot reshape {list(v.shape)} to {list(shape)}")
    if tuple(shape) == v.shape:
        return v
    t = node.tensor(0)
    if te_shape(shape) == t.shape:
        return Out(t, tuple(shape), v.dtype)
    return Out(topi.reshape(t, te_shape(shape), name=node.op_type.lower()), tuple(shape), v.dtype)


def int_list(node: Node, i: int, what: str) -> list[int]:
    return [int(x) for x in np.asarray(node.const(i, what)).reshape(-1)]


def axes_of(node: Node, since_input: int, input_index: int, ndim: int) -> list[int] | None:
    """The ``axes`` attribute (opsets before ``since_input``) or input, normalized; None if absent."""
    if node.opset < since_input:
        raw = node.attr("axes")
    else:
        raw = int_list(node, input_index, "axes") if node.has(input_index) else None
    return None if raw is None else [node.axis(a, ndim, "axes") for a in raw]


@converter("Reshape", since=5)
@converter("Reshape", since=13)
@converter("Reshape", since=14)
@converter("Reshape", since=19)
@converter("Reshape", since=21)
def reshape(node: Node) -> Any:
    target = int_list(node, 1, "shape")
    src = node.shape(0)
    allowzero = node.attr("allowzero", 0)
    out = [src[d] if (s == 0 and not allowzero) else s for d, s in enumerate(target)]
    if out.count(-1) > 1:
        raise node.error(f"shape {target} holds more than one -1")
    if -1 in out:
        known = math.prod(d for d in out if d != -1)
        out[out.index(-1)] = math.prod(src) // known if known else 0
    return reshaped(node, tuple(out))


@converter("Flatten", since=1)
@converter("Flatten", since=9)
@converter("Flatten", since=11)
@converter("Flatten", since=13)
@converter("Flatten", since=21)
def flatten(node: Node) -> Any:
    shape = node.shape(0)
    axis = node.attr("axis", 1)
    axis = node.axis(axis + len(shape) if axis < 0 else axis, len(shape) + 1)
    return reshaped(node, (math.prod(shape[:axis]), math.prod(shape[axis:])))


@converter("Squeeze", since=1)
@converter("Squeeze", since=11)
@converter("Squeeze", since=13)
@converter("Squeeze", since=21)
def squeeze(node: Node) -> Any:
    shape = node.shape(0)
    axes = axes_of(node, 13, 1, len(shape))
    drop = set(axes) if axes is not None else {d for d, s in enumerate(shape) if s == 1}
    for d in drop:
        if shape[d] != 1:
            raise node.error(f"cannot squeeze axis {d} of shape {list(shape)} (size {shape[d]}, not 1)")
    return reshaped(node, tuple(s for d, s in enumerate(shape) if d not in drop))


@converter("Unsqueeze", since=1)
@converter("Unsqueeze", since=11)
@converter("Unsqueeze", since=13)
@converter("Unsqueeze", since=21)
def unsqueeze(node: Node) -> Any:
    shape = node.shape(0)
    n = len(shape) + len(axes_of(node, 13, 1, 10**6) or [])  # the rank is known once axes are counted
    axes = axes_of(node, 13, 1, n)
    if axes is None or len(set(axes)) != len(axes):
        raise node.error(f"axes {axes} must be given and distinct")
    rest = iter(shape)
    return reshaped(node, tuple(1 if d in axes else next(rest) for d in range(n)))


@converter("Transpose", since=1)
@converter("Transpose", since=13)
@converter("Transpose", since=21)
def transpose(node: Node) -> Any:
    shape = node.shape(0)
    perm = node.attr("perm") or list(reversed(range(len(shape))))
    if len(shape) <= 1:
        return node.input(0)
    return Out(topi.transpose(node.tensor(0), perm), tuple(shape[p] for p in perm), node.dtype(0))


@converter("Concat", since=4)
@converter("Concat", since=11)
@converter("Concat", since=13)
def concat(node: Node) -> Any:
    present = [i for i in range(len(node)) if node.has(i) and math.prod(node.shape(i)) > 0]
    if len(present) == 1:
        return node.input(present[0])
    ndim = len(node.shape(present[0]))
    axis = node.axis(node.attr("axis"), ndim)
    shape = list(node.shape(present[0]))
    shape[axis] = sum(node.shape(i)[axis] for i in present)
    t = topi.concatenate([node.tensor(i) for i in present], axis=axis)
    return Out(t, tuple(shape), node.dtype(present[0]))


def take_slices(node: Node, axis: int, sizes: list[int]) -> list[Out]:
    shape = node.shape(0)
    outs, start = [], 0
    for size in sizes:
        out_shape = (*shape[:axis], size, *shape[axis + 1 :])

        def body(*i: Any, start: int = start) -> Any:
            return read(node, 0, (*i[:axis], i[axis] + start, *i[axis + 1 :]))

        outs.append(compute(node, out_shape, body, name="split"))
        start += size
    return outs


@converter("Split", since=2)
@converter("Split", since=11)
@converter("Split", since=13)
@converter("Split", since=18)
def split(node: Node) -> list[Out]:
    shape = node.shape(0)
    axis = node.axis(node.attr("axis", 0), len(shape))
    n_out = len(node.proto.output)
    if node.opset < 13:
        sizes = node.attr("split")
    else:
        sizes = int_list(node, 1, "split") if node.has(1) else None
    if sizes is None:
        n = node.attr("num_outputs", n_out)
        chunk = -(-shape[axis] // n)
        sizes = [min(chunk, shape[axis] - k * chunk) for k in range(n)]
    if sum(sizes) != shape[axis]:
        raise node.error(f"split sizes {sizes} do not add up to dim {axis} of {list(shape)}")
    return take_slices(node, axis, list(sizes))


@converter("Slice", since=1)
@converter("Slice", since=10)
@converter("Slice", since=11)
@converter("Slice", since=13)
def slice_(node: Node) -> Out:
    shape = node.shape(0)
    if node.opset < 10:
        starts, ends = node.attr("starts"), node.attr("ends")
        axes, steps = node.attr("axes"), [1] * len(starts)
    else:
        starts, ends = int_list(node, 1, "starts"), int_list(node, 2, "ends")
        axes = int_list(node, 3, "axes") if node.has(3) else None
        steps = int_list(node, 4, "steps") if node.has(4) else [1] * len(starts)
    axes = list(range(len(starts))) if axes is None else [node.axis(a, len(shape), "axes") for a in axes]
    begin, step = [0] * len(shape), [1] * len(shape)
    out = list(shape)
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        if st == 0:
            raise node.error("a slice step of 0 is invalid")
        r = range(shape[a])[slice(s, e, st)]
        begin[a], step[a], out[a] = r.start, r.step, len(r)

    def body(*i: Any) -> Any:
        return read(
            node, 0, tuple(b + (j * s if s != 1 else j) for j, b, s in zip(i, begin, step, strict=True))
        )

    return compute(node, tuple(out), body)


@converter("Expand", since=8)
@converter("Expand", since=13)
def expand(node: Node) -> Any:
    src = node.shape(0)
    try:
        shape = tuple(int(d) for d in np.broadcast_shapes(src, tuple(int_list(node, 1, "shape"))))
    except ValueError:
        raise node.error(f"shape {int_list(node, 1, 'shape')} does not broadcast with {list(src)}") from None
    if shape == src:
        return node.input(0)
    t = node.tensor(0)
    return compute(node, shape, lambda *i: broadcast_read(t, i) if src else t[0])


@converter("Tile", since=6)
@converter("Tile", since=13)
def tile(node: Node) -> Out:
    src = node.shape(0)
    reps = int_list(node, 1, "repeats")
    shape = tuple(d * r for d, r in zip(src, reps, strict=True))
    return compute(
        node,
        shape,
        lambda *i: read(node, 0, tuple(j % d if r > 1 else j for j, d, r in zip(i, src, reps, strict=True))),
    )


@converter("Shape", since=1)
@converter("Shape", since=13)
@converter("Shape", since=15)
@converter("Shape", since=19)
@converter("Shape", since=21)
def shape_(node: Node) -> np.ndarray:
    dims = node.shape(0)
    start, end = node.attr("start", 0), node.attr("end", len(dims))
    return np.array(dims[slice(start, end)], dtype=np.int64)


@converter("Size", since=1)
@converter("Size", since=13)
@converter("Size", since=19)
@converter("Size", since=21)
def size(node: Node) -> np.ndarray:
    return np.array(math.prod(node.shape(0)), dtype=np.int64)


@converter("Constant", since=1)
@converter("Constant", since=9)
@converter("Constant", since=11)
@converter("Constant", since=12)
@converter("Constant", since=13)
@converter("Constant", since=19)
@converter("Constant", since=21)
def constant(node: Node) -> np.ndarray:
    for name, dtype in (("value", None), ("value_float", np.float32), ("value_floats", np.float32),
                        ("value_int", np.int64), ("value_ints", np.int64)):  # fmt: skip
        if name in node.attrs:
            return np.asarray(node.attrs[name], dtype=dtype)
    raise node.error(f"needs one of value, value_float(s), value_int(s); got {sorted(node.attrs)}")


@converter("ConstantOfShape", since=9)
@converter("ConstantOfShape", since=20)
@converter("ConstantOfShape", since=21)
def constant_of_shape(node: Node) -> np.ndarray:
    value = node.attr("value")
    fill = np.zeros(1, np.float32) if value is None else np.asarray(value).reshape(-1)
    return np.full(tuple(int_list(node, 0, "shape")), fill[0], dtype=fill.dtype)


@converter("Range", since=11)
def range_(node: Node) -> np.ndarray:
    # 0-d arrays, not Python numbers: arange then counts the elements in the inputs' dtype
    bounds: list[Any] = [
        np.asarray(node.const(i, what)) for i, what in enumerate(("start", "limit", "delta"))
    ]
    start, limit, delta = bounds
    return np.arange(start, limit, delta, dtype=start.dtype)


@converter("Trilu", since=14)
def trilu(node: Node) -> Out:
    k = int_list(node, 1, "k")[0] if node.has(1) else 0
    upper = node.attr("upper", 1)
    zero = te.const(0, node.tensor(0).dtype)

    def body(*i: Any) -> Any:
        row, col = i[-2], i[-1]
        keep = (col - row >= k) if upper else (col - row <= k)
        return te.if_then_else(keep, read(node, 0, i), zero)

    return compute(node, node.shape(0), body)


@converter("Pad", since=2)
@converter("Pad", since=11)
@converter("Pad", since=13)
@converter("Pad", since=18)
@converter("Pad", since=19)
@converter("Pad", since=21)
def pad(node: Node) -> Out:
    shape = node.shape(0)
    n = len(shape)
    mode = node.attr("mode", "constant")
    if node.opset < 11:
        pads, value = node.attr("pads"), node.attr("value", 0.0)
        axes = list(range(n))
    else:
        pads = int_list(node, 1, "pads")
        value = np.asarray(node.const(2, "constant_value")).item() if node.has(2) else 0
        given = axes_of(node, 18, 3, n) if node.opset >= 18 else None
        axes = list(range(n)) if given is None else given
    before, after = [0] * n, [0] * n
    for j, a in enumerate(axes):
        before[a], after[a] = pads[j], pads[j + len(axes)]
    out = tuple(d + b + e for d, b, e in zip(shape, before, after, strict=True))
    fill = te.const(value, node.tensor(0).dtype)

    def source(i: Any, d: int, b: int) -> tuple[Any, Any]:
        """The read position along one dim and the condition that it lies inside the input."""
        j = i - b if b else i
        if mode == "edge":
            return clamp(j, d), None
        if mode == "reflect":
            j = te.abs(j) if b > 0 else j
            j = te.if_then_else(j >= d, 2 * (d - 1) - j, j) if d > 1 else te.const(0, "int32")
            return clamp(j, d), None  # the clamp lets bound checking see it in range
        if mode == "wrap":
            return clamp(j % d, d), None
        return j, te.all(j >= 0, j < d)

    def body(*i: Any) -> Any:
        pos, inside = [], []
        for j, d, b in zip(i, shape, before, strict=True):
            p, ok = source(j, d, b)
            pos.append(p)
            if ok is not None:
                inside.append(ok)
        if mode == "constant" and inside:
            return te.if_then_else(te.all(*inside), read(node, 0, pos), fill)
        return read(node, 0, pos)

    if mode not in ("constant", "edge", "reflect", "wrap"):
        raise node.error(f"mode {mode!r} is not one of constant, edge, reflect, wrap")
    return compute(node, out, body)


@converter("EyeLike", since=9)
@converter("EyeLike", since=22)
def eye_like(node: Node) -> Out:
    dtype = (
        onnx_dtype(node.attr("dtype"), f"node {node.name!r} (EyeLike)")
        if "dtype" in node.attrs
        else node.dtype(0)
    )
    k = node.attr("k", 0)
    held = "int32" if dtype == "bool" else dtype
    return compute(
        node,
        node.shape(0),
        lambda i, j: te.if_then_else(j - i == k, te.const(1, held), te.const(0, held)),
        dtype,
    )
