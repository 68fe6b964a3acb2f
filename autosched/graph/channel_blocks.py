"""Activations stored in channel blocks, ``[N, C/b, H, W, b]`` (NCHW16c), between a CNN's tasks.

onnxruntime's CPU convs run on NCHWc activations (its reorders placed once at the graph's edges), TVM's
alter-layout does the same. In NCHW a conv has two bad choices for its vector lanes: along W, which fills
7 of 16 lanes at ResNet's 7 x 7 layer4, or along the output channels, which stores every lane to another
plane. With the channels in blocks of ``b`` (one vector), a block's ``b`` channels of one pixel are one
contiguous vector: the conv's accumulator tile is pixels x channel vectors, its input one broadcast per
input channel, its stores whole vectors; a depthwise conv or a pooling reads and writes whole vectors.

:func:`blocked_channels` rewrites the graph:

- every 4-d compute whose channel dim is a multiple of ``b``, linked through such computes to a conv
  (a reader of a 4-d weight: a 16-head attention's 4-d tensors are no image), becomes
  ``T'[n, co, h, w, ci]`` with its body read at ``c = co * b + ci``, unless its channel axis indexes
  a 4-d tensor that stays NCHW (a graph input read per channel: every lane would be another plane) or
  a weight other than as one plain index. A graph output keeps its layout: it reads the blocked
  tensors at ``[n, c // b, h, w, c % b]``, the one reorder;
- a read ``T[i0, c, i2, i3]`` of a blocked tensor becomes ``T'[i0, co, i2, i3, ci]`` when ``c`` is the
  reader's own channel axis, or a reduction axis (a conv over input channels) that is split the same way,
  ``rc = rco * b + rci``; any other read becomes ``T'[i0, c // b, i2, i3, c % b]``, still exact;
- a weight that only blocked computes read, each with their channel axis as its index ``p`` (a bias, a
  depthwise weight, a conv weight stored output-channel last), gets that dim blocked too: ``b`` is its last
  dim, and the outer index stays at ``p`` (so a bias add still reads a subsequence of the output's axes
  and fuses as a broadcast) or, for a contraction's weight, moves first (``[K/b, C, R, S, b]``: one output
  block's weights are one contiguous run, as onnxruntime's reordered filters are).

Every rewrite is an exact re-indexing, so the model computes the same values; task keys change with the
layout (records tuned on NCHW tasks do not apply to the blocked ones).

Example: ``model = compile_model(blocked_channels(as_graph("resnet18.onnx")), log=...)``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..te.expr import Binary, Const, Expr, IterVar, Var, binary, const
from ..te.graph import consumers
from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Reduce, Tensor, TensorRead, walk
from ..te.visit import map_children
from .ir import Graph

BLOCK = 16  # channels per block: one AVX-512 vector of float32 (two AVX2 vectors)

Split = dict[int, tuple[IterVar, IterVar]]  # id(axis) -> (outer, inner), axis = outer * b + inner


def blocked_channels(graph: Graph, block: int = BLOCK) -> Graph:
    """``graph`` with its 4-d activations in ``[N, C/b, H, W, b]`` blocks (see the module docstring)."""
    ops = graph.ops()
    returned = {o.tensor.op for o in graph.outputs}
    chosen = _choose(ops, returned, set(graph.weights), block)
    if not chosen:
        return graph
    moves = _weight_moves(graph, ops, chosen, returned)
    new: dict[Operation, Tensor] = {}
    weights: dict[Operation, np.ndarray] = {}
    for op, value in graph.weights.items():
        if op in moves:
            p, first = moves[op]
            shape = _blocked_shape(op.shape, p, first, block)
            new[op] = Tensor(PlaceholderOp(op.name, shape, op.dtype))
            weights[new[op].op] = _blocked_value(value, p, first, block)
        else:
            weights[op] = value
    for op in ops:
        if isinstance(op, ComputeOp):
            new[op] = Tensor(_rebuild(op, op in chosen, chosen, moves, new, block))
    outputs = tuple(dataclasses.replace(o, tensor=new.get(o.tensor.op, o.tensor)) for o in graph.outputs)
    return dataclasses.replace(graph, outputs=outputs, weights=weights)


def _reads(op: ComputeOp) -> list[TensorRead]:
    return [e for e in walk(op.body) if isinstance(e, TensorRead)]


def _uses(e: Expr, v: IterVar) -> bool:
    return any(n is v for n in walk(e))


def _choose(
    ops: list[Operation], returned: set[Operation], weights: set[Operation], block: int
) -> set[ComputeOp]:
    """The computes to block: 4-d, ``C % b == 0``, not an output, and their channel axis indexes only
    blocked tensors, and weights only as one plain index (dropping one can drop its readers: a fixpoint)."""
    chosen: set[ComputeOp] = {
        op
        for op in ops
        if isinstance(op, ComputeOp) and len(op.axis) == 4 and op.shape[1] % block == 0 and op not in returned
    }
    changed = True
    while changed:
        changed = False
        for op in list(chosen):
            c = op.axis[1]
            for r in _reads(op):
                src = r.tensor.op
                uses = [i for i in r.indices if _uses(i, c)]
                if not uses or src in chosen:
                    continue
                if src in weights and len(uses) == 1 and uses[0] is c:
                    continue
                chosen.discard(op)
                changed = True
                break
    return _with_a_conv(chosen, weights)


def _with_a_conv(chosen: set[ComputeOp], weights: set[Operation]) -> set[ComputeOp]:
    """The chosen computes connected (producer to reader, among themselves) to a conv, one that reads a
    4-d weight: an attention's ``[batch, heads, seq, d]`` with 16 heads is no image and stays as it is."""
    links: dict[ComputeOp, set[ComputeOp]] = {op: set() for op in chosen}
    for op in chosen:
        for r in _reads(op):
            if r.tensor.op in chosen:
                links[op].add(r.tensor.op)
                links[r.tensor.op].add(op)
    todo = [
        op for op in chosen if any(r.tensor.op in weights and len(r.tensor.shape) == 4 for r in _reads(op))
    ]
    keep = set(todo)
    while todo:
        for other in links[todo.pop()] - keep:
            keep.add(other)
            todo.append(other)
    return keep


