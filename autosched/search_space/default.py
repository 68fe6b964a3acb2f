"""A reasonable schedule for any workload, used untuned: inline, vectorize, parallelize; a reduction
with reuse (conv, matmul) gets the sketch's register tiling with fixed decisions (:mod:`.default_tiling`)."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from ..te.tensor import ComputeOp, Tensor
from .default_tiling import tile_with_reuse
from .schedule import Schedule, create_schedule
from .sketch_base import Decisions, small_window, window_read
from .trace import Trace

VECTOR_LANES = (16, 8, 4)
WINDOW_REUSE = 4  # reads per element that pay for a copy of a conv's padded input


def _lanes(extent: int) -> int | None:
    return next((v for v in VECTOR_LANES if extent % v == 0), None)


def _column_tile(extent: int) -> int | None:
    """Outputs of a pool's next spatial axis computed together: 4, or 2, where they divide it."""
    return next((c for c in (4, 2) if extent % c == 0 and extent > c), None)


def _window_reuse(reader: Any, producer: Any) -> bool:
    """``reader`` reads ``producer`` through a window (:func:`~.sketch_base.window_read`), on average
    each element at least WINDOW_REUSE times."""
    if not window_read(reader, producer):
        return False
    reads = math.prod(reader.shape) * math.prod(r.extent for r in reader.reduce_axis)
    return reads >= WINDOW_REUSE * math.prod(producer.shape)


def default_schedule(
    outputs: Tensor | Sequence[Tensor], cores: int | None = None, lanes: int = 16
) -> Schedule:
    """Elementwise intermediates inlined; a reduction with reuse (conv, matmul) register-tiled with its
    vector axis filling whole vectors (:func:`~.default_tiling.tile_with_reuse`); per other stage the
    outer spatial loops fused and parallel, the innermost spatial loop vectorized (reductions moved
    outside it so lanes stay independent).

    ``lanes``: the target's float32 vector lanes, 16 (AVX-512) unless given; AVX2 wants 8 (its 16
    registers hold half the tile). :func:`default_trace` reads them from an adapter's chip facts.

    Example: ``f = autosched.build(default_schedule(C), [A, B, C])``.
    """
    return _default(outputs, cores, lanes)[0]


def _default(outputs: Tensor | Sequence[Tensor], cores: int | None, lanes: int) -> tuple[Schedule, Decisions]:
    """The default schedule and the sketch decisions of its register-tiled stages."""
    cores = cores or os.cpu_count() or 1
    s = create_schedule(outputs)
    from .sketch_attention import apply_default_flash

    taken = apply_default_flash(s, lanes)  # attentions: one flash loop nest each
    for st in list(s.stages):
        op = st.op
        if isinstance(op, ComputeOp) and not op.reduce_axis and not st.is_output and st.name not in taken:
            # A conv's padded input, read through its window, is materialized: inlined, every tap tests
            # the border (ResNet-18's 7x7 stem: 6.4 ms so, 24 inlined, wall time; MobileNetV2's 112x112
            # depthwise: 0.30 ms CPU time so, 0.38 inlined); but not a stride-2 depthwise conv's,
            # whose each padded element only two taps read (0.78 ms so, 0.56 inlined).
            if not any(_window_reuse(c.op, op) for c in s.stages if st in s.reads(c)):
                st.compute_inline()
    tiled, decisions = tile_with_reuse(s, cores, lanes, skip=taken)
    taken |= tiled
    for st in list(s.stages):
        op = st.op
        if not isinstance(op, ComputeOp) or st.attach[0] != "root" or st.name in taken:
            continue
        spatial = list(op.axis)
        outer = spatial
        if spatial and spatial[-1].extent >= 4 and (width := _lanes(spatial[-1].extent)):
            jo, ji = st.split(spatial[-1], factor=width)
            outer = [*spatial[:-1], jo]
            row = []
            cols = _column_tile(spatial[-2].extent) if len(spatial) > 1 else None
            if small_window(op.reduce_axis) and cols:
                # 4 outputs of a pool's next axis inside its window, each its own accumulator (as the
                # sketch's spatial_tile): 112 x 112 x 64 NHWC max pool 27.6 -> 23.0 us
                row = list(st.split(spatial[-2], factor=cols))
                outer = [*spatial[:-2], row[0], jo]
            st.reorder(*outer, *op.reduce_axis, *row[1:], ji)
            st.vectorize(ji)
            if row:
                st.unroll(row[1])
                for a in op.reduce_axis:
                    st.unroll(a)
        # Parallelize over the outer spatial loops: fuse until there is enough work per core.
        par = []
        extent = 1
        for ax in outer:
            if extent >= 4 * cores:
                break
            par.append(ax)
            extent *= ax.extent
        if len(par) > 1:
            fused = st.fuse(*par)
        elif par:
            fused = par[0]
        else:
            continue
        if extent > 1:
            st.parallel(fused)
    return s, decisions


def default_trace(outputs: Tensor | Sequence[Tensor], target: Any, cores: int | None = None) -> Trace:
    """The untuned schedule for ``target`` (an adapter, a :class:`~autosched.target.Target` or a target
    string), as a trace: :func:`default_schedule` for a CPU-style adapter, one element per thread
    (:func:`~autosched.search_space.gpu_sketch.default_gpu_schedule`) for a GPU-style one. What the op
    library, ``autosched build``, ``compile_model`` and model tuning's first candidate all run.

    Example: ``trace = default_trace([C], "opencl")``.
    """
    return default_candidate(outputs, target, cores)[0]


def default_candidate(
    outputs: Tensor | Sequence[Tensor], target: Any, cores: int | None = None
) -> tuple[Trace, Decisions]:
    """:func:`default_trace` and the sketch decisions that reach it where the sketch has them (a
    register-tiled stage's tiles, packing and unrolling; none on a GPU-style target): tuning measures
    the default first, and its decisions start the search's populations in the default's family."""
    if _style(target) == "gpu":
        from .gpu_sketch import default_gpu_schedule

        return default_gpu_schedule(outputs).trace, {}
    s, decisions = _default(outputs, cores, target_lanes(target))
    return s.trace, decisions


def _style(target: Any) -> str:
    spec = getattr(target, "spec", None)
    if spec is not None:
        return str(spec.style)
    from ..target import style_of

    return str(style_of(target))


def target_lanes(target: Any) -> int:
    """float32 lanes of ``target``'s vectors (an adapter's chip facts), as tuning's sketch takes them;
    16 where they cannot be read (a target string)."""
    from ..errors import AutoschedError

    info = getattr(target, "info", None)
    try:
        bits = info().vector_bits if info is not None else 512
    except (AutoschedError, OSError):  # an adapter that cannot report its chip: the widest tiles
        bits = 512
    return max(4, int(bits) // 32)
