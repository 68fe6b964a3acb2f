"""The GPU search space (opencl, cuda): the CPU sketch's rules with blocks, threads and shared memory.

Per stage, from the outputs back, the first rule that fits:

- elementwise intermediates are inlined;
- a reduction with data reuse (matmul, conv) gets multi-level tiling "SSSRRSRS": each spatial
  axis in four levels (block, virtual thread, thread, inner), the reduction in two; the block
  levels are fused onto ``blockIdx.x``, the virtual-thread levels onto ``vthread``, the thread
  levels onto ``threadIdx.x``; the accumulator tile is a ``local`` stage (``cache_write``, or the
  reduction itself inside its elementwise consumer) computed at the thread loop; optionally each
  input is copied into ``shared`` memory at the outer reduction loop, the copy fused and bound to
  the same threads (a cooperative fetch; :mod:`autosched.lower.gpu_sync` adds the barriers);
- a reduction without reuse (softmax, norms, pooling) either runs one output element per thread,
  the reduction serial in the thread, as its own kernel or inside its consumer's thread loop; or,
  decision ``<stage>/cross_thread``, as a cross-thread reduction (TVM, Ansor): one output element
  per block, the reduction axes fused and split, the inner part (``<stage>/reduce_threads``) bound
  to ``threadIdx.x``, as its own kernel or inside its consumer's block loop;
  :mod:`autosched.lower.cross_thread` turns it into per-thread partials and a shared-memory tree;
- any other stage: spatial loops fused, split, bound to ``blockIdx.x`` / ``threadIdx.x``.

Example::

    policy = GPUSketchPolicy([C], max_threads=256, shared_mem=48 * 1024)
    s, decisions = policy.sample(random.Random(0))
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..te.expr import IterVar
from ..te.tensor import ComputeOp, PlaceholderOp, Tensor
from .schedule import Schedule, create_schedule
from .sketch import UNROLL_STEPS, Decisions, _Builder, _prod
from .stage import Stage

THREADS = (32, 64, 128, 256, 512)
REDUCE_THREADS = (8, 16, 32, 64, 128, 256, 512)


def bind_flat(st: Stage, threads: int) -> None:
    """Fuse the spatial loops of ``st`` (its leading leaves) and bind them to blocks of ``threads``."""
    op = st.op
    assert isinstance(op, ComputeOp)
    spatial = [a for a in op.axis if st.position(a) is not None]
    if not spatial:
        return  # a scalar: one thread does it
    fused = st.fuse(*spatial) if len(spatial) > 1 else spatial[0]
    bo, bi = st.split(fused, factor=min(threads, fused.extent))
    st.bind(bo, "blockIdx.x")
    st.bind(bi, "threadIdx.x")


def default_gpu_schedule(outputs: Tensor | Sequence[Tensor], max_threads: int = 64) -> Schedule:
    """Elementwise intermediates inlined; every other stage its own kernel, one element per thread.

    Example: ``f = autosched.build(default_gpu_schedule(C), [A, B, C], "opencl")``.
    """
    s = create_schedule(outputs)
    for st in list(s.stages):
        if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output:
            st.compute_inline()
    for st in list(s.stages):
        if isinstance(st.op, ComputeOp) and st.attach[0] == "root":
            bind_flat(st, max_threads)
    return s


class GPUSketchPolicy:
    """Samples GPU schedules; the same ``sample(rng, decisions)`` interface as SketchPolicy."""

    def __init__(self, outputs: Sequence[Tensor], max_threads: int = 256, shared_mem: int = 48 * 1024):
        self.outputs = list(outputs)
        self.max_threads = max_threads
        self.shared_mem = shared_mem

    def sample(self, rng: random.Random, decisions: Decisions | None = None) -> tuple[Schedule, Decisions]:
        """A random candidate; choices already in ``decisions`` are reused where still valid."""
        # Not a SketchPolicy: the base reads only ``outputs``; the rules that read cores, lanes and
        # registers are overridden below.
        return _GPUBuilder(self, rng, dict(decisions or {})).build()  # type: ignore[arg-type]


class _GPUBuilder(_Builder):
    flash_style = "gpu"  # attentions keep their stages here (the flash nest is CPU-style)

    p: GPUSketchPolicy  # type: ignore[assignment]  # the GPU rules read max_threads, shared_mem

    # build() is the CPU builder's walk; only the rules for reductions and elementwise stages differ.
    def plain_reduction(self, st: Stage, outer_parallel: bool = True) -> None:
        # outer_parallel is the CPU rules' (parallel rfactor over cores); the GPU has no such rule
        if self.choose(f"{st.name}/cross_thread", (False, True)):
            self.cross_thread_reduction(st)
        else:
            self.thread_reduction(st)

    def elementwise(self, st: Stage) -> None:
        bind_flat(st, self.threads(st))
        self.done.add(st.name)

    def threads(self, st: Stage) -> int:
        return int(self.choose(f"{st.name}/threads", [t for t in THREADS if t <= self.p.max_threads] or [1]))

    def multi_level_tiling(self, st: Stage) -> None:
        host = self.fusion_host(st)
        if host is not None:
            producer, consumer = st, host
        else:
            producer, consumer = self.s[self.s.cache_write(st.name, "local")], st
        name = producer.name
        p_op, c_op = producer.op, consumer.op
        assert isinstance(p_op, ComputeOp) and isinstance(c_op, ComputeOp)
        lengths = self.spatial_tiles(name, p_op)
        levels: list[list] = [[], [], [], []]  # block, vthread, thread, inner
        for ax, ln in zip(c_op.axis, lengths):
            b, rest = consumer.split(ax, factor=ln[1] * ln[2] * ln[3])
            v, rest = consumer.split(rest, factor=ln[2] * ln[3])
            t, i = consumer.split(rest, factor=ln[3])
            for level, a in zip(levels, (b, v, t, i)):
                level.append(a)
        consumer.reorder(*levels[0], *levels[1], *levels[2], *levels[3])
        bound = []
        for level, tag in zip(levels[:3], ("blockIdx.x", "vthread", "threadIdx.x")):
            fused = consumer.fuse(*level) if len(level) > 1 else level[0]
            consumer.bind(fused, tag)
            bound.append(fused)
        producer.compute_at(consumer, bound[2])
        # Producer: R0 (outer reduction), R1 (inner reduction), S (its per-thread tile).
        r0, r1 = [], []
        for ax in p_op.reduce_axis:
            rl = self.tiles(f"{name}/tile/{ax.name}", ax.extent, 2, inner_max=16)
            o, i = producer.split(ax, factor=rl[1])
            r0.append(o)
            r1.append(i)
        producer.reorder(*r0, *r1, *p_op.axis)
        unroll = self.choose(f"{name}/unroll", UNROLL_STEPS)
        if unroll:
            producer.pragma(r0[0], "auto_unroll_max_step", unroll)
        if self.choose(f"{name}/shared", (True, False)):
            nthreads = bound[2].extent
            for src in self.s.reads(producer):
                if isinstance(src.op, PlaceholderOp) or src.attach[0] == "inline":
                    cached = self.s[self.s.cache_read(src.name, "shared", [producer.name])]
                    cached.compute_at(producer, r0[-1])
                    copy_op = cached.op
                    assert isinstance(copy_op, ComputeOp)
                    axes = copy_op.axis
                    fused = cached.fuse(*axes) if len(axes) > 1 else axes[0]
                    _, ti = cached.split(fused, factor=nthreads)
                    cached.bind(ti, "threadIdx.x")
                    self.done.add(cached.name)
        self.done.update({producer.name, consumer.name})

    def spatial_tiles(self, name: str, op: ComputeOp) -> list[list[int]]:
        """Four tile lengths per spatial axis; the thread levels multiply to at most max_threads."""
        keys = [f"{name}/tile/{a.name}" for a in op.axis]
        for _ in range(20):
            lengths = [self.tiles(k, a.extent, 4, inner_max=4) for k, a in zip(keys, op.axis)]
            if _prod([ln[2] for ln in lengths]) <= self.p.max_threads:
                return lengths
            for k in keys:
                self.given.pop(k, None)
        lengths = [[a.extent, 1, 1, 1] for a in op.axis]  # one thread per block: always legal
        self.used.update(zip(keys, lengths))
        return lengths

    def consumer_loop(self, st: Stage, tag: str) -> tuple[Stage, IterVar] | None:
        """The loop bound to ``tag`` in ``st``'s only consumer (scheduled, at the root), if any."""
        cons = [c for c in self.consumers(st) if c.name in self.done]
        if len(cons) != 1 or cons[0].attach[0] != "root":
            return None
        leaf = next((a for a in cons[0].leaves if cons[0].thread_tags.get(a.name) == tag), None)
        return None if leaf is None else (cons[0], leaf)

    def thread_reduction(self, st: Stage) -> None:
        """One output element per thread: its own kernel, or inside its consumer's thread loop."""
        spot = self.consumer_loop(st, "threadIdx.x")
        if spot is not None and self.choose(f"{st.name}/location", (0, 1)) == 1:
            st.compute_at(*spot)
        else:
            bind_flat(st, self.threads(st))
        self.done.add(st.name)

    def cross_thread_reduction(self, st: Stage) -> None:
        """One output element per block, its reduction shared by the block's threads: its own kernel,
        or inside its consumer's block loop."""
        op = st.op
        assert isinstance(op, ComputeOp)
        red = op.reduce_axis
        fused = st.fuse(*red) if len(red) > 1 else red[0]
        # Thread counts far beyond the reduction would only idle; the smallest is always offered.
        options = [t for t in REDUCE_THREADS if t <= self.p.max_threads] or [1]
        options = [t for t in options if t < 2 * fused.extent] or options[:1]
        _, inner = st.split(fused, factor=self.choose(f"{st.name}/reduce_threads", options))
        st.bind(inner, "threadIdx.x")
        spot = self.consumer_loop(st, "blockIdx.x")
        if spot is not None and self.choose(f"{st.name}/location", (0, 1)) == 1:
            st.compute_at(*spot)
        elif op.axis:
            spatial = st.fuse(*op.axis) if len(op.axis) > 1 else op.axis[0]
            st.bind(spatial, "blockIdx.x")
        self.done.add(st.name)
