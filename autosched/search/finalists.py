"""The finalists round: the few best schedules of a task timed again before one is picked.

During a search each candidate is timed once, in one runner process. For memory-bound kernels that
time moves with where the buffers land (issue 17: the same max-pooling kernel took 24 us in one
process and 33 us in another), so the argmin over hundreds of single timings favours a lucky
placement. At the end of a task the tuner times its ``k`` best schedules by the search's timings
again, in turns, over fresh processes (:func:`autosched.measure.retime.retime`), with the pick of an
earlier round if it is not among them, and picks by those times. A re-timing is not comparable with
a search timing (it is not the best of many draws), so once a task has re-timed schedules its pick is
always one of them, in memory and in the log (``retimed`` records, :func:`autosched.records.log.standing`).

Example::

    board = Standings()
    board.note(trace, 1.2e-3, decisions)          # every measured candidate
    outcome = run_finalists(board, 4, time_again, fresh=True)
    print(outcome.describe("max_pool"))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import FAILED_COST
from ..measure.result import MeasureResult
from ..records.record import TuningRecord
from ..records.show import format_seconds
from ..search_space.trace import trace_key


@dataclass
class Entry:
    """One distinct schedule of a task: its search timing and its last re-timing, if any."""

    trace: Any
    first: float = FAILED_COST  # seconds as the search timed it; FAILED_COST for a failure (or unknown)
    decisions: dict[str, Any] | None = None
    timing: dict[str, Any] | None = None  # how the cost that stands was timed
    retimed: float | None = None  # seconds by the last finalists round that timed it (FAILED_COST: failed)

    @property
    def cost(self) -> float:
        """The cost that stands: the last re-timing, else the search's timing."""
        return self.first if self.retimed is None else self.retimed

    def rank_key(self) -> tuple[bool, float]:
        """Re-timed schedules first, each group by its cost: a re-timing outranks any search timing."""
        return self.retimed is None, self.cost


class Standings:
    """Every distinct schedule measured for one task, with its search timing and its re-timing."""

    def __init__(self) -> None:
        self._entries: dict[str, Entry] = {}

    def note(self, trace: Any, cost: float, decisions: dict[str, Any] | None = None,
             timing: dict[str, Any] | None = None) -> None:  # fmt: skip
        """A search timing (the first one stands if a schedule was timed twice)."""
        key = trace_key(trace)
        if key not in self._entries:
            self._entries[key] = Entry(trace, cost, decisions, timing)
        elif self._entries[key].first >= FAILED_COST:  # known so far by a re-timing only
            self._entries[key].first = cost

    def note_retimed(self, trace: Any, cost: float, decisions: dict[str, Any] | None = None,
                     timing: dict[str, Any] | None = None) -> None:  # fmt: skip
        """A finalists round's time for ``trace`` (FAILED_COST: it failed there); the last one stands."""
        e = self._entries.setdefault(trace_key(trace), Entry(trace, decisions=decisions))
        e.retimed, e.timing = cost, timing

    def note_record(self, rec: TuningRecord) -> None:
        """A record read from a log: a search timing, or a finalists round's (``rec.retimed``)."""
        cost = rec.mean_cost if rec.ok else FAILED_COST
        if rec.retimed is None:
            self.note(rec.trace, cost, rec.decisions, rec.timing)
        else:
            self.note_retimed(rec.trace, cost, rec.decisions, rec.timing)

    def by_search(self, k: int) -> list[Entry]:
        """The ``k`` fastest schedules by the search's timings, fastest first (ties: the first noted);
        one that failed a re-timing is out."""
        ok = [e for e in self._entries.values() if e.first < FAILED_COST and e.cost < FAILED_COST]
        return sorted(ok, key=lambda e: e.first)[:k]

    def entry(self, trace: Any) -> Entry | None:
        """The schedule ``trace``'s entry, if it was measured."""
        return self._entries.get(trace_key(trace))

    def best(self) -> Entry | None:
        """The pick: the fastest re-timed schedule if any ran there, else the search's fastest."""
        ok = [e for e in self._entries.values() if e.cost < FAILED_COST]
        return min(ok, key=Entry.rank_key) if ok else None

    def __len__(self) -> int:
        return len(self._entries)