def _weight_moves(
    graph: Graph, ops: list[Operation], chosen: set[ComputeOp], returned: set[Operation]
) -> dict[Operation, tuple[int, bool]]:
    """Weight -> (the dim its readers index with their channel axis, outer index first), for the weights
    that only blocked computes read, all at the same dim with exactly their channel axis."""
    readers = consumers(ops)
    moves: dict[Operation, tuple[int, bool]] = {}
    for w in graph.weights:
        users = [u for u in readers.get(w, []) if isinstance(u, ComputeOp) and u in chosen]
        if not users or w in returned or len(users) != len(readers[w]):
            continue
        dims: set[int] = set()
        ok = True
        for u in users:
            c = u.axis[1]
            for r in _reads(u):
                if r.tensor.op is not w:
                    continue
                at = [p for p, i in enumerate(r.indices) if i is c]
                if len(at) != 1 or any(_uses(i, c) for p, i in enumerate(r.indices) if p != at[0]):
                    ok = False
                dims.update(at)
        if ok and len(dims) == 1:
            first = all(isinstance(u.body, Reduce) for u in users)
            moves[w] = (dims.pop(), first)
    return moves


def _blocked_shape(shape: tuple[int, ...], p: int, first: bool, block: int) -> tuple[int, ...]:
    rest = list(shape)
    outer = rest[p] // block
    if first:
        del rest[p]
        return (outer, *rest, block)
    rest[p] = outer
    return (*rest, block)


