"""Operator patterns, as TVM's FuseOps uses them, read off the structure of a te compute.

The order matters: fusion rules compare patterns (``pattern <= BROADCAST``), and a fused group takes
the largest pattern of its members.

- ELEMWISE: every read is of a tensor of the output's shape, at exactly the output's axes.
- BROADCAST: every read is at a subsequence of the output's axes in order, or 0 along a size-1 dim
  (``x[i, j] + bias[j]``, ``x[n, c, h, w] * scale[0, c, 0, 0]``).
- INJECTIVE: no reduction, other indices (reshape, transpose, pad, slice, gather, concat).
- COMM_REDUCE: a reduction (sum, max, ...) that is not a contraction.
- OUT_ELEMWISE_FUSABLE: a sum over the product of two reads (conv, matmul): epilogues fuse into it.
- OPAQUE: never fused (only by tag).

A compute's ``tag`` overrides the structure when it names a pattern (``"injective"``, ``"opaque"``...)
or a TVM tag prefix (``"elemwise"``, ``"broadcast"``, ``"conv2d_nchw"``, ``"dense"``...).

Example: ``classify(topi.conv2d(x, w).op)`` is ``OpPattern.OUT_ELEMWISE_FUSABLE``.
"""

from __future__ import annotations

import enum

from ..te.expr import Cast, Const, Expr, IterVar, Select
from ..te.tensor import ComputeOp, Operation, Reduce, TensorRead, walk


class OpPattern(enum.IntEnum):
    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


# Tags that say the pattern outright: our own names first, then TVM topi's tag prefixes.
_TAG_PATTERNS = {
    "elemwise": OpPattern.ELEMWISE,
    "elementwise": OpPattern.ELEMWISE,
    "broadcast": OpPattern.BROADCAST,
    "injective": OpPattern.INJECTIVE,
    "reduction": OpPattern.COMM_REDUCE,
    "comm_reduce": OpPattern.COMM_REDUCE,
    "out_elemwise_fusable": OpPattern.OUT_ELEMWISE_FUSABLE,
    "conv": OpPattern.OUT_ELEMWISE_FUSABLE,
    "dense": OpPattern.OUT_ELEMWISE_FUSABLE,
    "matmul": OpPattern.OUT_ELEMWISE_FUSABLE,
    "batch_matmul": OpPattern.OUT_ELEMWISE_FUSABLE,
    "opaque": OpPattern.OPAQUE,
}


def pattern_from_tag(tag: str) -> OpPattern | None:
    """The pattern a tag names (``"conv2d_nchw"`` counts as ``"conv"``), or None."""
    if not tag:
        return None
    head = tag.split(",")[0].strip().lower()
    if head in _TAG_PATTERNS:
        return _TAG_PATTERNS[head]
    for prefix, pattern in _TAG_PATTERNS.items():
        if head.startswith(prefix + "_") or (prefix == "conv" and head.startswith("conv")):
            return pattern
    return None


def classify(op: Operation) -> OpPattern:
    """The operator pattern of one te operation (placeholders count as ELEMWISE: they fuse freely)."""
    if not isinstance(op, ComputeOp):
        return OpPattern.ELEMWISE
    tagged = pattern_from_tag(op.tag)
    if tagged is not None:
        return tagged
    if isinstance(op.body, Reduce):
        return OpPattern.OUT_ELEMWISE_FUSABLE if _is_contraction(op.body) else OpPattern.COMM_REDUCE
    reads = [e for e in walk(op.body) if isinstance(e, TensorRead)]
    if not reads:
        return OpPattern.INJECTIVE  # a generated tensor (range, constant fill): no input to follow
    return max(_read_pattern(op, r) for r in reads)


def _is_contraction(red: Reduce) -> bool:
    """A sum whose body multiplies two tensor reads (through casts): conv, matmul, batch matmul."""
    if red.reducer.name != "sum":
        return False
    body = _strip_casts(red.source)
    if getattr(body, "op", None) != "*":
        return False
    a, b = _strip_casts(body.a), _strip_casts(body.b)  # type: ignore[attr-defined]
    return _is_read(a) and _is_read(b)


def _strip_casts(e: Expr) -> Expr:
    while isinstance(e, Cast):
        e = e.value
    return e


def _is_read(e: Expr) -> bool:
    """A tensor read, perhaps under a guard (the pad of a conv inlined as ``select(c, x[...], 0)``).

    ``(x - mean) * (x - mean)`` (a variance) is not one: it is an ordinary reduction.
    """
    if isinstance(e, Select):
        return any(isinstance(_strip_casts(b), TensorRead) for b in (e.t, e.f))
    return isinstance(e, TensorRead)


def _read_pattern(op: ComputeOp, read: TensorRead) -> OpPattern:
    if any(isinstance(n, TensorRead) for i in read.indices for n in walk(i)):
        return OpPattern.INJECTIVE  # a gather: the index is data
    if tuple(read.tensor.shape) == tuple(op.shape) and all(
        i is a for i, a in zip(read.indices, op.axis, strict=True)
    ):
        return OpPattern.ELEMWISE
    position = -1
    for index, dim in zip(read.indices, read.tensor.shape, strict=True):
        if isinstance(index, Const) and index.value == 0 and dim == 1:
            continue
        if not isinstance(index, IterVar):
            return OpPattern.INJECTIVE
        at = next((n for n, a in enumerate(op.axis) if a is index), -1)
        if at <= position or op.axis[at].extent != dim:
            return OpPattern.INJECTIVE  # a transpose, or an axis read at another extent
        position = at
    return OpPattern.BROADCAST
