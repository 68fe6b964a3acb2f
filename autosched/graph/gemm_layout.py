"""GEMM weights stored once, at import, in column panels ``[N / nb, K, nb]`` (BLIS/MLAS pre-packing).

A GEMM's constant ``B[k, j]`` read with ``j`` in vector lanes walks rows ``N`` floats apart at every
``k`` step (BERT's 768 x 3072 FFN weight: 12 KB apart, the same L1 sets, a TLB entry each), and the
sketch's ``pack`` decision copies its tile into a contiguous buffer on every call (9.4 MB a call for
that weight). onnxruntime's MLAS packs such weights once at session start. :func:`panel_weights`
does it at import: every 2-d weight that only GEMM-like reductions read, as ``B[k, j]`` (MatMul, Gemm)
or ``B[j, k]`` (Gemm ``transB=1``) with ``j`` the reader's last output axis and ``k`` a reduction axis,
becomes ``P[j // nb, k, j % nb]``, so a vector tile that divides ``nb`` reads one contiguous run of
each panel per ``k`` step, and the panel a tile sweeps is ``K * nb`` floats in a row.

``nb`` is :data:`PANEL` (32: two AVX-512 vectors, the register tile's width in the best GEMM schedules
here; the sketch keeps the vector tile a divisor of it, search_space/sketch_tiling.py). A weight whose
``N`` is not a multiple of ``nb`` keeps its layout. The rewritten weight is rank 3: idempotent. Task
keys change with the layout (records tuned on the old layout do not apply).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..te.expr import Expr, IterVar, const
from ..te.graph import consumers
from ..te.tensor import ComputeOp, Operation, TensorRead, walk
from .ir import Graph
from .weight_layout import Relayout, relayout

PANEL = 32


def panel_weights(graph: Graph, nb: int = PANEL) -> Graph:
    """``graph`` with its GEMM weights stored in ``[N / nb, K, nb]`` panels (see the module docstring)."""
    readers = consumers(graph.ops())
    returned = {o.tensor.op for o in graph.outputs}
    moves: dict[Operation, Relayout] = {}
    for op in graph.weights:
        if op in readers and op not in returned:
            j_dim = _gemm_column_dim(op, readers[op])
            if j_dim is not None and op.shape[j_dim] % nb == 0 and op.shape[j_dim] > nb:
                moves[op] = _panel(op.shape, j_dim, nb)
    return relayout(graph, moves)


def _panel(shape: Sequence[int], j_dim: int, nb: int) -> Relayout:
    n = shape[j_dim]
    k = shape[1 - j_dim]

    def index(idx: tuple[Expr, ...]) -> tuple[Expr, ...]:
        j, kk = idx[j_dim], idx[1 - j_dim]
        return (j // const(nb, "int32"), kk, j % const(nb, "int32"))

    def value(w: np.ndarray) -> np.ndarray:
        b = w if j_dim == 1 else w.T  # [K, N]
        return np.ascontiguousarray(b.reshape(k, n // nb, nb).transpose(1, 0, 2))

    return Relayout((n // nb, k, nb), index, value)


def _gemm_column_dim(weight: Operation, readers: list[Operation]) -> int | None:
    """The dimension of a 2-d ``weight`` that every reader indexes by its last output axis (the other
    by a reduction axis of extent > 1), or None when some reader does not read it that way."""
    if len(weight.shape) != 2 or not readers:
        return None
    found: set[int] = set()
    for reader in readers:
        if not isinstance(reader, ComputeOp) or not reader.reduce_axis or len(reader.axis) < 2:
            return None
        last = reader.axis[-1]
        wide = {id(r) for r in reader.reduce_axis if r.extent > 1}
        reads = [n for n in walk(reader.body) if isinstance(n, TensorRead) and n.tensor.op is weight]
        if not reads:
            return None
        for r in reads:
            dims = [d for d, i in enumerate(r.indices) if i is last]
            other = [i for i in r.indices if i is not last]
            if len(dims) != 1 or len(other) != 1:
                return None
            if not (isinstance(other[0], IterVar) and id(other[0]) in wide):
                return None
            found.add(dims[0])
    return found.pop() if len(found) == 1 else None
