"""The CPU search space, Ansor style: rules that look at a workload's structure, never its name.

A candidate is produced by :meth:`SketchPolicy.sample`, which walks the stages from the outputs
back and applies the first rule that fits each stage:

- elementwise intermediates (padding, bias, activations) are inlined into their consumers; one
  read by several stages (softmax's exp) may instead be materialized;
- a reduction with data reuse (matmul, conv: some input ignores a spatial axis) gets multi-level
  tiling "SSRSRS" inside a consumer that writes the result: its elementwise consumer when it has
  one (dense -> bias+relu), else a ``cache_write`` copy; the accumulator tile lives in registers;
- a reduction without reuse (softmax, norms, pooling) is either vectorized across its spatial
  lanes or ``rfactor``-ed so that its contiguous reduction runs in vector lanes (whose partials
  then combine as a tree), and is computed at the root or inside the outer loops of the one root
  loop nest all its readers run in (softmax: max, exps and sum inside the output's row loop);
- any remaining stage gets its outer loops fused and parallel and its inner loop vectorized.

Every random choice is kept in a ``Decisions`` dict (JSON-able), so a candidate can be rebuilt,
mutated one decision at a time (:mod:`.mutate`) and recorded next to its trace.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

from ..te.expr import Binary, Expr, IterVar
from ..te.tensor import ComputeOp, Tensor, TensorRead, walk
from .schedule import Schedule, create_schedule
from .stage import Split, Stage

Decisions = dict[str, Any]
UNROLL_STEPS = (0, 16, 64, 512)
RFACTOR_LANES = (4, 8, 16, 32, 64)  # 64: four 16-lane accumulators hide the add latency
WINDOW_UNROLL_MAX = 64  # reduction windows up to this many taps may be unrolled (8x8 pools)


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
    by several taps, and no spatial axis is free of it."""
    if not isinstance(reader, ComputeOp) or not reader.reduce_axis or not has_reuse(reader):
        return False
    spatial = {id(a) for a in reader.axis if a.extent > 1}
    window = {id(a) for a in reader.reduce_axis if a.extent > 1}
    for n in walk(reader.body):
        if isinstance(n, TensorRead) and n.tensor.op is producer:
            used = {id(v) for idx in n.indices for v in walk(idx)}
            if spatial <= used and used & window:
                return True
    return False


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


class SketchPolicy:
    """``registers``: vector registers the accumulator tile may fill; by default 32 - 4 with 16
    float32 lanes (AVX-512 has 32) and 16 - 4 otherwise (AVX2, SSE; conservative elsewhere), 4 left
    for the operands."""

    def __init__(
        self, outputs: Sequence[Tensor], cores: int = 2, lanes: int = 16, registers: int | None = None
    ):
        self.outputs = list(outputs)
        self.cores = cores
        self.lanes = lanes
        self.registers = registers or (32 if lanes >= 16 else 16) - 4

    def sample(self, rng: random.Random, decisions: Decisions | None = None) -> tuple[Schedule, Decisions]:
        """A random candidate; choices already in ``decisions`` are reused where still valid."""
        return _Builder(self, rng, dict(decisions or {})).build()


