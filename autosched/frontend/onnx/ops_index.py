"""Indexing ONNX ops: Gather, GatherElements, GatherND, OneHot, ScatterElements, ScatterND,
DepthToSpace and SpaceToDepth.

Indices are data here (not shapes): they may come from the model's inputs. Every read through an
index is clamped into range, since te reads must stay in bounds; ONNX calls out-of-range indices
invalid, so a valid model never sees the clamp. Scatters are gathers in reverse: each output element
searches the updates that land on it with a reduction (fine for the small index sets models hold).
"""

from __future__ import annotations

import math
from typing import Any

from ... import te
from ...te.expr import is_int
from ...topi.transform import lowest
from .context import Node, Out
from .ops_tensor import clamp, compute, read
from .registry import converter


def normalized_index(index: Any, size: int) -> Any:
    """A possibly negative ONNX index into a dim of ``size``, as an in-range int32 position."""
    pos = te.cast("int32", index)
    pos = te.if_then_else(pos < 0, pos + size, pos)
    return clamp(pos, size)


@converter("Gather", since=1)
@converter("Gather", since=11)
@converter("Gather", since=13)
def gather(node: Node) -> Out:
    data, ind = node.shape(0), node.shape(1)
    axis = node.axis(node.attr("axis", 0), len(data))
    k = len(ind)

    def body(*i: Any) -> Any:
        pos = normalized_index(read(node, 1, i[axis : axis + k]), data[axis])
        return read(node, 0, (*i[:axis], pos, *i[axis + k :]))

    return compute(node, data[:axis] + ind + data[axis + 1 :], body)


@converter("GatherElements", since=11)
@converter("GatherElements", since=13)
def gather_elements(node: Node) -> Out:
    data, ind = node.shape(0), node.shape(1)
    axis = node.axis(node.attr("axis", 0), len(data))

    def body(*i: Any) -> Any:
        pos = normalized_index(read(node, 1, i), data[axis])
        return read(node, 0, (*i[:axis], pos, *i[axis + 1 :]))

    return compute(node, ind, body)


@converter("GatherND", since=11)
@converter("GatherND", since=12)
@converter("GatherND", since=13)
def gather_nd(node: Node) -> Out:
    data, ind = node.shape(0), node.shape(1)
    b = node.attr("batch_dims", 0)
    k = ind[-1]
    shape = (*ind[:-1], *data[b + k :])
    q = len(ind) - 1

    def body(*i: Any) -> Any:
        lead = i[:q]
        picked = [normalized_index(read(node, 1, (*lead, t)), data[b + t]) for t in range(k)]
        return read(node, 0, (*lead[:b], *picked, *i[q:]))

    return compute(node, shape, body)


@converter("OneHot", since=9)
@converter("OneHot", since=11)
def one_hot(node: Node) -> Out:
    ind = node.shape(0)
    depth = int(node.const(1, "depth").reshape(-1)[0])
    axis = node.attr("axis", -1)
    axis = node.axis(axis + len(ind) + 1 if axis < 0 else axis, len(ind) + 1)
    values = node.tensor(2)

    def body(*i: Any) -> Any:
        raw = te.cast("int64", read(node, 0, (*i[:axis], *i[axis + 1 :])))
        index = te.if_then_else(raw < 0, raw + depth, raw)
        return te.if_then_else(index == te.cast("int64", i[axis]), values[1], values[0])

    return compute(node, (*ind[:axis], depth, *ind[axis:]), body, node.dtype(2))


def combine(reduction: str, dtype: str) -> tuple[Any, Any]:
    """The te reducer and identity that fold the updates landing on one element."""
    if reduction == "add":
        return te.sum, te.const(0, dtype)
    if reduction == "mul":
        return te.comm_reducer(lambda a, b: a * b, lambda t: 1, name="prod"), te.const(1, dtype)
    if reduction == "max":
        return te.max, te.const(lowest(dtype), dtype)
    return te.min, te.const(-lowest(dtype) - (1 if is_int(dtype) else 0), dtype)


