"""Lowering, as one ordered list of small passes: schedule -> loop IR ready for codegen."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ScheduleError
from ..search_space.schedule import Schedule
from ..target import style_of
from ..te.tensor import PlaceholderOp, Tensor
from .bounds import check_bounds
from .cross_thread import lower_cross_thread_reductions
from .gpu_sync import insert_barriers
from .ir import PrimFunc
from .partition import partition_vector_loops
from .schedule_ops import schedule_to_loops
from .simplify import simplify
from .tails import version_tail_tiles
from .unroll import auto_unroll
from .unswitch import unswitch_guards
from .verify import verify

Pass = Callable[[PrimFunc], PrimFunc]

PASSES: list[tuple[str, Pass]] = [
    ("simplify", simplify),  # fold the constants bound inference and splits leave behind
    # the tiles of a split that does not divide its axis: a copy without bounds tests for full tiles
    ("version_tail_tiles", version_tail_tiles),
    # a window's padding tests out of the channel and register-tile loops that do not change them
    ("unswitch_guards", unswitch_guards),
    # a vector loop whose lanes test padding: guarded whole-vector part, the border lane by lane
    ("partition_vector_loops", partition_vector_loops),
    ("auto_unroll", auto_unroll),  # honour pragma auto_unroll_max_step
]

# Run after PASSES for GPU-style targets (their adapters' spec says style="gpu").
GPU_PASSES: list[tuple[str, Pass]] = [
    ("insert_barriers", insert_barriers),  # publish shared-memory fetches to the whole block
    # reductions bound to threads: partials, then a shared-memory tree (brings its own barriers)
    ("lower_cross_thread_reductions", lower_cross_thread_reductions),
]


def _run(func: PrimFunc, passes: Sequence[tuple[str, Pass]]) -> PrimFunc:
    check = os.environ.get("AUTOSCHED_VERIFY") == "1"  # verified between passes when asked
    for pass_name, run in passes:
        func = run(func)
        if check:
            verify(func, pass_name)
    return func


def run_gpu_passes(func: PrimFunc) -> PrimFunc:
    """``func`` after :data:`GPU_PASSES` (verified between passes when ``AUTOSCHED_VERIFY=1``)."""
    return _run(func, GPU_PASSES)


def passes_for(style: str) -> list[tuple[str, Pass]]:
    """The passes of a target style: ``"cpu"`` gets :data:`PASSES`, ``"gpu"`` then :data:`GPU_PASSES` too."""
    return [*PASSES, *GPU_PASSES] if style == "gpu" else list(PASSES)


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main", target: Any = None) -> PrimFunc:
    """The loop IR of ``sch`` as a function of ``args`` (inputs, then outputs), ready for ``target``'s
    adapter: its declared style picks the passes (no target: the CPU-style list, as for features).

    Example: ``print(format_func(lower(s, [A, B, C], "matmul", target="opencl")))``.
    """
    style = "cpu"
    if target is not None:
        style = style_of(target)  # the adapters declare it (autosched.target holds their declarations)
    check_bounds([t for t in args if not isinstance(t.op, PlaceholderOp)])  # once per program
    if sch.flash:  # flash attentions: one blocked loop nest each (lower/flash.py); CPU-style only
        from .flash import flash_to_loops

        if style == "gpu":
            raise ScheduleError(
                "flash_attention steps lower for CPU-style targets only; GPU targets keep the unfused stages"
            )
        func = flash_to_loops(sch, list(args), name)
    else:
        func = schedule_to_loops(sch, list(args), name)
    if os.environ.get("AUTOSCHED_VERIFY") == "1":
        verify(func, "schedule_to_loops")
    return _run(func, passes_for(style))
