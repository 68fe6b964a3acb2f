"""What a search strategy does for the tuner: propose candidates, learn from their results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from ..search_space.sketch import Decisions
from ..search_space.trace import Trace


@dataclass(frozen=True)
class Candidate:
    """A schedule to measure: its trace (what logs keep) and the sketch decisions that made it."""

    trace: Trace
    decisions: Decisions = field(default_factory=dict)


class SearchStrategy(Protocol):
    def propose(self, n: int, measured: set[str]) -> list[Candidate]:
        """Up to ``n`` candidates whose trace keys are not in ``measured``."""
        ...

    def update(self, candidates: list[Candidate], costs: list[float]) -> None:
        """Learn from measured candidates (``costs`` in seconds; failures are large)."""
        ...

    def seed(self, traces: list[Any], costs: list[float]) -> None:
        """Learn from records measured before this run (a resumed or shared log)."""
        ...