def scatter(node: Node, shape: tuple[int, ...], hit: Any, update: Any, axes: list[Any]) -> Out:
    """``data`` where no update lands, else the last update (reduction none) or the fold with data.

    ``hit(i)`` says whether the update at reduce position ``axes`` lands on output index ``i``;
    ``update(i)`` reads that update. The last landing update is found by a max over its flat position.
    """
    reduction = node.attr("reduction", "none")
    extents = [a.extent for a in axes]
    dtype = node.tensor(0).dtype
    count = te.compute(
        te_shape_of(shape),
        lambda *i: te.sum(
            te.if_then_else(hit(i, axes), te.const(1, "int32"), te.const(0, "int32")), axis=axes
        ),
        name="scatter_hits",
    )
    if reduction == "none":
        flat = flat_position(axes, extents)
        last = te.compute(
            te_shape_of(shape),
            lambda *i: te.max(te.if_then_else(hit(i, axes), flat, te.const(-1, "int32")), axis=axes),
            name="scatter_last",
        )

        def body(*i: Any) -> Any:
            pos = unflatten(te.max(last[i], 0), extents)  # count > 0 guards the -1 of "none landed"
            return te.if_then_else(count[i] > 0, update(i, pos), read(node, 0, i))

        return compute(node, shape, body, name="scatter")
    reducer, identity = combine(reduction, dtype)
    fill = identity
    folded = te.compute(
        te_shape_of(shape),
        lambda *i: reducer(te.if_then_else(hit(i, axes), update(i, axes), fill), axis=axes),
        name="scatter_fold",
    )
    ops = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": te.max, "min": te.min}

    def fold_body(*i: Any) -> Any:
        return te.if_then_else(count[i] > 0, ops[reduction](read(node, 0, i), folded[i]), read(node, 0, i))

    return compute(node, shape, fold_body, name="scatter")


def te_shape_of(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(shape) or (1,)


def flat_position(axes: list[Any], extents: list[int]) -> Any:
    flat: Any = axes[0]
    for a, e in zip(axes[1:], extents[1:], strict=True):
        flat = flat * e + a
    return flat


def unflatten(flat: Any, extents: list[int]) -> list[Any]:
    out = []
    for d, e in enumerate(extents):
        stride = math.prod(extents[d + 1 :])
        q = flat // stride if stride > 1 else flat
        out.append(q % e if d > 0 else te.min(q, e - 1))  # in range for bound checking too
    return out


@converter("Scatter", since=9)  # ScatterElements under its old name (deprecated in opset 11)
@converter("ScatterElements", since=11)
@converter("ScatterElements", since=13)
@converter("ScatterElements", since=16)
@converter("ScatterElements", since=18)
def scatter_elements(node: Node) -> Out:
    data, ind = node.shape(0), node.shape(1)
    axis = node.axis(node.attr("axis", 0), len(data))
    r = te.reduce_axis((0, ind[axis]), name="r")
    axes = [r]

    def at(i: Any, pos: Any) -> tuple[Any, ...]:
        # The update position that may land on output index i: i's index off the axis, pos along it.
        return tuple(pos[0] if d == axis else te.min(i[d], ind[d] - 1) for d in range(len(data)))

    def hit(i: Any, pos: Any) -> Any:
        inside = [i[d] < ind[d] for d in range(len(data)) if d != axis and ind[d] < data[d]]
        lands = normalized_index(read(node, 1, at(i, pos)), data[axis]) == i[axis]
        return te.all(lands, *inside)

    return scatter(node, data, hit, lambda i, pos: read(node, 2, at(i, pos)), axes)


@converter("ScatterND", since=11)
@converter("ScatterND", since=13)
@converter("ScatterND", since=16)
@converter("ScatterND", since=18)
def scatter_nd(node: Node) -> Out:
    data, ind = node.shape(0), node.shape(1)
    k = ind[-1]
    axes = [te.reduce_axis((0, e), name=f"r{d}") for d, e in enumerate(ind[:-1])]

    def hit(i: Any, pos: Any) -> Any:
        return te.all(*(normalized_index(read(node, 1, (*pos, t)), data[t]) == i[t] for t in range(k)))

    return scatter(node, data, hit, lambda i, pos: read(node, 2, (*pos, *i[k:])), axes)


@converter("DepthToSpace", since=1)
@converter("DepthToSpace", since=11)
@converter("DepthToSpace", since=13)
def depth_to_space(node: Node) -> Out:
    n, c, h, w = node.shape(0)
    b = node.attr("blocksize")
    crd = node.attr("mode", "DCR") == "CRD"
    out_c = c // (b * b)

    def body(nn: Any, cc: Any, y: Any, x: Any) -> Any:
        block = (y % b) * b + x % b
        chan = cc * (b * b) + block if crd else block * out_c + cc
        return read(node, 0, (nn, chan, y // b, x // b))

    return compute(node, (n, out_c, h * b, w * b), body)


@converter("SpaceToDepth", since=1)
@converter("SpaceToDepth", since=13)
def space_to_depth(node: Node) -> Out:
    n, c, h, w = node.shape(0)
    b = node.attr("blocksize")
    crd = node.attr("mode", "DCR") == "CRD"

    def body(nn: Any, cc: Any, y: Any, x: Any) -> Any:
        block, chan = (cc % (b * b), cc // (b * b)) if crd else (cc // c, cc % c)
        return read(node, 0, (nn, chan, y * b + block // b, x * b + block % b))

    return compute(node, (n, c * b * b, h // b, w // b), body)
