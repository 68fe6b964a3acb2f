"""Trials to 90% from re-timed schedules: the transfer benchmark's runs judged on times that hold.

Each trial of a run is timed once, in one long-lived runner process, and a kernel's time moves with
where its buffers land: the same default matmul schedule on ``-mcpu=haswell`` read 205-215 GFLOP/s
from one run to the next, around the 90% mark of that chip's best. Read from the search's own
timings, the trials to 90% then follow that luck: scratch reached it on trial 1 and transfer on
trial 25 in the median over three seeds, for the same first schedule.

So for one workload, chip B and seed, every schedule that was a new best of one of the three runs
(scratch, transfer, pretrained), and whose search time is within ``WITHIN`` of the seed's best, is
timed again: all of them together, in turns, in ``ROUNDS`` fresh runner processes
(:func:`autosched.measure.retime.retime`, as the tuner's finalists round does). A run's re-timed
history at trial ``t`` is then the fastest re-timed time among its new bests up to ``t``: what a
finalists round at that budget would pick from them. Slower new bests keep their search time (they
are far from the 90% mark either way). The histories are stored in the results file as one line
per seed, mode ``retime``, and the table reads them in place of the search's own.
"""

from __future__ import annotations

import hashlib
import math
import tempfile
from pathlib import Path
from typing import Any

from autosched.measure.retime import retime
from autosched.records.log import read_log
from autosched.search_space.trace import trace_key
from autosched.tune import TuneOptions, Tuner

ROUNDS = 3  # fresh processes, as in a finalists round
WITHIN = 2.0  # new bests up to this many times the seed's best search time are timed again


def new_bests(log: Path) -> list[tuple[int, Any, float]]:
    """(trial, trace, search seconds) of each measured trial that beat every earlier one, in order."""
    records, _ = read_log(log)
    out: list[tuple[int, Any, float]] = []
    best = math.inf
    trials = [r for r in records if r.retimed is None]  # a finalists round's records are no trials
    for i, rec in enumerate(trials):
        if rec.ok and rec.mean_cost < best:
            best = rec.mean_cost
            out.append((i, rec.trace, best))
    return out


def history(bests: list[tuple[int, Any, float]], again: dict[str, float], trials: int) -> list[float | None]:
    """Seconds per trial: the fastest of the new bests so far, each by its re-timing where it has one
    (``again``: trace key -> seconds) and by its search time where not; None before the first."""
    out: list[float | None] = []
    pending = list(bests)
    best: float | None = None
    for t in range(trials):
        while pending and pending[0][0] <= t:
            _, trace, search = pending.pop(0)
            cost = again.get(trace_key(trace), search)
            best = cost if best is None else min(best, cost)
        out.append(best)
    return out


def retime_seed(inst: Any, target: str, logs: dict[str, Path], trials: int, threads: int | None,
                timeout: float) -> dict[str, Any]:  # fmt: skip
    """Re-time one seed's new bests on ``target`` (``logs``: mode -> that run's log); the results line's
    fields: the re-timed seconds per trace key and each mode's re-timed history."""
    bests = {mode: new_bests(log) for mode, log in logs.items()}
    floor = min((b[-1][2] for b in bests.values() if b), default=math.inf)
    chosen: dict[str, Any] = {}
    for b in bests.values():
        for _, trace, search in b:
            if search <= WITHIN * floor:
                chosen.setdefault(trace_key(trace), trace)
    again: dict[str, float] = {}
    if chosen:
        opts = TuneOptions(trials=1, baseline=False, num_threads=threads, timeout_s=timeout, finalists=0)
        with tempfile.TemporaryDirectory(prefix="autosched-retime-") as tmp:
            tuner = Tuner([inst], target, Path(tmp) / "unused.jsonl", opts)
            try:
                (task,) = tuner.tasks
                results = retime(tuner.measurer, task.measure_task, list(chosen.values()), ROUNDS)
            finally:
                tuner.measurer.close()
        for key, r in zip(chosen, results, strict=True):
            if r.ok:  # one that fails when run again keeps its search time
                again[key] = r.median
    return {  # the schedules by a short hash of their trace key: a results file is kept in the repository
        "retimed": {hashlib.sha256(k.encode()).hexdigest()[:12]: t for k, t in again.items()},
        "histories": {mode: history(b, again, trials) for mode, b in bests.items()},
        "rounds": ROUNDS,
        "within": WITHIN,
    }
