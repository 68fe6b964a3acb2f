"""Measuring a batch of candidates: build them all, then run them all.

On a CPU the build and the timing must not overlap: a compile on the other core slowed a two-thread
kernel below its one-thread speed. So a batch is built first, then run.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .builder import LocalBuilder
from .result import BuildResult, MeasureResult
from .retime import sustained
from .runner import LocalRunner
from .task import MeasureTask


def measure_batch(
    task: MeasureTask, traces: Sequence[Any], builder: LocalBuilder, runner: LocalRunner
) -> list[MeasureResult]:
    """One MeasureResult per trace, in order; a bad candidate is a result with an error, never an exception.

    Example: ``results = measure_batch(task, [s.trace for s in schedules], LocalBuilder(), LocalRunner())``.
    """
    built = builder.build(task, traces)
    results = runner.run(task, built)
    _remove_built(built)
    return results


def _remove_built(built: Sequence[BuildResult]) -> None:
    """The runner has loaded (or given up on) each library; its file is no longer needed."""
    for b in built:
        if b.path is not None:
            shutil.rmtree(Path(b.path).parent, ignore_errors=True)


class LocalMeasurer:
    """A builder and a runner together, with the interface the search uses (as does FakeMeasurer).

    Example::

        with LocalMeasurer(LocalBuilder(), LocalRunner(num_threads=2)) as m:
            results = m.measure(task, traces)
    """

    def __init__(self, builder: LocalBuilder | None = None, runner: LocalRunner | None = None):
        self.builder = builder or LocalBuilder()
        self.runner = runner or LocalRunner()

    def measure(self, task: MeasureTask, traces: Sequence[Any]) -> list[MeasureResult]:
        return measure_batch(task, traces, self.builder, self.runner)

    def retime_rounds(
        self, task: MeasureTask, traces: Sequence[Any], rounds: int, passes: int = 1
    ) -> list[list[MeasureResult]]:
        """The traces built once, then run ``rounds`` times, each time in a fresh runner process (new
        buffers, another placement in memory) and ``passes`` times over in it, in turns, timed in
        sustained samples (:func:`.retime.sustained`); one list of results per pass (:mod:`.retime`)."""
        built = self.builder.build(task, traces)
        policy = sustained(self.runner.timing)
        try:
            out = []
            for i in range(rounds):
                self.runner.close()  # the next run starts a fresh worker holding fresh buffers
                for j in range(passes):
                    # the first pass also times each finalist misaligned: the pick's figure for the log
                    out.append(self.runner.run(task, built, misaligned_all=i == j == 0, timing=policy))
            return out
        finally:
            _remove_built(built)

    def close(self) -> None:
        self.builder.close()
        self.runner.close()

    def __enter__(self) -> LocalMeasurer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
