"""A measurer that measures nothing: deterministic costs from a function of the trace, for search tests.

Example::

    m = FakeMeasurer(lambda trace: 1e-3 * (1 + len(trace)), errors={"timeout": 0.1}, seed=0)
    results = m.measure(task, traces)     # same interface as LocalMeasurer
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import AutoschedError
from ..search_space.trace import trace_key
from .result import ERROR_KINDS, MeasureResult
from .task import MeasureTask


class FakeMeasurer:
    """Costs from ``cost_fn(trace)`` (seconds); errors injected by kind with given probabilities.

    The error draw depends only on ``seed`` and the trace, so a run is reproducible and the same trace
    fails the same way every time. ``cost_fn`` may also raise an AutoschedError (a ScheduleError, say):
    that becomes a "schedule" result. ``calls`` counts the traces measured.
    """

    def __init__(
        self,
        cost_fn: Callable[[Any], float],
        *,
        errors: Mapping[str, float] | None = None,
        repeat: int = 3,
        noise: float = 0.0,
        seed: int = 0,
    ):
        errors = dict(errors or {})
        for kind, p in errors.items():
            if kind not in ERROR_KINDS or not 0 <= p <= 1:
                raise ValueError(
                    f"FakeMeasurer: errors maps kinds {ERROR_KINDS} to probabilities, got {kind}: {p}"
                )
        if sum(errors.values()) > 1:
            raise ValueError(f"FakeMeasurer: error probabilities add up to more than 1: {errors}")
        self.cost_fn = cost_fn
        self.errors = errors
        self.repeat = repeat
        self.noise = noise
        self.seed = seed
        self.calls = 0

    def measure(self, task: MeasureTask, traces: Sequence[Any]) -> list[MeasureResult]:
        return [self._one(task, t) for t in traces]

    def _one(self, task: MeasureTask, trace: Any) -> MeasureResult:
        self.calls += 1
        digest = hashlib.sha256(f"{self.seed}|{task.name}|{trace_key(trace)}".encode()).digest()
        rng = random.Random(digest)
        u, acc = rng.random(), 0.0
        for kind, p in self.errors.items():
            acc += p
            if u < acc:
                return MeasureResult((), kind, f"injected {kind} error")
        try:
            cost = float(self.cost_fn(trace))
        except AutoschedError as e:
            return MeasureResult((), "schedule", f"{type(e).__name__}: {e}")
        costs = tuple(cost * (1 + self.noise * (2 * rng.random() - 1)) for _ in range(self.repeat))
        return MeasureResult(costs)

    def close(self) -> None:
        pass
