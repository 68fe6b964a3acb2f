"""Reductions without reuse (softmax, norms, pooling) and elementwise stages: vectorized across
their spatial lanes or rfactor-ed into vector lanes, and placed at the root or inside the loops all
their readers run in."""

from __future__ import annotations

import numpy as np

from ..te.expr import IterVar
from ..te.tensor import ComputeOp, TensorRead, walk
from .sketch_base import RFACTOR_LANES, BuilderBase, _prod, contiguous_reduction, divisors, small_window
from .stage import Split, Stage

ONE_PASS_BYTES = 512 * 1024  # well inside a core's L2 (1-2 MiB on the CPUs here)
PARALLEL_CHUNKS = 16  # parallel iterations a core that are enough to balance the load
STREAM_MIN_BYTES = 1 << 20  # a smaller output stays in a core's L2 for its next reader: not streamed


class ReductionRules(BuilderBase):
    def plain_reduction(self, st: Stage, outer_parallel: bool = True) -> None:
        op = st.op
        assert isinstance(op, ComputeOp)
        red = op.reduce_axis[-1]
        if outer_parallel and self.parallel_rfactor(st):
            return
        use_rfactor = contiguous_reduction(op) and red.extent >= 8
        # Placed in its readers' loop (one_pass), the reduction has one output per iteration there:
        # no spatial lanes to vectorize, its own reduction must fill them.
        one_pass = self.one_pass(st) and bool(self.attach_spots(st))
        forced = use_rfactor and one_pass
        if use_rfactor and self.choose(f"{st.name}/rfactor", (True,) if forced else (True, False)):
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
            self.place(st, parallel_axes=list(op.axis), in_readers=one_pass)
        else:
            self.spatial_vector(st, list(op.axis), list(op.reduce_axis), in_readers=one_pass)
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
        if not self.stream_rows(st):
            self.spatial_vector(st, list(op.axis), [])
        self.done.add(st.name)

    def stream_rows(self, st: Stage) -> bool:
        """An output of at least :data:`STREAM_MIN_BYTES` in rows of at least four vectors may store
        its rows past the caches: each row one vector loop whose aligned vectors are stored
        non-temporally (codegen/llvm_stream.py). Its lines are then not read for ownership before they
        are overwritten (five-point stencil, 2046 x 2046 outputs: 0.88 -> 0.74 ms on two cores)."""
        op = st.op
        assert isinstance(op, ComputeOp)
        if (
            not self.p.stream_outputs
            or not st.is_output
            or not op.axis
            or op.axis[-1].extent < 4 * self.p.lanes
        ):
            return False
        if _prod([a.extent for a in op.axis]) * np.dtype(op.dtype).itemsize < STREAM_MIN_BYTES:
            return False
        if not self.choose(f"{st.name}/stream", (False, True)):
            return False
        row = op.axis[-1]
        st.vectorize(row)
        st.pragma(row, "stream_stores", 1)
        self.place(st, list(op.axis[:-1]))
        return True

    def spatial_vector(
        self, st: Stage, spatial: list[IterVar], reduce: list[IterVar], in_readers: bool = False
    ) -> None:
        """Inner spatial loop vectorized (reductions moved outside it), outer loops parallel."""
        outer = spatial
        window = small_window(reduce)
        if spatial:
            last = spatial[-1]
            options = [v for v in divisors(last.extent) if v <= 64]
            lanes = self.choose(f"{st.name}/vector", options)
            if lanes > 1:
                jo, ji = st.split(last, factor=lanes)
                outer = [*spatial[:-1], jo]
                row: list = []
                if window and len(spatial) > 1:  # see spatial_tile
                    row = self.spatial_tile(st, spatial[-2])
                    outer = [*spatial[:-2], *row[:1], jo] if row else outer
                st.reorder(*outer, *reduce, *row[1:], ji)
                st.vectorize(ji)
                if row:
                    st.unroll(row[1])
        # A small window (a 3x3 pool) unrolled around the vector body: its taps are straight-line
        # vector code, the accumulator stays in a register between them.
        if window and self.choose(f"{st.name}/unroll_window", (True, False)):
            for a in reduce:
                st.unroll(a)
        self.place(st, outer, in_readers)

    def spatial_tile(self, st: Stage, axis: IterVar) -> list:
        """A few outputs along the next spatial axis (a pool's columns) inside the window loops, each
        with its own vector accumulator: several independent chains of taps in flight, where one
        output's taps form a single chain (NHWC 3x3 max pool, 112 x 112 x 64: 27.6 -> 23.0 us with 4
        columns). ``[outer, inner]``, or ``[]`` for one output."""
        options = [v for v in divisors(axis.extent) if v <= 8]
        width = self.choose(f"{st.name}/spatial_tile", options)
        if width <= 1:
            return []
        return list(st.split(axis, factor=width))

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

    def place(self, st: Stage, parallel_axes: list[IterVar], in_readers: bool = False) -> None:
        """At the root with fused parallel outer loops, or in a loop its readers run in (attach_spots);
        only in such a loop when ``in_readers`` (see :meth:`one_pass`).

        A contiguous reduction over a few hundred KiB per output (a layer norm's row sums) goes in its
        readers' loop whenever it can: there it reads the row from memory and its readers find it in
        cache, where at the root every stage sweeps the whole tensor again (layer norm 4096 x 1024:
        three passes over x, 1.1 ms on two cores; one, 0.6). The search had that choice and in 64
        trials never took it for both sums at once."""
        spots = [("root", ""), *self.attach_spots(st)]
        first = 1 if len(spots) > 1 and in_readers else 0
        where = self.choose(f"{st.name}/location", list(range(first, len(spots))))
        if where > 0:
            parent, axis = spots[where]
            st.compute_at(self.s[parent], axis)
            return
        axes = [a for a in parallel_axes if st.position(a) is not None]
        if not axes:
            return
        # Fusing past the loops that already give every core PARALLEL_CHUNKS chunks balances nothing
        # and takes away the row loop that a reader's one-pass producers are computed in (a layer
        # norm with rows and columns fused: its sums at the root again).
        extents = [a.extent for a in axes]
        enough = [d for d in range(1, len(axes)) if _prod(extents[:d]) >= PARALLEL_CHUNKS * self.p.cores]
        depth = self.choose(f"{st.name}/parallel_depth", list(range(1, (enough or [len(axes)])[0] + 1)))
        chosen = axes[:depth]
        pos = [st.position(a) for a in chosen]
        if pos != list(range(pos[0], pos[0] + len(pos))) or pos[0] != 0:
            return
        fused = st.fuse(*chosen) if len(chosen) > 1 else chosen[0]
        if fused.extent > 1:
            st.parallel(fused)

    def one_pass(self, st: Stage) -> bool:
        """``st`` (before any rfactor) reduces rows along contiguous memory, at least a vector long,
        and each of its outputs reads at most :data:`ONE_PASS_BYTES`: computed where its readers run,
        its data stays in cache for them (a strided reduction, a column sum, is better at the root with
        its columns in vector lanes; a pooling window, a few taps, keeps its choices)."""
        op = st.op
        if (
            not isinstance(op, ComputeOp)
            or not contiguous_reduction(op)
            or op.reduce_axis[-1].extent < self.p.lanes
        ):
            return False
        return _prod([a.extent for a in op.reduce_axis]) * np.dtype(op.dtype).itemsize <= ONE_PASS_BYTES

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
