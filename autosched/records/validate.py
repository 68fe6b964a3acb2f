"""A record checked against the workload it claims to schedule, before anything compiles it.

Logs are shared between teams, so a record is untrusted input. Parsing (:mod:`.record`, and
:func:`~autosched.search_space.trace.trace_from_json` for the trace) already bounds every argument
of every step; here the trace is replayed on the workload itself, and each step must fit it: the
key and arguments match, stages and axes exist, split and tile factors fit the loops they split,
and no loop is vectorized or unrolled wider than a compiler can take in bounded time.

Example::

    validate_record(rec, inst)      # raises RecordError naming the step and what is wrong
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from ..errors import ScheduleError
from .record import RecordError, TuningRecord

if TYPE_CHECKING:
    from ..search_space.schedule import Schedule
    from ..search_space.trace import Step
    from ..te.workload import WorkloadInstance

# The sketch vectorizes at most a packed tile's row (a few hundred lanes); a vector of 10**6 lanes
# is a hang in LLVM, not a schedule.
MAX_VECTOR_LANES = 4096
# Explicitly unrolled loops of one stage, multiplied: the body copies the compiler must take.
MAX_UNROLLED_COPIES = 4096
# Vector lanes times unrolled copies of one stage: the vector instructions the compiler must take. The
# sketch makes at most 64 lanes x a 64-tap window (4096); each bound alone still lets 4096 x 4096 through.
MAX_UNROLLED_LANES = 16 * 4096


def validate_record(rec: TuningRecord, inst: WorkloadInstance) -> None:
    """Raise :class:`RecordError` unless ``rec`` is a schedule of ``inst`` that can be compiled safely.

    Example: ``validate_record(rec, matmul.instantiate(M=64, N=64, K=64))``.
    """
    if rec.workload_key != inst.key:
        raise RecordError(
            f"the record is for workload key {rec.workload_key[:12]}, not {inst.name}'s {inst.key[:12]}"
        )
    if rec.workload_name == inst.name:  # the key is structural: a same-shaped workload may share it
        wanted = {k: _comparable(v) for k, v in inst.args.items()}
        given = {k: _comparable(rec.workload_args.get(k)) for k in inst.args}
        if given != wanted:
            raise RecordError(
                f"workload arguments {rec.workload_args} do not match {inst.name}{dict(inst.args)}"
            )
    _replay_checked(rec.trace, list(inst.outputs))


def _comparable(v: Any) -> Any:
    return tuple(_comparable(x) for x in v) if isinstance(v, (list, tuple)) else v


def _replay_checked(trace: tuple[Step, ...], outputs: list[Any]) -> None:
    from ..search_space.schedule import create_schedule

    s = create_schedule(outputs)
    for i, step in enumerate(trace):
        try:
            _check_fits(s, step)
            s.apply(step)
        except ScheduleError as e:
            raise RecordError(f"trace step {i} ({step.to_code()}) does not fit the workload: {e}") from None
    _check_widths(s)


def _check_fits(s: Schedule, step: Step) -> None:
    """A split or tile factor larger than its loop: the sketch never samples one (tiles multiply to
    the extent), so such a record was not made by a search of this workload."""
    a = step.args
    if step.primitive == "split":
        factors = [(a[0], "factor", a[1]), (a[0], "nparts", a[2])]
    elif step.primitive == "tile":
        factors = [(a[0], "x_factor", a[2]), (a[1], "y_factor", a[3])]
    else:
        return
    stage = s[step.stage]
    for axis, name, value in factors:
        iv = stage.axes.get(axis)
        if iv is not None and value is not None and value > iv.extent:  # an unknown axis: apply() says so
            raise ScheduleError(f"{name} {value} is larger than the extent {iv.extent} of axis {axis!r}")


def _check_widths(s: Schedule) -> None:
    for st in s.stages:
        unrolled = []
        lanes = 1
        for iv in st.leaf_iter_vars:
            kind = st.annotations.get(iv.name)
            if kind == "vectorized" and iv.extent > MAX_VECTOR_LANES:
                raise RecordError(
                    f"stage {st.name!r}: axis {iv.name!r} of {iv.extent} iterations is vectorized; at most "
                    f"{MAX_VECTOR_LANES} lanes are accepted from a log"
                )
            if kind == "vectorized":
                lanes *= iv.extent
            if kind == "unrolled":
                unrolled.append(iv.extent)
        if math.prod(unrolled) > MAX_UNROLLED_COPIES:
            raise RecordError(
                f"stage {st.name!r}: its unrolled loops make {math.prod(unrolled)} copies of the body; at "
                f"most {MAX_UNROLLED_COPIES} are accepted from a log"
            )
        copies = math.prod(unrolled)
        if lanes * copies > MAX_UNROLLED_LANES:
            raise RecordError(
                f"stage {st.name!r}: {copies} unrolled copies of a {lanes}-lane vector body make "
                f"{lanes * copies} lanes; at most {MAX_UNROLLED_LANES} are accepted from a log"
            )
