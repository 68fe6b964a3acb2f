"""A search strategy that proposes the workload's default schedule before anything else.

The default schedule (:func:`~autosched.search_space.default.default_candidate`) is what the op
library, ``autosched build`` and a compiled model run for a workload without records. Measuring it
first gives a tuning run a result from its first batch and a log whose best record is never slower
than what would run without it (a 64-trial search of a GEMM can end below the 0.95x-numpy default);
its decisions, where the sketch has them, join the search's starting populations, so the search
also starts in the default's family rather than only where random samples land.
"""

from __future__ import annotations

from typing import Any

from ..records.log import trace_key
from ..search_space.sketch import Decisions
from ..search_space.trace import Trace
from .strategy import Candidate

_OWN = frozenset({"inner", "default", "decisions"})


class DefaultFirst:
    """Wraps a strategy (``inner``); everything but the first proposal is the inner strategy's, and
    attributes read or set on the wrapper (``model``, ``observers``, ``queue_alone``...) are its. A
    transfer's probe batch (``queue_alone``) still goes first and alone; the default comes next."""

    def __init__(self, inner: Any, default: Trace | None, decisions: Decisions | None = None):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "decisions", dict(decisions or {}))

    def propose(self, n: int, measured: set[str]) -> list[Candidate]:
        if getattr(self.inner, "queue_alone", False):  # transfer's probes go first, on their own
            return list(self.inner.propose(n, measured))
        if n < 1:
            return list(self.inner.propose(n, measured))  # nothing asked: the default waits
        if self.default is None or trace_key(self.default) in measured:
            object.__setattr__(self, "default", None)  # logged already (a resumed run): not again
            return list(self.inner.propose(n, measured))
        first = Candidate(self.default, self.decisions)
        object.__setattr__(self, "default", None)
        rest = self.inner.propose(n - 1, measured | {trace_key(first.trace)}) if n > 1 else []
        return [first, *rest]

    def __getattr__(self, name: str) -> Any:  # update, seed, seed_foreign, converged, model...
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)
