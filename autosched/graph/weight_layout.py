"""Conv weights stored output-channel last, once, when the model is built (TVM's alter-layout for constants).

A conv's weight ``W[k, c, ry, rx]`` read with the output channel ``k`` in vector lanes is a gather
across ``k`` (stride ``c * ry * rx``), so the tiled conv packs it into a ``[c, ry, rx, k]`` copy on
every call. For ResNet-18's 512-channel 3x3 convs that copy is 9.4 MB a call: on one core, layer4's
conv ran 4.9-6.1 ms with it and 2.5 ms with the weight stored ``[c, ry, rx, k]`` and read in place
(onnxruntime: 1.5-1.6 ms; its NCHWc reorder of weights is constant-folded at session start).

:func:`channels_last_weights` rewrites the graph: every such weight (rank 4, only read by reductions,
each read's first index an output axis of the reader and its second a reduction over more than one
channel: depthwise weights are left alone) becomes a new constant of shape ``[c, ry, rx, k]``, and its
reads ``W[i0, i1, i2, i3]`` become ``W'[i1, i2, i3, i0]``. The rewritten weight no longer matches the
rule, so the pass is idempotent. The task workloads change with it (their keys too: records tuned on
the original layout do not apply to the rewritten tasks).

Example: ``model = compile_model(channels_last_weights(from_onnx("resnet18.onnx")), log=...)``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping

import numpy as np

from ..te.expr import Expr, IterVar
from ..te.graph import consumers, topo_order
from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor, TensorRead, walk
from ..te.visit import rewrite
from .ir import Graph

PERM = (1, 2, 3, 0)  # [k, c, ry, rx] -> [c, ry, rx, k]


def channels_last_weights(graph: Graph) -> Graph:
    """``graph`` with its convs' weights stored output-channel last (see the module docstring)."""
    readers = consumers(graph.ops())
    returned = {o.tensor.op for o in graph.outputs}  # a weight that is an output keeps its layout
    moves: dict[Operation, Relayout] = {}
    for op in graph.weights:
        if op in readers and op not in returned and _output_channel_first(op, readers[op]):
            moves[op] = Relayout(
                tuple(op.shape[p] for p in PERM),
                lambda idx: tuple(idx[p] for p in PERM),
                lambda value: np.ascontiguousarray(value.transpose(PERM)),
            )
    return relayout(graph, moves)


@dataclasses.dataclass(frozen=True)
class Relayout:
    """A weight stored anew: its new shape, each read's new indices from the old, and the new value."""

    shape: tuple[int, ...]
    index: Callable[[tuple[Expr, ...]], tuple[Expr, ...]]
    value: Callable[[np.ndarray], np.ndarray]


# given the new tensor of any old one, a compute's stand-in
Replace = Callable[[Callable[[Tensor], Tensor]], Tensor]


def relayout(
    graph: Graph,
    moves: Mapping[Operation, Relayout],
    replace: Mapping[Operation, Replace] | None = None,
    added: Mapping[Operation, np.ndarray] | None = None,
) -> Graph:
    """``graph`` with each weight of ``moves`` replaced by a new constant in its new layout, every read of
    it rewritten, each compute of ``replace`` replaced by what its function builds (from the rebuilt
    tensors it is given) and the weights ``added`` stored: the shared mechanics of the graph passes
    (here, gemm_layout.py and winograd.py). Weights that no output reads any more are dropped."""
    replace = replace or {}
    if not moves and not replace:
        return graph
    moved = {op: Tensor(PlaceholderOp(op.name, m.shape, op.dtype)) for op, m in moves.items()}
    rebuilt: dict[Operation, Tensor] = {}

    def new(t: Tensor) -> Tensor:
        return moved.get(t.op) or rebuilt.get(t.op) or t

    def swap(e: object) -> Expr | None:
        if not isinstance(e, TensorRead):
            return None
        src = e.tensor.op
        idx = tuple(rewrite(i, swap) for i in e.indices)
        if src in moved:
            return TensorRead(moved[src], moves[src].index(idx), e.dtype)
        return TensorRead(new(e.tensor), idx, e.dtype)

    for op in graph.ops():
        if op in replace:
            rebuilt[op] = replace[op](new)
        elif isinstance(op, ComputeOp):
            rebuilt[op] = Tensor(dataclasses.replace(op, body=rewrite(op.body, swap)))

    weights = {
        (moved[op].op if op in moved else op): (moves[op].value(value) if op in moves else value)
        for op, value in graph.weights.items()
    }
    weights.update(added or {})
    outputs = tuple(dataclasses.replace(o, tensor=new(o.tensor)) for o in graph.outputs)
    if replace:  # a replaced compute's weights may be read no more (a conv's direct filter)
        reachable = set(topo_order([o.tensor for o in outputs]))
        weights = {w: v for w, v in weights.items() if w in reachable}
    return dataclasses.replace(graph, outputs=outputs, weights=weights)


def _output_channel_first(weight: Operation, readers: list[Operation]) -> bool:
    """Every reader is a reduction reading ``weight[k, c, ...]`` with ``k`` one of its output axes and
    ``c`` a reduction axis of extent > 1 (a depthwise conv's second index is a unit axis or constant)."""
    if len(weight.shape) != 4 or not readers:
        return False
    for reader in readers:
        if not isinstance(reader, ComputeOp) or not reader.reduce_axis:
            return False
        spatial = {id(a) for a in reader.axis}
        wide = {id(r) for r in reader.reduce_axis if r.extent > 1}
        reads = [n for n in walk(reader.body) if isinstance(n, TensorRead) and n.tensor.op is weight]
        for r in reads:
            first, second = r.indices[0], r.indices[1]
            if not (isinstance(first, IterVar) and id(first) in spatial):
                return False
            if not any(id(v) in wide for v in walk(second)):
                return False
    return True
