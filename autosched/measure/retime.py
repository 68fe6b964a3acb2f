"""Timing a few candidates again, in turns, each round in a fresh runner process: a finalists round.

A kernel's time depends on where its buffers land in memory, and that changes from one process to the
next: max pooling's pick took 24 us in the process that tuned it and 33 us in another (Zen 5, issue 17),
while the fourth-ranked schedule held 22-26 us in every one. The best of hundreds of candidates, each
timed once in one process, is then often the luckiest rather than the fastest. Timing the few best
again over several fresh processes, in turns, picks by what a caller will see.

The round times each finalist in a sustained run rather than the search's burst (:func:`sustained`:
15 repeats of at least 10 ms back to back, two passes over the finalists in each process). On a
two-core Emerald Rapids VM, five GEMM finalists timed the search's way (5 repeats of 2 ms, one pass,
three processes) came out in a different order on each of four tries, and the log's pick ran
1.02-1.07x numpy in sustained races where two others ran 1.16-1.24x; timed in runs of 3 repeats of
50 ms, two passes in each of three processes, the pick was one of those two on each of three tries
(issue 17). The runs are now made of shorter repeats: a repeat's calls are counted from the first
call's time, and on a loaded machine a 50 ms repeat of a microsecond kernel ran past the runner's wait.

Example::

    results = retime(measurer, task, [a.trace, b.trace, c.trace], rounds=3)
    results[0].costs      # every repeat of a, from all three rounds
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..hai.timing import TimingPolicy
from .result import MeasureResult
from .task import MeasureTask

FINALIST_ROUNDS = 3  # fresh processes per finalists round: the median of three outvotes one odd placement
FINALIST_PASSES = 2  # passes over the finalists, in turns, in each process: a slow phase hits them alike
FINALIST_REPEAT = 15  # repeats of each finalist a pass, back to back: a sustained run of 150 ms, as an
FINALIST_MIN_REPEAT_S = 0.01  # application calls it; short samples, so one slowed by load stays short


def sustained(policy: TimingPolicy) -> TimingPolicy:
    """``policy`` (the search's) for a finalists round: :data:`FINALIST_REPEAT` repeats of at least
    :data:`FINALIST_MIN_REPEAT_S` each (longer if ``policy``'s are), its warmup and cache flushing kept."""
    longest = max(policy.min_repeat_s, FINALIST_MIN_REPEAT_S)
    return replace(policy, repeat=FINALIST_REPEAT, min_repeat_s=longest)


def retime(
    measurer: Any, task: MeasureTask, traces: Sequence[Any], rounds: int, passes: int = 1
) -> list[MeasureResult]:
    """One result per trace: ``rounds`` rounds, each timing every trace in turn ``passes`` times; a
    trace's costs are its repeats of all rounds, and a failure in any round is its result (a kernel
    that fails once is out). A measurer with ``retime_rounds`` (:class:`~.measure.LocalMeasurer`) builds
    once, starts a fresh runner process per round and times with :func:`sustained`; any other measurer
    (a farm, a fake) measures the batch ``rounds * passes`` times, its own way."""
    own = getattr(measurer, "retime_rounds", None)
    if own:
        per_round = own(task, traces, rounds, passes)
    else:
        per_round = [measurer.measure(task, traces) for _ in range(rounds * passes)]
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