class _Builder:
    def __init__(self, policy: SketchPolicy, rng: random.Random, given: Decisions):
        self.p = policy
        self.rng = rng
        self.given = given
        self.used: Decisions = {}
        self.s = create_schedule(policy.outputs)
        self.done: set[str] = set()

    # Decisions ----------------------------------------------------------------------------------
    def choose(self, key: str, options: Sequence[Any]) -> Any:
        value = self.given.get(key)
        if value not in options:
            value = self.rng.choice(list(options))
        self.used[key] = value
        return value

    def tiles(
        self, key: str, extent: int, levels: int, inner_max: int = 64, inner_multiple: int = 1
    ) -> list[int]:
        value = self.given.get(key)
        ok = (
            isinstance(value, list)
            and len(value) == levels
            and all(isinstance(x, int) and x > 0 for x in value)
            and _prod(value) == extent
            and value[-1] in inner_options(extent, inner_max, inner_multiple)
        )
        if not ok:
            value = sample_tiles(extent, levels, self.rng, inner_max, inner_multiple)
        self.used[key] = value
        return value

    # Rules --------------------------------------------------------------------------------------
    def build(self) -> tuple[Schedule, Decisions]:
        s = self.s
        for st in list(s.stages):
            if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output:
                # Read by several stages (softmax's exp: by the sum and the division), inlining
                # computes it once per reader; a materialized copy is placed like any other stage.
                # Read through a window (a depthwise conv's padding): inlined, its condition is
                # evaluated on every tap and lane; materialized, the window reads plain vectors.
                readers = [c for c in s.stages if st in s.reads(c)]
                offered = len(readers) > 1 or any(window_read(c.op, st.op) for c in readers)
                if offered and not self.choose(f"{st.name}/inline", (True, False)):
                    continue
                st.compute_inline()
                self.done.add(st.name)
        hosts = {c.name for st in s.stages if (c := self.fusion_host(st)) is not None}
        for st in reversed(list(s.stages)):
            if st.name in self.done or st.name in hosts or not isinstance(st.op, ComputeOp):
                continue
            op = st.op
            if op.reduce_axis and has_reuse(op):
                self.multi_level_tiling(st)
            elif op.reduce_axis:
                self.plain_reduction(st)
            else:
                self.elementwise(st)
        return s, self.used

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

    def fusion_host(self, st: Stage) -> Stage | None:
        """The elementwise consumer a tiled reduction can be computed inside, if it has one."""
        op = st.op
        if not isinstance(op, ComputeOp) or not op.reduce_axis or not has_reuse(op) or st.is_output:
            return None
        cons = self.consumers(st)
        if len(cons) != 1:
            return None
        c = cons[0]
        ok = isinstance(c.op, ComputeOp) and not c.op.reduce_axis and c.op.shape == op.shape
        return c if ok and c.attach[0] == "root" else None

    def multi_level_tiling(self, st: Stage) -> None:
        """SSRSRS: spatial in 4 levels, reduction in 2; the outer two spatial levels live in the
        consumer that writes the result, and the accumulator tile is computed at its second level."""
        host = self.fusion_host(st)
        op = st.op
        assert isinstance(op, ComputeOp)
        perm = tuple(range(len(op.axis)))
        if host is not None:
            producer, consumer = st, host
        else:
            # The accumulator's last axis is its vector axis: the output's own last axis (a conv's W),
            # or a channel axis moved last (K: the conv's weight is packed with K contiguous).
            options = ["last", *(op.axis[d].name for d in self.channel_axes(op))]
            axis = self.choose(f"{st.name}.local/vector_axis", options) if len(options) > 1 else "last"
            if axis != "last":
                d = next(i for i, a in enumerate(op.axis) if a.name == axis)
                perm = (*(i for i in perm if i != d), d)
            local = self.s.cache_write(st.name, "local", None if axis == "last" else perm)
            producer, consumer = self.s[local], st
        name = producer.name
        p_op, c_op = producer.op, consumer.op
        assert isinstance(p_op, ComputeOp) and isinstance(c_op, ComputeOp)
        # The last axis is the vector axis: its register tile is whole vectors where the extent allows
        # (a 1-8 lane tile on a 16-lane machine wastes most of each instruction).
        lengths = self.register_tiles(name, list(p_op.axis))
        # Consumer: levels S0, S1 and the inner (S2*S3) tile; the producer goes inside S1.
        outer0, outer1, inner = [], [], []
        for ax, ln in zip(c_op.axis, [lengths[perm.index(d)] for d in range(len(perm))]):
            o, rest = consumer.split(ax, factor=ln[1] * ln[2] * ln[3])
            o1, i1 = consumer.split(rest, factor=ln[2] * ln[3])
            outer0.append(o)
            outer1.append(o1)
            inner.append(i1)
        consumer.reorder(*outer0, *outer1, *inner)
        producer.compute_at(consumer, outer1[-1])
        # Channels in lanes read the weight across K: packed, that is one vector load, else a gather.
        pack_options = (True,) if perm[-1] != len(perm) - 1 else (False, True)
        if self.packable(p_op) and self.choose(f"{name}/pack", pack_options):
            # Copy the reused input's tile into a contiguous buffer once per outer tile (BLIS packing).
            for t, layout in self.packable(p_op):
                packed = self.s[self.s.cache_read(t, "local", [producer.name], layout)]
                packed.compute_at(consumer, outer0[-1])
                last = packed.op.axis[-1]
                if layout is not None:
                    # A transposed copy gathers along its last axis: one vector of lanes at a time
                    # (a gather as wide as the whole tile took LLVM over 30 s).
                    _, last = packed.split(last, factor=math.gcd(self.p.lanes, last.extent))
                packed.vectorize(last)
        depth = self.choose(f"{name}/parallel_depth", (1, 2))
        par = outer0 if depth == 1 else outer0 + outer1
        fused = consumer.fuse(*par) if len(par) > 1 else par[0]
        consumer.parallel(fused)
        if inner[-1].extent <= 64:
            consumer.vectorize(inner[-1])
        # Producer: S2 S3 of each spatial axis, R0 R1 of each reduction axis.
        s2, s3, r0, r1 = [], [], [], []
        for ax, ln in zip(p_op.axis, lengths):
            o, i = producer.split(ax, factor=ln[3])
            s2.append(o)
            s3.append(i)
        for ax in p_op.reduce_axis:
            rl = self.tiles(f"{name}/tile/{ax.name}", ax.extent, 2, inner_max=16)
            o, i = producer.split(ax, factor=rl[1])
            r0.append(o)
            r1.append(i)
        producer.reorder(*r0, *s2, *r1, *s3)
        if s3[-1].extent <= 64:
            producer.vectorize(s3[-1])
        unroll = self.choose(f"{name}/unroll", UNROLL_STEPS)
        if unroll:
            producer.pragma(r0[0], "auto_unroll_max_step", unroll)
        self.done.update({producer.name, consumer.name})

    def channel_axes(self, op: ComputeOp) -> list[int]:
        """Positions of spatial axes a convolution (a reduction over channels and a window) may
        vectorize instead of its last: at least a vector long, ignored by some input (whose value is
        then the same on every lane) and an index of its own wherever read (a weight's K)."""
        if len(op.reduce_axis) < 2 or len(op.axis) < 3:
            return []
        reads = [n for n in walk(op.body) if isinstance(n, TensorRead)]
        found = []
        for d, a in enumerate(op.axis[:-1]):
            users = [r for r in reads if any(v is a for i in r.indices for v in walk(i))]
            plain = all(
                any(i is a for i in r.indices) and sum(any(v is a for v in walk(i)) for i in r.indices) == 1
                for r in users
            )
            if a.extent >= self.p.lanes and users and len(users) < len(reads) and plain:
                found.append(d)
        return found

    def register_tiles(self, name: str, axes: list[IterVar]) -> list[list[int]]:
        """Four tile lengths per spatial axis whose innermost ones, the accumulators kept in
        registers, fit ``registers`` vectors (an accumulator tile of 16 x 7 vectors spilled and
        trapped a search for hundreds of trials); a given tiling that does not fit is resampled."""
        *outer_axes, last = axes
        multiple = math.gcd(self.p.lanes, last.extent)
        for attempt in range(64):
            if attempt:  # the given or sampled tiles overflow the registers: sample afresh
                for a in axes:
                    self.given.pop(f"{name}/tile/{a.name}", None)
            lengths = [self.tiles(f"{name}/tile/{a.name}", a.extent, 4, inner_max=16) for a in outer_axes]
            lengths.append(self.tiles(f"{name}/tile/{last.name}", last.extent, 4, 64, multiple))
            vectors = _prod([ln[-1] for ln in lengths[:-1]]) * math.ceil(lengths[-1][-1] / self.p.lanes)
            if vectors <= self.p.registers:
                break
        return lengths

    def index_dims(self, op: ComputeOp, st: Stage, wanted: set[int] | None = None) -> set[int]:
        """Positions of ``op``'s spatial axes that appear in its reads of ``st`` (through inlined
        stages), in index positions ``wanted`` of ``st`` only (all when None)."""
        found: set[int] = set()
        for n in walk(op.body):
            if not isinstance(n, TensorRead):
                continue
            src = self.s.stage_of(n.tensor.op)
            if src is st:
                idx = [e for d, e in enumerate(n.indices) if wanted is None or d in wanted]
            elif src.attach[0] == "inline" and isinstance(src.op, ComputeOp):
                idx = [n.indices[d] for d in self.index_dims(src.op, st, wanted)]
            else:
                continue
            ids = {id(v) for e in idx for v in walk(e)}
            found.update(d for d, a in enumerate(op.axis) if id(a) in ids)
        return found

    def deciding_axes(self, host: Stage, st: Stage, wanted: set[int] | None = None) -> set[str]:
        """Names of ``host``'s root axes that decide which part of ``st`` (index positions
        ``wanted``) is read, by ``host`` itself or by the stages computed inside it."""
        op = host.op
        assert isinstance(op, ComputeOp)
        names = {op.axis[d].name for d in self.index_dims(op, st, wanted)}
        for reader in self.consumers(st):
            if reader is not host and self.host_of(reader)[0] is host:
                r_op = reader.op
                assert isinstance(r_op, ComputeOp)
                names |= self.deciding_axes(host, reader, self.index_dims(r_op, st, wanted))
        return names

    def host_of(self, st: Stage) -> tuple[Stage, int | None]:
        """The root stage whose loops ``st`` runs in, and the position of the loop it is attached
        to there (None when ``st`` is that root stage)."""
        pos = None
        while st.attach[0] == "at":
            parent = self.s[st.attach[1]]
            at = parent.position(parent.axes[st.attach[2]])
            pos = -1 if at is None else at  # attached to an axis split since: no loop is safe
            st = parent
        return st, pos

    @staticmethod
    def roots_of(stage: Stage, leaf: IterVar) -> set[str]:
        """The root axes a loop of ``stage`` iterates over, through its splits and fuses."""
        roots: dict[str, set[str]] = {}
        for rel in stage.relations:
            if isinstance(rel, Split):
                roots[rel.outer.name] = roots[rel.inner.name] = roots.get(rel.parent.name, {rel.parent.name})
            else:
                outer = roots.get(rel.outer.name, {rel.outer.name})
                roots[rel.fused.name] = outer | roots.get(rel.inner.name, {rel.inner.name})
        return roots.get(leaf.name, {leaf.name})

    def packable(self, op: ComputeOp) -> list[tuple[Tensor, tuple[int, ...] | None]]:
        """Inputs read along the vectorized (last spatial) axis that ignore another spatial axis,
        each with the layout that makes that axis contiguous in the packed copy (None: as is;
        dense's ``W[j, k]`` is packed transposed, ``(1, 0)``)."""
        last = op.axis[-1]
        spatial = {id(a) for a in op.axis}
        found: list[tuple[Tensor, tuple[int, ...] | None]] = []
        for n in walk(op.body):
            if not isinstance(n, TensorRead) or any(t is n.tensor for t, _ in found):
                continue
            used = {id(v) for idx in n.indices for v in walk(idx) if id(v) in spatial}
            dims = [d for d, idx in enumerate(n.indices) if any(v is last for v in walk(idx))]
            if used == spatial or len(dims) != 1:
                continue
            d, rank = dims[0], len(n.indices)
            found.append((n.tensor, None if d == rank - 1 else (*[x for x in range(rank) if x != d], d)))
        return found

    def plain_reduction(self, st: Stage, outer_parallel: bool = True) -> None:
        op = st.op
        assert isinstance(op, ComputeOp)
        red = op.reduce_axis[-1]
        if outer_parallel and self.parallel_rfactor(st):
            return
        use_rfactor = contiguous_reduction(op) and red.extent >= 8
        if use_rfactor and self.choose(f"{st.name}/rfactor", (True, False)):
            lanes = self.choose(f"{st.name}/rfactor_lanes", [v for v in RFACTOR_LANES if v <= red.extent])
            _, ki = st.split(red, factor=lanes)
            rf = self.s[self.s.rfactor(st.name, ki, factor_axis=len(op.axis))]
            rf_op = rf.op
            assert isinstance(rf_op, ComputeOp)
            rf.reorder(*rf_op.axis[:-1], *rf_op.reduce_axis, rf_op.axis[-1])
            rf.vectorize(rf_op.axis[-1])
            if op.axis:
                rf.compute_at(st, op.axis[-1])
            # The partials combine across vector lanes as a tree, not a serial chain of adds.
            combined = st.op
            assert isinstance(combined, ComputeOp)
            st.vectorize(combined.reduce_axis[-1])
            self.done.add(rf.name)
            self.place(st, parallel_axes=list(op.axis))
        else:
            self.spatial_vector(st, list(op.axis), list(op.reduce_axis))
        self.done.add(st.name)

    def parallel_rfactor(self, st: Stage) -> bool:
        """A reduction with too few outputs to keep the cores busy (a whole-tensor sum): partial results
        over an outer part of the reduction, computed in parallel (and in vector lanes inside, as any
        reduction), then combined. Offered while the outputs number fewer than 4 per core."""
        op = st.op
        assert isinstance(op, ComputeOp)
        outputs = _prod([a.extent for a in op.axis])
        if outputs >= 4 * self.p.cores or _prod([a.extent for a in op.reduce_axis]) < 64 * self.p.cores:
            return False
        if not self.choose(f"{st.name}/parallel_rfactor", (True, False)):
            return False
        outer = [a for a in op.reduce_axis[:-1] if a.extent >= self.p.cores]
        if outer:  # several reduce axes: partials over one of the outer ones, the rest reduced inside
            by_name = {a.name: a for a in outer}
            axis = by_name[self.choose(f"{st.name}/parallel_rfactor_axis", sorted(by_name))]
        else:  # one long axis: split it, partials over the outer part
            red = op.reduce_axis[-1]
            factors = [f for f in divisors(red.extent) if red.extent // f >= self.p.cores and f >= 8]
            if not factors:
                return False
            factor = self.choose(f"{st.name}/parallel_rfactor_inner", factors)
            axis, _ = st.split(red, factor=factor)
        rf = self.s[self.s.rfactor(st.name, axis, factor_axis=0)]
        self.plain_reduction(rf, outer_parallel=False)  # lanes inside, the partials' loop parallel
        combined = st.op
        assert isinstance(combined, ComputeOp)
        if combined.reduce_axis[-1].extent <= 64:  # few partials: combined as a vector tree
            st.vectorize(combined.reduce_axis[-1])
        self.place(st, parallel_axes=list(combined.axis))
        self.done.add(st.name)
        return True

    def elementwise(self, st: Stage) -> None:
        op = st.op
        assert isinstance(op, ComputeOp)
        self.spatial_vector(st, list(op.axis), [])
        self.done.add(st.name)

    def spatial_vector(self, st: Stage, spatial: list[IterVar], reduce: list[IterVar]) -> None:
        """Inner spatial loop vectorized (reductions moved outside it), outer loops parallel."""
        outer = spatial
        if spatial:
            last = spatial[-1]
            options = [v for v in divisors(last.extent) if v <= 64]
            lanes = self.choose(f"{st.name}/vector", options)
            if lanes > 1:
                jo, ji = st.split(last, factor=lanes)
                outer = [*spatial[:-1], jo]
                st.reorder(*outer, *reduce, ji)
                st.vectorize(ji)
        # A small window (a 3x3 pool) unrolled around the vector body: its taps are straight-line
        # vector code, the accumulator stays in a register between them.
        if reduce and _prod([a.extent for a in reduce]) <= WINDOW_UNROLL_MAX:
            if self.choose(f"{st.name}/unroll_window", (True, False)):
                for a in reduce:
                    st.unroll(a)
        self.place(st, outer)

    def attach_spots(self, st: Stage) -> list[tuple[str, str]]:
        """The loops ``st`` can be computed in: loops of the one root stage that all its readers run
        in, outside the loops those readers are attached to, over axes that decide which part of
        ``st`` is read (inside any other loop the same region would be recomputed on every
        iteration: a row max inside its row's column loop, N times over)."""
        cons = self.consumers(st)
        if not cons or any(c.name not in self.done for c in cons):
            return []
        placed = [self.host_of(c) for c in cons]
        host = placed[0][0]
        if any(h is not host for h, _ in placed):
            return []
        limit = min((pos for _, pos in placed if pos is not None), default=len(host.leaves) - 1)
        used = self.deciding_axes(host, st)
        spots = []
        for leaf in host.leaves[: limit + 1]:
            if leaf.kind == "reduce" or not self.roots_of(host, leaf) <= used:
                break
            spots.append((host.name, leaf.name))
        return spots

    def place(self, st: Stage, parallel_axes: list[IterVar]) -> None:
        """At the root with fused parallel outer loops, or in a loop its readers run in (attach_spots)."""
        spots = [("root", ""), *self.attach_spots(st)]
        where = self.choose(f"{st.name}/location", list(range(len(spots))))
        if where > 0:
            parent, axis = spots[where]
            st.compute_at(self.s[parent], axis)
            return
        axes = [a for a in parallel_axes if st.position(a) is not None]
        if not axes:
            return
        depth = self.choose(f"{st.name}/parallel_depth", list(range(1, len(axes) + 1)))
        chosen = axes[:depth]
        pos = [st.position(a) for a in chosen]
        if pos != list(range(pos[0], pos[0] + len(pos))) or pos[0] != 0:
            return
        fused = st.fuse(*chosen) if len(chosen) > 1 else chosen[0]
        if fused.extent > 1:
            st.parallel(fused)


def _prod(xs: Sequence[int]) -> int:
    out = 1
    for x in xs:
        out *= x
    return out
