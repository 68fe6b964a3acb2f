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

_OWN = frozenset({"inner", "default", "untuned", "decisions", "pending"})


class DefaultFirst:
    """Wraps a strategy (``inner``); everything but the first proposal is the inner strategy's, and
    attributes read or set on the wrapper (``model``, ``observers``, ``queue_alone``...) are its. A
    transfer's probe batch (``queue_alone``) comes right after the default, in the same batch: the
    target's own first choice is measured first with or without a foreign log, so a transfer run is
    never behind a run from scratch at its first trial (issue 20: on ``-mcpu=haswell`` the default
    was within 90% of the best, and two probes measured before it cost two trials). The search's
    first batch is drawn in that same call, before any result, as it is without probes, and proposed
    next: after the probes, a transfer run whose source is ignored measures what a run from scratch
    does, trial for trial."""

    def __init__(self, inner: Any, default: Trace | None, decisions: Decisions | None = None):
        object.__setattr__(self, "inner", inner)
        object.__setattr__(self, "default", default)  # None once proposed
        object.__setattr__(self, "untuned", default)  # kept: the default joins the finalists round
        object.__setattr__(self, "decisions", dict(decisions or {}))
        object.__setattr__(self, "pending", [])  # the search's first batch, drawn beside the probes

    def propose(self, n: int, measured: set[str]) -> list[Candidate]:
        if n < 1:
            return list(self.inner.propose(n, measured))  # nothing asked: the default waits
        if self.pending:
            out = [c for c in self.pending if trace_key(c.trace) not in measured][:n]
            object.__setattr__(self, "pending", [])
            return out
        if self.default is None or trace_key(self.default) in measured:
            object.__setattr__(self, "default", None)  # logged already (a resumed run): not again
            return list(self.inner.propose(n, measured))
        first = Candidate(self.default, self.decisions)
        object.__setattr__(self, "default", None)
        if n < 2:
            return [first]
        seen = measured | {trace_key(first.trace)}
        has_probes = getattr(self.inner, "queue_alone", False)
        rest = list(self.inner.propose(n - 1, seen))
        if has_probes:  # the search's own first batch, drawn now as without probes, measured next
            object.__setattr__(
                self, "pending", list(self.inner.propose(n - 1, seen | {trace_key(c.trace) for c in rest}))
            )
        return [first, *rest]

    def __getattr__(self, name: str) -> Any:  # update, seed, seed_foreign, converged, model...
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)