def _blocked_value(value: np.ndarray, p: int, first: bool, block: int) -> np.ndarray:
    shape = value.shape
    split = value.reshape(*shape[:p], shape[p] // block, block, *shape[p + 1 :])
    moved = np.moveaxis(split, p + 1, -1)
    if first:
        moved = np.moveaxis(moved, p, 0)
    return np.ascontiguousarray(moved)


def _split_axis(v: IterVar, block: int, split: Split, mapping: dict[int, Expr]) -> tuple[IterVar, IterVar]:
    outer = IterVar(f"{v.name}o", v.dtype, v.extent // block, v.kind)
    inner = IterVar(f"{v.name}i", v.dtype, block, v.kind)
    split[id(v)] = (outer, inner)
    mapping[id(v)] = binary("+", binary("*", outer, const(block, v.dtype)), inner)
    return outer, inner


def _linear(e: Expr) -> tuple[dict[int, tuple[Var, int]], int] | None:
    """``e`` as ``sum(coef * var) + const`` (unit-extent axes dropped: they are 0), or None."""
    if isinstance(e, Var):
        if isinstance(e, IterVar) and e.extent == 1:
            return {}, 0
        return {id(e): (e, 1)}, 0
    if isinstance(e, Const) and isinstance(e.value, int):
        return {}, e.value
    if isinstance(e, Binary) and e.op in ("+", "-", "*"):
        a, b = _linear(e.a), _linear(e.b)
        if a is None or b is None:
            return None
        if e.op == "*":
            if a[0] and b[0]:
                return None
            (terms, k), scale = (a, b[1]) if a[0] else (b, a[1])
            return {i: (v, c * scale) for i, (v, c) in terms.items()}, k * scale
        sign = 1 if e.op == "+" else -1
        terms = dict(a[0])
        for i, (v, c) in b[0].items():
            terms[i] = (v, terms.get(i, (v, 0))[1] + sign * c)
        return {i: t for i, t in terms.items() if t[1]}, a[1] + sign * b[1]
    return None


def _block_of(e: Expr, block: int) -> tuple[Expr, Expr]:
    """(block, lane) of channel index ``e``: ``co + k, ci`` where ``e`` is ``co * b + ci + k * b`` over a
    split channel (a depthwise conv's ``ff + rc`` with ``rc`` of extent 1, a slice at a block boundary),
    else ``e // b, e % b``."""
    form = _linear(e)
    if form is not None and len(form[0]) == 2 and form[1] % block == 0:
        (v1, c1), (v2, c2) = sorted(form[0].values(), key=lambda t: -t[1])
        if c1 == block and c2 == 1 and isinstance(v2, IterVar) and v2.extent == block:
            outer: Expr = v1 if form[1] == 0 else binary("+", v1, const(form[1] // block, v1.dtype))
            return outer, v2
    return binary("//", e, block), binary("%", e, block)


def _rebuild(
    op: ComputeOp,
    blocked: bool,
    chosen: set[ComputeOp],
    moves: dict[Operation, tuple[int, bool]],
    new: dict[Operation, Tensor],
    block: int,
) -> ComputeOp:
    split: Split = {}
    mapping: dict[int, Expr] = {}
    axis = op.axis
    if blocked:
        n, c, h, w = op.axis
        outer, inner = _split_axis(c, block, split, mapping)
        axis = (n, outer, h, w, inner)
    reduce_axes: tuple[IterVar, ...] = ()
    if isinstance(op.body, Reduce):  # a reduction axis that indexes a blocked tensor's channels: split it
        by_channel = {id(r.indices[1]) for r in _reads(op) if r.tensor.op in chosen}
        for rv in op.body.axes:
            if id(rv) in by_channel and rv.extent % block == 0:
                reduce_axes += _split_axis(rv, block, split, mapping)
            else:
                reduce_axes += (rv,)
    memo: dict[int, Expr] = {}

    def read(e: TensorRead) -> Expr:
        idx = tuple(go(i) for i in e.indices)
        src = e.tensor.op
        if src in chosen:
            co, ci = split.get(id(e.indices[1])) or _block_of(idx[1], block)
            return TensorRead(new[src], (idx[0], co, idx[2], idx[3], ci), e.dtype)
        if src in moves:
            p, first = moves[src]
            co, ci = split[id(e.indices[p])]
            rest = list(idx)
            if first:
                del rest[p]
                return TensorRead(new[src], (co, *rest, ci), e.dtype)
            rest[p] = co
            return TensorRead(new[src], (*rest, ci), e.dtype)
        return TensorRead(new.get(src, e.tensor), idx, e.dtype)

    def go(e: Expr) -> Expr:
        hit = memo.get(id(e))
        if hit is not None:
            return hit
        out: Expr
        if isinstance(e, Var):
            out = mapping.get(id(e), e)
        elif isinstance(e, TensorRead):
            out = read(e)
        elif isinstance(e, Reduce):
            cond = None if e.condition is None else go(e.condition)
            out = dataclasses.replace(e, source=go(e.source), condition=cond, axes=reduce_axes)
        else:
            out = map_children(e, go)
        memo[id(e)] = out
        return out

    return dataclasses.replace(op, axis=axis, body=go(op.body))
