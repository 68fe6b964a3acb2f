"""What every sketch rule builds on: structural tests of a workload, tile arithmetic, and the
builder's state (the schedule, the decisions given and used, the stages done)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..te.expr import Binary, Const, Expr, IterVar
from ..te.tensor import ComputeOp, TensorRead, walk
from .schedule import create_schedule
from .stage import Stage

if TYPE_CHECKING:
    from .sketch import SketchPolicy

Decisions = dict[str, Any]
UNROLL_STEPS = (0, 16, 64, 512)
RFACTOR_LANES = (4, 8, 16, 32, 64)  # 64: four 16-lane accumulators hide the add latency
WINDOW_UNROLL_MAX = 64  # reduction windows up to this many taps may be unrolled (8x8 pools)
TAIL_SHARE = 0.5  # of the sampled register tiles of a row axis, those that need not divide it


def small_window(reduce: Any) -> bool:
    """Reduce axes few enough in taps to unroll (a pool's window): its outputs are vector bodies
    around straight-line taps, and a few of them fit in registers side by side."""
    return bool(reduce) and _prod([a.extent for a in reduce]) <= WINDOW_UNROLL_MAX


def divisors(n: int) -> list[int]:
    small = [d for d in range(1, int(n**0.5) + 1) if n % d == 0]
    return sorted(set(small + [n // d for d in small]))


def sample_tiles(
    extent: int, levels: int, rng: random.Random, inner_max: int = 64, inner_multiple: int = 1
) -> list[int]:
    """Random lengths per level, outermost first, whose product is ``extent``; the innermost is at
    most ``inner_max`` and a multiple of ``inner_multiple`` (when ``extent`` allows one)."""
    lengths = []
    rest = extent
    for level in range(levels - 1):
        if level == 0:
            options = inner_options(rest, inner_max, inner_multiple)
        else:
            options = divisors(rest)
        d = rng.choice(options)
        lengths.append(d)
        rest //= d
    lengths.append(rest)
    return lengths[::-1]


def padded(extent: int, inner: int) -> int:
    """``extent`` rounded up to whole tiles of ``inner``."""
    return -(-extent // inner) * inner


def tail_options(extent: int, inner_max: int) -> list[int]:
    """Innermost tile lengths from 3 to ``inner_max`` that do not divide ``extent``: register tiles of
    6 rows on a 1024-row GEMM (24 accumulators of 32 registers, against 16 for the divisors 4 and 8:
    155 against 127 GFLOP/s on one Emerald Rapids core), with a partial last tile."""
    return [d for d in range(3, min(inner_max, extent - 1) + 1) if extent % d]


def inner_options(extent: int, inner_max: int, multiple: int = 1) -> list[int]:
    """Lengths for the innermost tile of an axis of ``extent``: divisors up to ``inner_max`` that are
    multiples of ``multiple``, or all divisors up to ``inner_max`` when none is."""
    small = [d for d in divisors(extent) if d <= inner_max]
    return [d for d in small if d % multiple == 0] or small


def has_reuse(op: ComputeOp) -> bool:
    """Some input is read without one of the spatial axes: its values are reused across them (an axis
    of extent 1 reuses nothing: a whole-tensor sum into shape (1,) is no matmul)."""
    spatial = {id(a) for a in op.axis if a.extent > 1}
    for n in walk(op.body):
        if isinstance(n, TensorRead):
            used = {id(v) for idx in n.indices for v in walk(idx) if id(v) in spatial}
            if used != spatial:
                return True
    return False


def window_read(reader: Any, producer: Any) -> bool:
    """``reader`` is a reduction with reuse that reads ``producer`` with every one of its spatial
    axes and some reduction axis (a depthwise conv's padded input): each producer element is read
    by several taps, and no spatial axis is free of it; or through a sliding window, an index that
    is a spatial axis plus a reduction axis (a conv's ``pad[n, rc, yy + ry, xx + rx]``): inlined, a
    pad tests every tap, and register tiles that touch the border take the per-element path (a third
    of ResNet-18's 56x56 3x3 conv: 2.05 ms inlined, 1.62 ms materialized, 1 thread, CPU time)."""
    if not isinstance(reader, ComputeOp) or not reader.reduce_axis or not has_reuse(reader):
        return False
    spatial = {id(a) for a in reader.axis if a.extent > 1}
    window = {id(a) for a in reader.reduce_axis if a.extent > 1}
    for n in walk(reader.body):
        if isinstance(n, TensorRead) and n.tensor.op is producer:
            used = {id(v) for idx in n.indices for v in walk(idx)}
            if spatial <= used and used & window:
                return True
            for idx in n.indices:
                mine = {id(v) for v in walk(idx)}
                if mine & spatial and mine & window:
                    return True
    return False


def plain_index(index: Expr, axis: IterVar) -> bool:
    """``index`` is ``axis`` itself, up to a one-element reduction axis added and ``// 1``, ``* 1``
    (a depthwise conv from ONNX reads its data at ``((ff // 1) * 1) + rc`` with ``rc`` of extent 1)."""
    if index is axis:
        return True
    if not isinstance(index, Binary):
        return False
    if index.op in ("//", "*") and isinstance(index.b, Const) and index.b.value == 1:
        return plain_index(index.a, axis)
    if index.op == "+":
        a, b = index.a, index.b
        return (plain_index(a, axis) and _unit_reduce(b)) or (plain_index(b, axis) and _unit_reduce(a))
    return False


def _unit_reduce(e: Expr) -> bool:
    return isinstance(e, IterVar) and e.kind == "reduce" and e.extent == 1


def contiguous_reduction(op: ComputeOp) -> bool:
    """The innermost reduction axis is the last index of some read: it walks memory with stride 1."""
    if not op.reduce_axis:
        return False
    last = op.reduce_axis[-1]
    return any(isinstance(n, TensorRead) and _unit_stride(n.indices[-1], last) for n in walk(op.body))


def _unit_stride(index: Expr, var: IterVar) -> bool:
    """``index`` is ``var`` plus terms free of it (``k``, ``ko * 8 + k``): a step of ``var``, one element."""
    if index is var:
        return True
    if isinstance(index, Binary) and index.op == "+":
        a_has, b_has = (any(n is var for n in walk(x)) for x in (index.a, index.b))
        return (_unit_stride(index.a, var) and not b_has) or (_unit_stride(index.b, var) and not a_has)
    return False


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


class BuilderBase:
    """One candidate under construction; the rules (:mod:`.sketch_tiling`, :mod:`.sketch_reduction`)
    are methods of its subclasses."""

    def __init__(self, policy: SketchPolicy, rng: random.Random, given: Decisions):
        self.p = policy
        self.rng = rng
        self.given = given
        self.used: Decisions = {}
        self.s = create_schedule(policy.outputs)
        self.done: set[str] = set()

    def choose(self, key: str, options: Sequence[Any]) -> Any:
        value = self.given.get(key)
        if value not in options:
            value = self.rng.choice(list(options))
        self.used[key] = value
        return value

    def tiles(
        self,
        key: str,
        extent: int,
        levels: int,
        inner_max: int = 64,
        inner_multiple: int = 1,
        tails: bool = False,
    ) -> list[int]:
        """Tile lengths per level, outermost first, for an axis of ``extent``: the given ones where
        valid, else sampled. With ``tails`` the innermost may also be a length up to ``inner_max``
        that does not divide ``extent`` (:func:`tail_options`), the outer levels then tiling
        ``ceil(extent / inner)`` tiles: the last tile is partial (lower/tails.py versions the rest)."""
        value = self.given.get(key)
        tail = tail_options(extent, inner_max) if tails else []
        ok = (
            isinstance(value, list)
            and len(value) == levels
            and all(isinstance(x, int) and x > 0 for x in value)
            and (
                (_prod(value) == extent and value[-1] in inner_options(extent, inner_max, inner_multiple))
                or (value[-1] in tail and _prod(value) == padded(extent, value[-1]))
            )
        )
        if not ok:
            if tail and self.rng.random() < TAIL_SHARE:
                inner = self.rng.choice(tail)
                outer = sample_tiles(padded(extent, inner) // inner, levels - 1, self.rng, inner_max=extent)
                value = [*outer, inner]
            else:
                value = sample_tiles(extent, levels, self.rng, inner_max, inner_multiple)
        self.used[key] = value
        return value

    def consumers(self, st: Stage) -> list[Stage]:
        """The stages with loops that read ``st``, looking through inlined stages."""
        return [c for c in self.s.stages if c.attach[0] != "inline" and st in self.effective_reads(c)]

    def effective_reads(self, st: Stage) -> set[Stage]:
        out: set[Stage] = set()
        todo = list(self.s.reads(st))
        while todo:
            p = todo.pop()
            if p.attach[0] == "inline":
                todo.extend(self.s.reads(p))
            else:
                out.add(p)
        return out

    def matrix_vector(self, st: Stage) -> bool:
        """Whether ``st``, a reduction with reuse and one output axis longer than 1 whose reduction
        walks memory contiguously (a classifier's ``x[0, k] * W[j, k]``), is reduced output by output
        in vector lanes as a reduction without reuse: its only reuse is the small vector, and tiled with
        ``j`` in lanes each step gathers 16 rows of ``W`` (MobileNetV2's 1280 -> 1000 ran 7-31 ms,
        onnxruntime 0.27). Offered, not imposed: the choice is the decision ``<stage>/matrix_vector``.
        Only where the matrix (every read with the output axis) is walked along the reduction: a weight
        in column panels (graph/gemm_layout.py) read so is a stride-32 gather (1280 -> 1024: 1.9 ms,
        tiled with the panel's columns in lanes 0.32)."""
        op = st.op
        if not isinstance(op, ComputeOp) or not op.reduce_axis or not has_reuse(op):
            return False
        long_axes = [a for a in op.axis if a.extent > 1]
        red = op.reduce_axis[-1]
        if len(long_axes) != 1 or not contiguous_reduction(op) or red.extent < 2 * self.p.lanes:
            return False
        matrix = [
            n
            for n in walk(op.body)
            if isinstance(n, TensorRead) and any(v is long_axes[0] for i in n.indices for v in walk(i))
        ]
        if not all(_unit_stride(n.indices[-1], red) for n in matrix):
            return False
        key = f"{st.name}/matrix_vector"
        if key not in self.used:
            self.choose(key, (True, False))
        return bool(self.used[key])

    def fusion_host(self, st: Stage) -> Stage | None:
        """The elementwise consumer a tiled reduction can be computed inside, if it has one."""
        op = st.op
        if not isinstance(op, ComputeOp) or not op.reduce_axis or not has_reuse(op) or st.is_output:
            return None
        if self.matrix_vector(st):
            return None
        cons = self.consumers(st)
        if len(cons) != 1:
            return None
        c = cons[0]
        ok = isinstance(c.op, ComputeOp) and not c.op.reduce_axis and c.op.shape == op.shape
        return c if ok and c.attach[0] == "root" else None
