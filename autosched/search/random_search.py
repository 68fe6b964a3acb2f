"""Random search: fresh sketch samples, never a schedule twice. The baseline of every comparison."""

from __future__ import annotations

import random
from typing import Any

from ..records.log import trace_key
from ..search_space.sketch import SketchPolicy
from .strategy import Candidate


class RandomSearch:
    def __init__(self, policy: SketchPolicy, seed: int = 0):
        self.policy = policy
        self.rng = random.Random(seed)

    def propose(self, n: int, measured: set[str]) -> list[Candidate]:
        out: list[Candidate] = []
        seen = set(measured)
        for _ in range(max(50, 20 * n)):  # small spaces run out: give up rather than loop forever
            if len(out) == n:
                break
            sch, decisions = self.policy.sample(self.rng)
            key = trace_key(sch.trace)
            if key not in seen:
                seen.add(key)
                out.append(Candidate(sch.trace, decisions))
        return out

    def update(self, candidates: list[Candidate], costs: list[float]) -> None:
        pass

    def seed(self, traces: list[Any], costs: list[float]) -> None:
        pass