@dataclass(frozen=True)
class Outcome:
    """What a finalists round did: the pick before and after, and the schedules it re-timed."""

    before: Entry
    after: Entry | None  # None: every finalist failed its re-timing, and nothing else ran
    retimed: int  # schedules timed again
    failed: int  # finalists that failed a re-timing (out of the running)
    search_rank: int | None  # where the pick stood by the search's timings (1: the search's best)
    before_cost: float  # the cost the pick before the round stood on

    @property
    def changed(self) -> bool:
        """Whether the round picked another schedule than the one that stood before it."""
        return self.after is None or trace_key(self.after.trace) != trace_key(self.before.trace)

    def describe(self, name: str) -> str:
        head = f"{name}: finalists round: {self.retimed} schedule(s) timed again in turns, fresh processes"
        if self.after is None or self.after.retimed is None:
            fall = "" if self.after is None else f": the pick falls to the search's #{self.search_rank}"
            return f"{head}; every one failed there{fall}"
        times = f"{format_seconds(self.before_cost)} -> {format_seconds(self.after.cost)}"
        if not self.changed:
            pick = f"the pick stands ({times} re-timed)"
        elif self.search_rank is not None:
            pick = f"a new pick, the search's #{self.search_rank} ({times})"
        else:
            pick = f"a new pick ({times})"
        failed = f"; {self.failed} failed there and are out" if self.failed else ""
        return f"{head}: {pick}{failed}"


def run_finalists(
    board: Standings,
    k: int,
    time_again: Callable[[list[Entry]], Sequence[MeasureResult]],
    *,
    fresh: bool,
    also: Sequence[Any] = (),
) -> Outcome | None:
    """Time the ``k`` best of ``board`` by the search's timings (and the earlier pick, when re-timed and
    not among them, and each trace of ``also`` that ran without failing: the default schedule) again with
    ``time_again``, which also logs them; note the results. None when there is nothing to decide: ``k`` <
    2, fewer than two schedules ran, or (``fresh`` False: nothing new was measured in this run) all ``k``
    stand on re-timings already.

    The default joins because a search's timings can rank it low by noise alone: on a noisy two-core VM
    every good GEMM timed at the 2-core peak in the search, while in sustained runs the default's 6 x 64
    register tile ran 1.1-1.2x the search's pick (issue 17)."""
    finalists = board.by_search(k)
    before = board.best()
    if k < 2 or len(finalists) < 2 or before is None:
        return None
    if not fresh and all(e.retimed is not None for e in finalists):
        return None
    if before.retimed is not None and all(e is not before for e in finalists):
        finalists.append(before)  # the earlier round's pick defends its place in this one's turns
    for trace in also:
        e = board.entry(trace)
        if e is None or e.first >= FAILED_COST or e.cost >= FAILED_COST:
            continue  # not measured in the search, or failed there
        if all(f is not e for f in finalists):
            finalists.append(e)
    before_cost = before.cost
    order = {trace_key(e.trace): i + 1 for i, e in enumerate(board.by_search(len(board)))}
    for e, r in zip(finalists, time_again(finalists), strict=True):
        board.note_retimed(e.trace, r.median, e.decisions, r.timing if r.ok else None)
    after = board.best()  # if every finalist failed: the search's next best, never re-timed
    rank = order.get(trace_key(after.trace)) if after is not None else None
    failed = sum(e.retimed is not None and e.retimed >= FAILED_COST for e in finalists)
    return Outcome(before, after, len(finalists), failed, rank, before_cost)


def keep_misaligned(result: MeasureResult, earlier: dict[str, Any] | None) -> MeasureResult:
    """A re-timing keeps the misaligned figure of the schedule's earlier timing when it took none (the
    runner takes one for a new best only): the log and summary still say what misalignment costs."""
    timing = result.timing
    if not result.ok or timing is None or "misaligned" in timing or "misaligned" not in (earlier or {}):
        return result
    assert earlier is not None
    return replace(result, timing={**timing, "misaligned": earlier["misaligned"]})
