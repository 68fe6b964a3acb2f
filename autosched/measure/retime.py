"""Timing a few candidates again, in turns, each round in a fresh runner process: a finalists round.

A kernel's time depends on where its buffers land in memory, and that changes from one process to the
next: max pooling's pick took 24 us in the process that tuned it and 33 us in another (Zen 5, issue 17),
while the fourth-ranked schedule held 22-26 us in every one. The best of hundreds of candidates, each
timed once in one process, is then often the luckiest rather than the fastest. Timing the few best
again over several fresh processes, in turns, picks by what a caller will see.

Example::

    results = retime(measurer, task, [a.trace, b.trace, c.trace], rounds=3)
    results[0].costs      # every repeat of a, from all three rounds
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .result import MeasureResult
from .task import MeasureTask

FINALIST_ROUNDS = 3  # fresh processes per finalists round: the median of three outvotes one odd placement


def retime(measurer: Any, task: MeasureTask, traces: Sequence[Any], rounds: int) -> list[MeasureResult]:
    """One result per trace: ``rounds`` rounds, each timing every trace in turn; a trace's costs are its
    repeats of all rounds, and a failure in any round is its result (a kernel that fails once is out).
    A measurer with ``retime_rounds`` (:class:`~.measure.LocalMeasurer`) builds once and starts a fresh
    runner process per round; any other measurer (a farm, a fake) measures the batch ``rounds`` times."""
    own = getattr(measurer, "retime_rounds", None)
    per_round = own(task, traces, rounds) if own else [measurer.measure(task, traces) for _ in range(rounds)]
    return [merge_rounds(list(results)) for results in zip(*per_round, strict=True)]


def merge_rounds(results: list[MeasureResult]) -> MeasureResult:
    """One candidate's results over rounds as one: the first failure, or all repeats in round order
    (with the first round's timing policy, and a misaligned figure from whichever round took one)."""
    for r in results:
        if not r.ok:
            return r
    timing = dict(results[0].timing) if results[0].timing is not None else None
    if timing is not None and "misaligned" not in timing:
        found = [r.timing["misaligned"] for r in results if r.timing and "misaligned" in r.timing]
        if found:
            timing["misaligned"] = found[0]
    return MeasureResult(
        tuple(c for r in results for c in r.costs),
        build_s=results[0].build_s,
        run_s=sum(r.run_s for r in results),
        check=results[0].check,
        timing=timing,
    )
