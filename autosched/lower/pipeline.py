"""Lowering, as one ordered list of small passes: schedule -> loop IR ready for codegen."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

from ..search_space.schedule import Schedule
from ..te.tensor import PlaceholderOp, Tensor
from .bounds import check_bounds
from .cross_thread import lower_cross_thread_reductions
from .gpu_sync import insert_barriers
from .ir import PrimFunc
from .partition import partition_vector_loops
from .schedule_ops import schedule_to_loops
from .simplify import simplify
from .unroll import auto_unroll
from .verify import verify

Pass = Callable[[PrimFunc], PrimFunc]

PASSES: list[tuple[str, Pass]] = [
    ("simplify", simplify),  # fold the constants bound inference and splits leave behind
    # a vector loop whose lanes test padding: guarded whole-vector part, the border lane by lane
    ("partition_vector_loops", partition_vector_loops),
    ("auto_unroll", auto_unroll),  # honour pragma auto_unroll_max_step
]

# Run by the GPU adapters (opencl, cuda) after PASSES, on the function they render.
GPU_PASSES: list[tuple[str, Pass]] = [
    ("insert_barriers", insert_barriers),  # publish shared-memory fetches to the whole block
    # reductions bound to threads: partials, then a shared-memory tree (brings its own barriers)
    ("lower_cross_thread_reductions", lower_cross_thread_reductions),
]


def run_gpu_passes(func: PrimFunc) -> PrimFunc:
    """``func`` after :data:`GPU_PASSES` (verified between passes when ``AUTOSCHED_VERIFY=1``)."""
    check = os.environ.get("AUTOSCHED_VERIFY") == "1"
    for pass_name, run in GPU_PASSES:
        func = run(func)
        if check:
            verify(func, pass_name)
    return func


def lower(sch: Schedule, args: Sequence[Tensor], name: str = "main") -> PrimFunc:
    """The loop IR of ``sch`` as a function of ``args`` (inputs, then outputs).

    Example: ``print(format_func(lower(s, [A, B, C], "matmul")))``.
    """
    check = os.environ.get("AUTOSCHED_VERIFY") == "1"
    check_bounds([t for t in args if not isinstance(t.op, PlaceholderOp)])  # once per program
    func = schedule_to_loops(sch, list(args), name)
    if check:
        verify(func, "schedule_to_loops")
    for pass_name, run in PASSES:
        func = run(func)
        if check:
            verify(func, pass_name)
    return func
