"""3x3 convolutions by Winograd's minimal filtering F(2x2, 3x3): 2.25x fewer multiplications.

A stride-1 3x3 conv computes each 2x2 block of outputs from a 4x4 patch of input with 36 multiplies
per channel pair; Winograd's F(2x2, 3x3) (Lavin and Gray, 2016) does it with 16, in three steps:

- ``V = B^T d B``: each 4x4 input patch ``d`` transformed, additions only (the ``winograd_input`` compute);
- ``M[e] = sum_c V[e, c] * U[e, c, k]``: 16 independent GEMMs, one per transformed position ``e``, over
  the input channels (``winograd_bgemm``; ``U = G g G^T`` is the filter ``g`` transformed once, here,
  when the model is built: weights are constants);
- ``Y = A^T M A``: each 2x2 output block from the 16 products, additions only (``winograd_output``).

ResNet-18's 3x3 convs hold 90% of its FLOPs and run near the FMA peak as direct convs (about 480
GFLOP/s of 2 x 266 here); onnxruntime's MLAS convs are direct as well. TVM offers the same rewrite
(``conv2d_winograd`` in its x86 and ARM strategies).

:func:`winograd_convs` rewrites the graph after :func:`.channel_blocks.blocked_channels`: every conv
``out[n, ko, y, x, ki] = sum P[n, rco, y + ry, x + rx, rci] * W[ko, rco * b + rci, ry, rx, ki]``
(stride 1, no dilation, 3x3, channels in blocks of ``b``, an even output height and width, a constant
weight) becomes the three computes, in the same channel blocks, each a task. The transforms are
tagged as a conv's (``pattern.classify``): the input transform takes the conv's pad but is not inlined
into the GEMM (which would compute it again for every block of output channels), and the output
transform takes the bias, activation and residual add after it but does not run into the next conv.
The transforms index by integer arithmetic on ``e`` rather than by selects, so they stay cheap whether
or not a schedule unrolls ``e``. Float32 rounding differs from the direct sum by a few ulps of the
largest input (F(2x2, 3x3) is the well-conditioned member of the family: its constants are 0, 1/2, 1).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..te import cast, compute, reduce_axis
from ..te import sum as te_sum
from ..te.expr import Binary, Const, Expr, IterVar
from ..te.tensor import ComputeOp, Operation, PlaceholderOp, Reduce, Tensor, TensorRead
from .ir import Graph
from .weight_layout import Replace, relayout

HELPERS = ("_winograd_input", "_winograd_bgemm")  # name ends of the steps before the output's task
TILE = 2  # outputs per tile side (m of F(m, r))
ALPHA = 4  # transformed tile side (m + r - 1)
# Fewer input or output channels: the transforms' memory traffic outweighs the saved multiplies. A
# residual block (1x1 conv, then this conv with a bias, relu and the add; tuned 250 trials each way,
# compiled and timed in turns, 2 cores, Zen 5) ran 1.27x faster by Winograd with 64 channels at
# 56 x 56, 1.34x with 256 at 14 x 14, and 0.64-0.99x with 32 at 56 x 56.
MIN_CHANNELS = 64

# G of F(2, 3): U = G g G^T, the filter's transform (the 1/2 rows are exact in float32)
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])


def winograd_convs(graph: Graph) -> Graph:
    """``graph`` with its blocked 3x3 stride-1 convs computed by F(2x2, 3x3) (see the module docstring)."""
    found = {op: conv for op in graph.ops() if (conv := _match(op, graph)) is not None}
    added: dict[Operation, np.ndarray] = {}
    replace: dict[Operation, Replace] = {}
    for op, conv in found.items():
        u_value = _filter_transform(graph.weights[conv.weight.op])
        u = Tensor(PlaceholderOp(f"{conv.weight.op.name}_winograd", u_value.shape, op.dtype))
        added[u.op] = u_value
        replace[op] = _stand_in(conv, u)
    return relayout(graph, {}, replace, added)


@dataclasses.dataclass(frozen=True)
class _Conv:
    op: ComputeOp  # the direct conv
    data: Tensor  # P[n, cb, h, w, b]: the padded input in channel blocks
    weight: Tensor  # W[kb, c, 3, 3, b]: a constant, output channels in blocks


def _match(op: Operation, graph: Graph) -> _Conv | None:
    """The conv's operands when ``op`` is exactly a blocked 3x3 stride-1 conv F(2x2, 3x3) can take."""
    if not isinstance(op, ComputeOp) or len(op.axis) != 5 or not isinstance(op.body, Reduce):
        return None
    red = op.body
    if red.reducer.name != "sum" or red.condition is not None or len(red.axes) != 4:
        return None
    rco, rci, ry, rx = red.axes
    n, ko, y, x, ki = op.axis
    if ry.extent != 3 or rx.extent != 3 or min(rco.extent * rci.extent, ko.extent * ki.extent) < MIN_CHANNELS:
        return None
    if y.extent % TILE or x.extent % TILE or op.dtype != "float32":
        return None
    src = red.source
    if not (isinstance(src, Binary) and src.op == "*"):
        return None
    data, weight = src.a, src.b
    if not (isinstance(data, TensorRead) and isinstance(weight, TensorRead)):
        return None
    if weight.tensor.op not in graph.weights or len(weight.tensor.shape) != 5:
        return None
    b = rci.extent
    d0, d1, d2, d3, d4 = data.indices
    if not (d0 is n and d1 is rco and d4 is rci and _is_sum(d2, y, ry) and _is_sum(d3, x, rx)):
        return None
    w0, w1, w2, w3, w4 = weight.indices
    if not (w0 is ko and w2 is ry and w3 is rx and w4 is ki and _is_block_index(w1, rco, rci, b)):
        return None
    if tuple(data.tensor.shape) != (n.extent, rco.extent, y.extent + 2, x.extent + 2, b):
        return None
    if tuple(weight.tensor.shape) != (ko.extent, rco.extent * b, 3, 3, ki.extent):
        return None
    if data.tensor.dtype != "float32":
        return None
    return _Conv(op, data.tensor, weight.tensor)


