"""The best schedule of a workload in three forms: schedule code, loop IR, and the generated code.

In the spirit of Halide's stmt HTML: what the search chose, what it lowered to, and what the compiler
was given. The trace renders as schedule code one step a line (``Step.to_code``, as ``autosched logs
best`` prints it), the loop IR with :func:`autosched.lower.printer.format_func`, and the generated
code with the target's adapter ``render`` (LLVM IR text for llvm-cpu, C for opencl and cuda).

Example::

    view = code_view(best_record, instance)
    print(view.schedule, view.loop_ir, view.generated[:200], sep="\\n")
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import AutoschedError
from ..records.record import TuningRecord
from ..te.workload import WorkloadInstance

MAX_CODE_CHARS = 200_000  # a fully unrolled kernel can be megabytes of IR; the page stays readable


@dataclass(frozen=True)
class CodeView:
    """The three texts, with a label for the generated code and a note where one could not be made."""

    schedule: str
    loop_ir: str = ""
    generated: str = ""
    generated_label: str = "generated code"
    note: str = ""


def schedule_code(rec: TuningRecord) -> str:
    """The record's trace as schedule code, one step a line."""
    return "\n".join(step.to_code() for step in rec.trace) or "(default schedule: no steps)"


def code_view(rec: TuningRecord, inst: WorkloadInstance | None) -> CodeView:
    """Replay ``rec`` on ``inst``, lower and render it for the record's target (rendering is pure).

    A log is untrusted: the record is validated, then lowered and rendered first in a worker with the
    compile time and memory limits (a trace that would hang the code generator stops there); the loop IR
    is lowered here only after that. Without an instance (the workload is not registered here) only the
    schedule code is shown.
    """
    schedule = schedule_code(rec)
    if inst is None:
        return CodeView(schedule, note="loop IR and generated code need the workload: pass --op FILE")
    from ..hai.registry import get_adapter
    from ..lower.pipeline import lower
    from ..lower.printer import format_func
    from ..measure.isolated import compile_isolated, render_source_job
    from ..records.validate import validate_record
    from ..search_space.schedule import replay

    name = _symbol(rec.workload_name)
    try:
        validate_record(rec, inst)  # a log is untrusted: never lower a record that does not fit
    except AutoschedError as e:
        return CodeView(schedule, note=f"the schedule does not lower here: {e}")
    try:
        adapter = get_adapter(rec.target)
    except (AutoschedError, ImportError, OSError, RuntimeError) as e:  # no pyopencl, no device...
        return CodeView(schedule, note=f"code for {rec.target} cannot be generated here: {e}")
    try:
        source = compile_isolated(
            inst.tensors, len(inst.inputs), str(rec.target), rec.trace, name, build_fn=render_source_job
        ).decode()
        func = lower(replay(list(inst.outputs), rec.trace), inst.tensors, name, target=rec.target)
    except AutoschedError as e:
        return CodeView(schedule, note=f"the schedule does not lower here: {e}")
    note = ""
    here = getattr(adapter, "cpu", None)
    logged = rec.chip.get("arch")
    if here is not None and logged and here != logged:
        note = f"generated on this machine for cpu {here}; the record was measured on {logged}"
    return CodeView(schedule, _cap(format_func(func)), _cap(source), adapter.spec.source_label, note)


def _symbol(name: str) -> str:
    from ..runtime.export import c_identifier

    return c_identifier(name)


def _cap(text: str) -> str:
    if len(text) <= MAX_CODE_CHARS:
        return text
    return text[:MAX_CODE_CHARS] + f"\n... ({len(text) - MAX_CODE_CHARS} more characters not shown)"
