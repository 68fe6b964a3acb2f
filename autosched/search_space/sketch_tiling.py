"""Multi-level tiling "SSRSRS" of a reduction with reuse (matmul, conv): the accumulator tile in
registers, its vector axis the output's last or a channel axis, the reused inputs packed."""

from __future__ import annotations

import math
from collections.abc import Callable

from ..te.expr import Binary, Const, IterVar
from ..te.tensor import ComputeOp, Tensor, TensorRead, walk
from .sketch_base import UNROLL_STEPS, WINDOW_UNROLL_MAX, BuilderBase, _prod, divisors, plain_index
from .stage import Stage

OPERAND_REGISTERS = 4  # the registers SketchPolicy keeps beside the accumulators (32 - 28 on AVX-512)


def plain_rows(op: ComputeOp) -> bool:
    """Every read of ``op`` along its last axis is a plain row of the same width, indexed by its last
    two axes (a 1x1 conv's data; not a padded or strided window)."""
    y, x = op.axis[-2], op.axis[-1]
    for n in walk(op.body):
        if isinstance(n, TensorRead) and any(v is x for i in n.indices for v in walk(i)):
            plain = plain_index(n.indices[-1], x) and plain_index(n.indices[-2], y)
            if not plain or n.tensor.shape[-1] != x.extent:
                return False
    return True


def vector_multiple(extent: int, lanes: int, inner_max: int = 64) -> int:
    """What the vector axis's innermost tile must be a multiple of: whole vectors where the extent
    allows (``gcd(lanes, extent)``, 8 or 16 on a 16-lane machine); where it allows less than half a
    vector (a width of 14, 28 or 7), the divisor that fills its vectors best (14: 14 of 16 lanes, not
    2 in a vector of 2; 7 has only 1 or 7), which then is the tile."""
    multiple = math.gcd(lanes, extent)
    if 2 * multiple >= lanes:
        return multiple
    return best_filled(extent, lanes, inner_max)


def best_filled(extent: int, lanes: int, inner_max: int = 64) -> int:
    """The divisor of ``extent`` up to ``inner_max`` whose vectors are the fullest (the longest of
    equals): 40 for 1000 on 16 lanes (two and a half vectors, 83% of the lanes used; 8 uses half)."""
    fits = [d for d in divisors(extent) if d <= inner_max]
    return max(fits, key=lambda d: (d / (math.ceil(d / lanes) * lanes), d))


