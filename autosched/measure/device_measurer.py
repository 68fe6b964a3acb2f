"""Measuring on an adapter in this process: the measurer for GPU-style targets (opencl, cuda).

The builder/runner pair builds CPU shared libraries in worker processes; a GPU kernel is compiled
and timed by its adapter instead. Each candidate is replayed, lowered, compiled, run once and
checked against ``task.expected``, then timed; every failure is a :class:`MeasureResult` with an
error kind, never an exception. There is no process isolation: a kernel that hangs the device
hangs the tuner (a GPU watchdog, or PoCL, ends it in practice).

Example::

    with DeviceMeasurer("opencl") as m:
        results = m.measure(task, traces)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import CompileError, LowerError, RunError, ScheduleError, TargetError
from ..hai.registry import get_adapter
from ..lower.pipeline import lower
from ..search_space.schedule import replay
from .result import MeasureResult
from .task import MeasureTask


class DeviceMeasurer:
    """Compile, check and time candidates with the adapter of ``target`` (same interface as LocalMeasurer)."""

    def __init__(self, target: str, repeat: int = 5, warmup: int = 1):
        self.adapter = get_adapter(target)
        self.repeat = repeat
        self.warmup = warmup

    def measure(self, task: MeasureTask, traces: Sequence[Any]) -> list[MeasureResult]:
        return [self._one(task, trace) for trace in traces]

    def _one(self, task: MeasureTask, trace: Any) -> MeasureResult:
        t0 = time.perf_counter()
        try:
            sch = replay(task.outputs, trace)
            func = lower(sch, task.args, task.func_name)
        except (ScheduleError, LowerError) as e:
            return MeasureResult((), "schedule", str(e))
        try:
            kernel = self.adapter.compile(func)
        except (CompileError, TargetError) as e:
            return MeasureResult((), "compile", str(e)[:2000], build_s=time.perf_counter() - t0)
        build_s = time.perf_counter() - t0
        outs = [np.full(e.shape, 7, dtype=e.dtype) for e in task.expected]
        try:
            self.adapter.launch(kernel, [*task.inputs, *outs])
            for out, exp, (rtol, atol) in zip(outs, task.expected, task.tolerances):
                if not np.allclose(out, exp, rtol=rtol, atol=atol, equal_nan=False):
                    err = float(np.max(np.abs(out.astype("float64") - exp)))
                    return MeasureResult((), "wrong_result", f"max abs error {err:.3g}", build_s=build_s)
            costs = self.adapter.time(kernel, [*task.inputs, *outs], repeat=self.repeat, warmup=self.warmup)
        except (RunError, TargetError) as e:
            return MeasureResult((), "run", str(e)[:2000], build_s=build_s)
        return MeasureResult(tuple(costs), build_s=build_s, run_s=time.perf_counter() - t0 - build_s)

    def close(self) -> None:
        pass

    def __enter__(self) -> DeviceMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