def _stand_in(conv: _Conv, u: Tensor) -> Replace:
    """The conv's three computes, built from the rebuilt graph's tensor for its input."""
    return lambda new: _winograd(conv.op, new(conv.data), u)


def _is_sum(e: Expr, a: IterVar, b: IterVar) -> bool:
    return isinstance(e, Binary) and e.op == "+" and e.a is a and e.b is b


def _is_block_index(e: Expr, outer: IterVar, inner: IterVar, b: int) -> bool:
    """``outer * b + inner``."""
    if not (isinstance(e, Binary) and e.op == "+" and e.b is inner):
        return False
    m = e.a
    return (
        isinstance(m, Binary) and m.op == "*" and m.a is outer
        and isinstance(m.b, Const) and m.b.value == b
    )  # fmt: skip


def _filter_transform(w: np.ndarray) -> np.ndarray:
    """``W[kb, c, 3, 3, b]`` -> ``U[e, kb, c, b]`` with ``e = eps * 4 + nu`` and ``U = G g G^T``."""
    u = np.einsum("er,kcrsb,ns->enkcb", G, w.astype(np.float64), G)
    kb, c, _, _, b = w.shape
    return np.ascontiguousarray(u.reshape(ALPHA * ALPHA, kb, c, b).astype(np.float32))


def _row(e: Expr) -> tuple[Expr, Expr, Expr, Expr]:
    """Row ``e`` of B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]] as
    ``s1 * d[a1] + s2 * d[a2]``: (a1, a2, s1, s2), integer arithmetic in ``e`` (no select, so the loop
    over ``e`` need not be unrolled to be cheap)."""
    a1 = (e + 2) // 3  # 0, 1, 1, 1
    a2 = e // 3 + 2  # 2, 2, 2, 3
    s1 = cast("float32", 1 - 2 * (e // 2) * (1 - e // 3))  # 1, 1, -1, 1
    s2 = cast("float32", 2 * ((e + 2) // 3) - 1 - 2 * (e // 3))  # -1, 1, 1, -1
    return a1, a2, s1, s2


def _winograd(conv: ComputeOp, data: Tensor, u: Tensor) -> Tensor:
    """The three computes of one conv; returns the output, shaped as the conv's."""
    n_, kb_, h_, w_, b = conv.shape
    cb_ = data.shape[1]
    th_, tw_ = h_ // TILE, w_ // TILE
    name = conv.name

    def transform_input(n, cb, th, e, tw, ci):  # V = B^T d B, d the 4x4 patch at (2 th, 2 tw)
        a1, a2, s1, s2 = _row(e // ALPHA)
        b1, b2, t1, t2 = _row(e % ALPHA)

        def row(col):
            at = TILE * tw + col
            return s1 * data[n, cb, TILE * th + a1, at, ci] + s2 * data[n, cb, TILE * th + a2, at, ci]

        return t1 * row(b1) + t2 * row(b2)

    # [n, cb, th, e, tw, b]: a row of tiles is one contiguous block of all 16 positions, written in
    # one sweep of its 4 input rows, and the GEMM's tiles along tw read contiguous vectors
    v = compute(
        (n_, cb_, th_, ALPHA * ALPHA, tw_, b), transform_input, name=f"{name}{HELPERS[0]}",
        tag="conv2d_winograd_input",  # a task of its own: not inlined into (recomputed by) the GEMM
    )  # fmt: skip
    rco = reduce_axis((0, cb_), name="rco")
    rci = reduce_axis((0, b), name="rci")
    m = compute(
        (n_, kb_, th_, ALPHA * ALPHA, tw_, b),
        lambda n, ko, th, e, tw, ki: te_sum(
            v[n, rco, th, e, tw, rci] * u[e, ko, rco * b + rci, ki], axis=[rco, rci]
        ),
        name=f"{name}{HELPERS[1]}",
    )

    def transform_output(n, ko, y, x, ki):  # Y = A^T M A, A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]
        i, j = y % TILE, x % TILE
        si, sj = cast("float32", 1 - 2 * i), cast("float32", 1 - 2 * j)

        def at(r, c):
            return m[n, ko, y // TILE, r * ALPHA + c, x // TILE, ki]

        def row(c):
            return at(i, c) + si * (at(i + 1, c) + at(i + 2, c))

        return row(j) + sj * (row(j + 1) + row(j + 2))

    return compute(conv.shape, transform_output, name=f"{name}_winograd_output", tag="conv2d_winograd_output")