class TilingRules(BuilderBase):
    def multi_level_tiling(self, st: Stage) -> None:
        """SSRSRS: spatial in 4 levels, reduction in 2; the outer two spatial levels live in the
        consumer that writes the result, and the accumulator tile is computed at its second level."""
        host = self.fusion_host(st)
        op = st.op
        assert isinstance(op, ComputeOp)
        perm = tuple(range(len(op.axis)))
        # The accumulator's last axis is its vector axis: the output's own last axis (a conv's W),
        # or a channel axis moved last (K: the conv's weight is packed with K contiguous; a depthwise
        # conv's C: its data and weight are).
        options = ["last", *(op.axis[d].name for d in self.channel_axes(op))]
        axis = self.choose(f"{st.name}.local/vector_axis", options) if len(options) > 1 else "last"
        if axis != "last":
            d = next(i for i, a in enumerate(op.axis) if a.name == axis)
            perm = (*(i for i in perm if i != d), d)
        if host is not None and axis == "last":
            producer, consumer = st, host
        else:
            local = self.s.cache_write(st.name, "local", None if axis == "last" else perm)
            producer, consumer = self.s[local], st
            if host is not None:  # channels last in the accumulator: the host reads it transposed
                st.compute_inline()
                self.done.add(st.name)
                consumer = host
        name = producer.name
        p_op, c_op = producer.op, consumer.op
        assert isinstance(p_op, ComputeOp) and isinstance(c_op, ComputeOp)
        # The last axis is the vector axis: its register tile is whole vectors where the extent allows
        # (a 1-8 lane tile on a 16-lane machine wastes most of each instruction).
        # A GEMM's rows (one reduction axis) may end in a partial tile: 6 rows of 4 vectors fill the
        # registers where the divisors of 1024 leave 8 of 32 empty. Windows keep to divisors.
        lengths = self.register_tiles(name, list(p_op.axis), tails=len(p_op.reduce_axis) == 1)
        if self.choose(f"{name}/resident", (False, True)):
            lengths = self.resident_tiles(lengths)
            for a, ln in zip(p_op.axis, lengths):  # the decisions say what was built
                self.used[f"{name}/tile/{a.name}"] = ln
        # Consumer: levels S0, S1 and the inner (S2*S3) tile; the producer goes inside S1.
        outer0, outer1, inner = [], [], []
        for ax, ln in zip(c_op.axis, [lengths[perm.index(d)] for d in range(len(perm))]):
            # min: a partial tile's levels may span more than the axis (7-row tiles of 32 rows: 35)
            o, rest = consumer.split(ax, factor=min(ln[1] * ln[2] * ln[3], ax.extent))
            o1, i1 = consumer.split(rest, factor=min(ln[2] * ln[3], rest.extent))
            outer0.append(o)
            outer1.append(o1)
            inner.append(i1)
        consumer.reorder(*outer0, *outer1, *inner)
        producer.compute_at(consumer, outer1[-1])
        # Channels in lanes read the weight across K: packed, that is one vector load, else a gather;
        # a weight stored K-last already (graph/weight_layout.py) is whole vectors in place: optional.
        as_is = all(layout is None for _, layout in self.packable(p_op))
        pack_options = (True,) if perm[-1] != len(perm) - 1 and not as_is else (False, True)
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
        rows = self.whole_rows(p_op, lengths, perm)
        if rows:  # the register tile's rows only: a whole producer tile of them unrolled would be huge
            y = inner[-2]
            if y.extent > lengths[-2][3]:
                _, y = consumer.split(y, factor=lengths[-2][3])
            self.vector_chunks(consumer, consumer.fuse(y, inner[-1]))
        elif inner[-1].extent <= 64:
            consumer.vectorize(inner[-1])
        elif inner[-1].extent % self.p.lanes == 0:
            self.vector_chunks(consumer, inner[-1])
        # Producer: S2 S3 of each spatial axis, R0 R1 of each reduction axis.
        s2, s3, r0, r1 = [], [], [], []
        for ax, ln in zip(p_op.axis, lengths):
            o, i = producer.split(ax, factor=ln[3])
            s2.append(o)
            s3.append(i)
        # A small window (a depthwise conv's 3x3 taps) gets no outer reduction level: swept once
        # per outer tap, the accumulator tile would go to memory and back for every one.
        taps = _prod([a.extent for a in p_op.reduce_axis])
        window = len(p_op.reduce_axis) > 1 and taps <= WINDOW_UNROLL_MAX
        # A lone reduction axis is GEMM's K: its inner tile is the micro-kernel's kc, the steps between
        # loading and storing the accumulator tile (1024^3, one thread, one 4 x 32 tile: 153 GFLOP/s
        # at 16, 156-161 at 32-128; searches allowed up to 128 took 64 in every top schedule).
        reduce_max = 64 if len(p_op.reduce_axis) == 1 else 16
        for ax in p_op.reduce_axis:
            key = f"{name}/tile/{ax.name}"
            rl = [1, ax.extent] if window else self.tiles(key, ax.extent, 2, inner_max=reduce_max)
            o, i = producer.split(ax, factor=rl[1])
            r0.append(o)
            r1.append(i)
        producer.reorder(*r0, *s2, *r1, *s3)
        if rows:
            self.vector_chunks(producer, producer.fuse(s3[-2], s3[-1]))
        elif s3[-1].extent <= 64:
            producer.vectorize(s3[-1])
        elif s3[-1].extent % self.p.lanes == 0:
            self.vector_chunks(producer, s3[-1])
        unroll = self.choose(f"{name}/unroll", UNROLL_STEPS)
        if unroll:
            producer.pragma(r0[0], "auto_unroll_max_step", unroll)
        # An inlined pad tests every tap: per accumulator row (the default), or once per tile of rows
        # with a fallback for the tiles that touch the border (lower/unswitch.py): either can win.
        padded = any(r.attach[0] == "inline" for r in self.s.reads(producer))
        if padded and self.choose(f"{name}/unswitch_rows", (False, True)):
            producer.pragma(r0[0], "unswitch_rows", 1)
        self.done.update({producer.name, consumer.name})

    def whole_rows(self, op: ComputeOp, lengths: list[list[int]], perm: tuple[int, ...]) -> bool:
        """The register tile is whole rows of the output's last axis, in lanes, as one stream of whole
        vectors (a 56-wide 1x1 conv: 2 rows are 7 vectors; the width alone, 3.5): its last two axes'
        inner tiles are fused into one vector loop, which reads a row-major buffer contiguously
        (codegen/llvm_vector.py joins ``W * (p // W) + p % W``) where every read along the rows is a
        whole plain row of the same width (a 1x1 conv's data; not a padded or strided window)."""
        if perm[-1] != len(perm) - 1 or len(op.axis) < 2:
            return False
        return self.row_vectors(op, lengths) is not None

    def row_vectors(self, op: ComputeOp, lengths: list[list[int]]) -> int | None:
        """Vectors of the whole-row register tile of ``lengths`` (:meth:`whole_rows`), or None."""
        width, rows, lanes = op.axis[-1].extent, lengths[-2][3], self.p.lanes
        if lengths[-1][3] != width or width % lanes == 0 or rows < 2 or rows * width % lanes:
            return None
        if op.axis[-2].extent % rows:  # a partial last tile of rows: not one stream of whole vectors
            return None
        return rows * width // lanes if plain_rows(op) else None

    def vector_chunks(self, st: Stage, axis: IterVar) -> None:
        """``axis`` vectorized one machine vector at a time, the vectors unrolled: LLVM keeps a 112-lane
        accumulator across a loop as shuffles of partial registers (MobileNetV2's 56x56 96 -> 24 conv:
        12 ms so, 0.21 in 7 vectors of 16)."""
        if axis.extent > self.p.lanes and axis.extent % self.p.lanes == 0:
            outer, axis = st.split(axis, factor=self.p.lanes)
            st.unroll(outer)
        st.vectorize(axis)

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
            alone = all(sum(any(v is a for v in walk(i)) for i in r.indices) == 1 for r in users)
            # some input is the same on every lane (a conv's data), the others read the axis as an index
            # of its own (a 1x1 conv's yy + ry, ry of extent 1, is a row of the data: no channel)
            broadcast = len(users) < len(reads) and all(any(i is a for i in r.indices) for r in users)
            # A depthwise conv's channel: read by every input (ONNX's at ((ff // 1) * 1) + rc), the data
            # through a window, then packed with this axis last (packable); whole vectors only.
            depthwise = (
                len(users) == len(reads)
                and a.extent % self.p.lanes == 0
                and all(any(plain_index(i, a) for i in r.indices) for r in users)
                and bool(self.window_reads(op, a))
            )
            if a.extent >= self.p.lanes and users and alone and (broadcast or depthwise):
                found.append(d)
        return found

    @staticmethod
    def window_reads(op: ComputeOp, axis: IterVar) -> list[TensorRead]:
        """Reads of ``op`` that index ``axis`` plainly and a reduction axis elsewhere (a depthwise
        conv's data ``pad[n, c, y + ry, x + rx]`` for its channel ``c``): each element is read by
        several taps, in every lane a different channel."""
        red = {id(r) for r in op.reduce_axis if r.extent > 1}
        return [
            n
            for n in walk(op.body)
            if isinstance(n, TensorRead)
            and any(plain_index(i, axis) for i in n.indices)
            and any(id(v) in red for i in n.indices for v in walk(i))
        ]

    def register_tiles(self, name: str, axes: list[IterVar], tails: bool = False) -> list[list[int]]:
        """Four tile lengths per spatial axis whose innermost ones, the accumulators kept in
        registers, fit ``registers`` vectors (an accumulator tile of 16 x 7 vectors spilled and
        trapped a search for hundreds of trials) next to one step's operands: the vectors of the
        last axis and a broadcast (a conv's 7 x 4 accumulators beside 4 weight vectors spilled and
        ran at 0.6x a 4 x 4 tile). Given tiles that do not fit (a mutation widened one axis) keep the
        vector axis's and give up rows to level 2 (:meth:`_fit_registers`); sampled ones that do not
        fit are resampled. ``tails``: the other axes' register tiles need not divide them."""
        *outer_axes, last = axes
        multiple = vector_multiple(last.extent, self.p.lanes)
        # A weight in panels (graph/gemm_layout.py) is contiguous only within a panel: the vector
        # tile must divide its width (lower/simplify.py then proves each vector within one panel), or
        # every vector load becomes a gather across two panels.
        widest = self.panel_width(last) or 64
        given = any(f"{name}/tile/{a.name}" in self.given for a in axes)
        for attempt in range(64):
            if attempt:  # the given or sampled tiles overflow the registers: sample afresh
                for a in axes:
                    self.given.pop(f"{name}/tile/{a.name}", None)
            lengths = [self.tiles(f"{name}/tile/{a.name}", a.extent, 4, 16, tails=tails) for a in outer_axes]
            lengths.append(self.tiles(f"{name}/tile/{last.name}", last.extent, 4, widest, multiple))
            if self._fits(lengths):
                break
            if attempt == 0 and given and self._fits(fitted := self._fit_registers(lengths)):
                lengths = fitted
                for a, ln in zip(axes, lengths):
                    self.used[f"{name}/tile/{a.name}"] = ln
                break
        return lengths

    def panel_width(self, axis: IterVar) -> int | None:
        """The narrowest ``c`` of reads ``W[axis // c, ..., axis % c]`` in the stage of ``axis`` (a GEMM
        weight stored in panels), or None."""
        widths = [
            int(i.b.value)
            for st in self.s.stages
            if isinstance(st.op, ComputeOp) and any(a is axis for a in st.op.axis)
            for n in walk(st.op.body)
            if isinstance(n, TensorRead)
            for i in n.indices
            if isinstance(i, Binary) and i.op == "%" and i.a is axis and isinstance(i.b, Const)
        ]
        return min(widths, default=None)

    def _fits(self, lengths: list[list[int]]) -> bool:
        row = math.ceil(lengths[-1][-1] / self.p.lanes)
        vectors = _prod([ln[-1] for ln in lengths[:-1]]) * row
        return vectors + max(0, row + 1 - OPERAND_REGISTERS) <= self.p.registers

    def _fit_registers(self, lengths: list[list[int]]) -> list[list[int]]:
        """``lengths`` with factors of the other axes' register tiles moved to level 2, the largest
        first, until they fit beside the vector axis's: a mutation from 16 x 1 vectors to 16 x 2
        becomes 8 x 2 rather than a random tiling (a 16 x 16 tile held one search at 0.79x numpy
        while 8 x 32 ran 1.05x: crossing took two matching mutations)."""
        return _move_out(lengths, 3, slice(None, -1), self._fits)

    def resident_tiles(self, lengths: list[list[int]]) -> list[list[int]]:
        """``lengths`` with level-2 factors moved out to level 1 until the whole accumulator tile
        (levels 2 and 3) fits the registers, so it stays in them while the entire reduction runs past
        it. A tile of 8 x 32 that way (rows at level 2, one vector pair at level 3) ran 1024^3 matmul
        at 1.09x numpy; searches that kept a 128 x 512 tile in memory, reloaded on every outer
        reduction step, ended at 0.91x (session 7, three seeds of 300 trials)."""

        def fits(lengths: list[list[int]]) -> bool:
            *outer, last = lengths
            tile = _prod([ln[2] * ln[3] for ln in outer]) * math.ceil(last[2] * last[3] / self.p.lanes)
            return tile <= self.p.registers

        return _move_out(lengths, 2, slice(None), fits)

    def packable(self, op: ComputeOp) -> list[tuple[Tensor, tuple[int, ...] | None]]:
        """Inputs read along the vectorized (last spatial) axis that ignore another spatial axis,
        each with the layout that makes that axis contiguous in the packed copy (None: as is;
        dense's ``W[j, k]`` is packed transposed, ``(1, 0)``)."""
        last = op.axis[-1]
        spatial = {id(a) for a in op.axis}
        found: list[tuple[Tensor, tuple[int, ...] | None]] = []
        window = self.window_reads(op, last) if len(op.axis) > 1 else []
        for n in walk(op.body):
            if not isinstance(n, TensorRead) or any(t is n.tensor for t, _ in found):
                continue
            used = {id(v) for idx in n.indices for v in walk(idx) if id(v) in spatial}
            dims = [d for d, idx in enumerate(n.indices) if any(v is last for v in walk(idx))]
            # A depthwise conv's data with its channel in lanes is reused by the window's taps: packed
            # channels-last, each tap is one vector load (in place, a gather of 16 strided floats).
            if (used == spatial and not any(n is w for w in window)) or len(dims) != 1:
                continue
            d, rank = dims[0], len(n.indices)
            found.append((n.tensor, None if d == rank - 1 else (*[x for x in range(rank) if x != d], d)))
        return found


def _move_out(
    lengths: list[list[int]], level: int, axes: slice, fits: Callable[[list[list[int]]], bool]
) -> list[list[int]]:
    """A copy of ``lengths`` with the smallest factors of tile ``level`` moved out one level, on the
    largest of ``axes`` first, until ``fits`` holds or that level of them is all 1."""
    lengths = [list(ln) for ln in lengths]
    while not fits(lengths):
        ln = max(lengths[axes], key=lambda ln: ln[level], default=None)
        if ln is None or ln[level] == 1:
            break
        factor = min(d for d in divisors(ln[level]) if d > 1)
        ln[level - 1], ln[level] = ln[level - 1] * factor, ln[level] // factor
    return lengths
