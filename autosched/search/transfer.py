"""Logs across chips: records of the same workload measured on other chips warm-start a search.

A record is never applied to another target silently. ``load_transfer`` splits what the given logs
hold for one workload into records of *other* chips (``foreign``: they train the cost model with
their own chip facts as features, and their best schedules are re-measured on the target) and
records of *this* chip (``same_chip``: folded in like a resumed log, not measured again), and
:meth:`TransferSet.describe` says in one line how many records from which chips are used.

Example::

    ts = load_transfer(["tuning_logs/a.jsonl"], workload_key=inst.key, fingerprint=fp)
    print(ts.describe("matmul", fp))   # "transfer: matmul: 64 record(s) from 1 other chip ..."
    for rec in best_foreign(ts.foreign, 16):
        ...                            # re-measure rec.trace on the target
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chip import ChipInfo, chip_from_json
from ..errors import FAILED_COST
from ..records.log import LogProblem, load_records, standing, trace_key
from ..records.record import TuningRecord
from .guided import GuidedModel


@dataclass
class TransferSet:
    """What ``--transfer-from`` logs hold for one workload, split by chip."""

    paths: list[str]
    foreign: list[TuningRecord] = field(default_factory=list)  # other chips: train and seed
    same_chip: list[TuningRecord] = field(default_factory=list)  # this chip: like a resumed log
    problems: list[LogProblem] = field(default_factory=list)
    other_workloads: int = 0

    @property
    def chips(self) -> Counter[str]:
        """Foreign records per chip fingerprint."""
        return Counter(r.fingerprint for r in self.foreign)

    def describe(self, workload: str, fingerprint: str, reseeded: int = 0) -> str:
        """The one line a user sees: how many records from which chips, or why nothing is used."""
        logs = ", ".join(self.paths)
        if not self.foreign:
            why = f"{len(self.same_chip)} for this chip, " if self.same_chip else ""
            return (
                f"transfer: {logs} has no records of {workload} for chips other than {fingerprint} "
                f"({why}{self.other_workloads} of other workloads): nothing to transfer"
            )
        chips = ", ".join(f"{fp} ({n})" for fp, n in sorted(self.chips.items()))
        ok = sum(r.ok for r in self.foreign)
        line = (
            f"transfer: {workload}: {len(self.foreign)} record(s) ({ok} ok) from {len(self.chips)} other "
            f"chip(s) train the cost model: {chips}; results are measured anew on {fingerprint}"
        )
        if reseeded:
            line += f", the best {reseeded} foreign schedule(s) right after its own default"
        return line


def load_transfer(
    paths: Sequence[str | Path], *, workload_key: str, fingerprint: str, workload: Any = None
) -> TransferSet:
    """Records of ``workload_key`` in ``paths``, split into other chips and this one (``fingerprint``).

    With ``workload`` (the instance), records that do not fit it are problems, not records (issue 19).
    """
    ts = TransferSet([str(p) for p in paths])
    for path in paths:
        res = load_records(path, workload_key=workload_key, workload=workload)
        ts.problems.extend(res.problems)
        ts.other_workloads += res.other_workloads
        for rec in standing(res.records):  # a schedule of a finalists round by its re-timing, once
            if rec.fingerprint != fingerprint and (rec.chip.get("extra") or {}).get("simulated"):
                continue  # modeled times are no prior for another chip
            (ts.same_chip if rec.fingerprint == fingerprint else ts.foreign).append(rec)
    return ts


def best_foreign(records: Iterable[TuningRecord], k: int) -> list[TuningRecord]:
    """Up to ``k`` ok records with distinct traces, fastest first.

    Speed is relative to the best record of the same chip, so a fast chip's log does not crowd out
    a slow one's; of a trace measured on several chips, the relatively best record is kept.
    """
    ok = [r for r in records if r.ok]
    best_of_chip: dict[str, float] = {}
    for r in ok:
        best_of_chip[r.fingerprint] = min(best_of_chip.get(r.fingerprint, r.mean_cost), r.mean_cost)
    by_trace: dict[str, tuple[float, TuningRecord]] = {}
    for r in ok:
        rel = r.mean_cost / best_of_chip[r.fingerprint] if best_of_chip[r.fingerprint] > 0 else 1.0
        key = trace_key(r.trace)
        if key not in by_trace or rel < by_trace[key][0]:
            by_trace[key] = (rel, r)
    ranked = sorted(by_trace.values(), key=lambda t: t[0])  # stable: ties keep log order
    return [r for _, r in ranked[: max(0, k)]]


# --- transfer that never hurts (issue 20): a prior, not an anchor ---------------------------------------
def chip_similarity(a: ChipInfo, b: ChipInfo) -> float:
    """How alike two chips are, in [0, 1], from their facts: kind, ISA, vector bits, cores, caches, peak.

    1.0 for the same facts; a GPU and a CPU score 0.1 at most. Example: the native AVX-512 CPU and
    ``-mcpu=haswell`` on it differ in vector bits and ISA features only, about 0.7.
    """

    def ratio(x: float, y: float) -> float:
        return 1.0 if x <= 0 or y <= 0 else min(x, y) / max(x, y)

    fa, fb = set(a.features), set(b.features)
    isa = len(fa & fb) / len(fa | fb) if fa | fb else 1.0
    parts = [
        (2.0, ratio(a.vector_bits, b.vector_bits)),
        (1.0, isa),
        (1.0, ratio(a.cores, b.cores)),
        (0.5, ratio(a.l1_bytes, b.l1_bytes)),
        (0.5, ratio(a.l2_bytes, b.l2_bytes)),
        (1.0, ratio(a.peak_gflops, b.peak_gflops)),
    ]
    score = sum(w * v for w, v in parts) / sum(w for w, _ in parts)
    return score if a.kind == b.kind else 0.1 * score


def probe_score(probe_costs: Sequence[float], own_costs: Sequence[float], min_own: int = 4) -> float | None:
    """How the source's best schedules rank among this chip's own results, like a correlation in
    [-1, 1]: ``2 p - 1`` for the best probe's share ``p`` of own results it beats (ties half), less
    ``1/sqrt(m)`` for ``m`` own results (a random schedule beats all of a few by luck). None before
    ``min_own`` own results (a default schedule measured beside the probes is no yardstick). The best
    of A among B's fastest is strong evidence; all of them in B's slower half is a verdict."""
    own = np.asarray([c for c in own_costs if math.isfinite(c) and c < FAILED_COST], dtype=np.float64)
    if len(own) < min_own or not probe_costs:
        return None
    best = min(probe_costs)
    if not math.isfinite(best) or best >= FAILED_COST:
        p = 0.0  # the source's best did not even run here
    else:
        p = float(np.mean((own > best) + 0.5 * (own == best)))
    return 2.0 * p - 1.0 - 1.0 / math.sqrt(len(own))


def attach_foreign(strategy: Any, records: Sequence[TuningRecord], chip: ChipInfo, top: int,
                   probes: int = 2, chunk: int = 4, pretrained: Any = None, fingerprint: str = ""
                   ) -> tuple[GuidedModel, int]:  # fmt: skip
    """Guide ``strategy`` (an EvolutionarySearch) by other chips' ``records``: they train a prior
    weighted by how alike their chips are to ``chip``, and the source is judged by its own best.

    The best ``probes`` foreign schedules are measured first (right after this chip's default, when
    the strategy is wrapped in DefaultFirst), on their own, whatever the prior says, and held back
    from the search until this chip's first batch judges them (:func:`probe_score`, the guide's
    ``probe_trust``). Ranked badly, they are never learnt: the search runs exactly as from scratch,
    ``probes`` trials later. Ranked >= 0.3 (the source's best among this chip's fastest), they are
    learnt, the foreign decisions join the starting populations, the prior has a say, and ``chunk``
    more are queued after each batch, up to ``top`` in all. A verdict below 0.3, first or on a later
    chunk, dismisses the source for good: nothing more is queued, its decisions leave the starting
    populations and the prior loses its say, so the search goes on from this chip's own results (the
    source's schedules measured here among them) and is not anchored to the source's family. (With
    the anchor kept, PoCL's depthwise conv and softmax ended 64 trials up to 2x slower than from
    scratch; dismissal alone did not close that gap, see EvolutionarySearch's family race.)
    With a ``pretrained`` model, the search this guide overrides is itself guided by it
    (:func:`attach_pretrained`, ``fingerprint`` the target's): it proposes from the first batch, while
    the source waits for its probes' verdict, and it keeps its say if the source is dismissed.
    Returns the guide and how many schedules were queued before any result."""
    if pretrained is not None:
        attach_pretrained(strategy, pretrained, fingerprint)
    counts = Counter(r.fingerprint for r in records)
    facts = {r.fingerprint: chip_from_json(r.chip) for r in records}
    sim = sum(n * chip_similarity(facts[fp], chip) for fp, n in counts.items()) / max(1, sum(counts.values()))
    strategy = _model_owner(strategy)
    guide = GuidedModel(strategy.model, similarity=sim)
    state = {"queued": 0}
    probe_keys: set[str] = set()
    own_costs: list[float] = []  # this chip's results of its own search
    unjudged: list[float] = []  # probe results not yet judged against them
    held: list[tuple[Any, float]] = []  # the first probes' results, not learnt before their verdict

    seeds = getattr(strategy, "_foreign_seeds", None)  # the foreign decisions that start populations
    held_seeds: list[Any] = []  # ... held back until the source has earned trust here

    def trusted() -> bool:
        return guide.probe_trust is not None and guide.probe_trust >= 0.3

    def queue(k: int) -> None:
        nxt = best_foreign(records, min(top, state["queued"] + k))[state["queued"] :]
        state["queued"] += len(nxt)
        probe_keys.update(trace_key(r.trace) for r in nxt)
        if nxt:
            strategy.seed_foreign(nxt, len(nxt))  # queues them; the prior is already trained (frozen)
        if isinstance(seeds, list) and not trusted():
            held_seeds.extend(seeds)
            seeds.clear()

    def dismiss() -> None:
        guide.dismissed = True
        if isinstance(seeds, list):
            seeds.clear()
        held_seeds.clear()

    def observe(cands: list[Any], costs: list[float]) -> tuple[list[Any], list[float]] | None:
        learn: list[tuple[Any, float]] = []
        for cand, cost in zip(cands, costs):
            probe = trace_key(cand.trace) in probe_keys
            (unjudged if probe else own_costs).append(float(cost))
            (held if probe and guide.probe_trust is None else learn).append((cand, cost))
        score = probe_score(unjudged, own_costs)
        if score is None:
            return [c for c, _ in learn], [x for _, x in learn]
        unjudged.clear()
        if guide.probe_trust is None:  # the first probes' verdict judges the source
            guide.probe_trust = score
            if trusted():
                learn = held + learn  # this chip's measurements after all: the search learns them
                if isinstance(seeds, list):  # the foreign decisions start populations
                    seeds.extend(held_seeds)
                    held_seeds.clear()
            held.clear()  # ranked badly: never learnt, the search is as from scratch
        if score < 0.3 or not trusted():
            dismiss()  # a chunk that ranks badly: the source's next best are no better
        elif not guide.dismissed and state["queued"] < top:
            queue(chunk)
        return [c for c, _ in learn], [x for _, x in learn]

    strategy.model = guide
    strategy.seed_foreign(records, 0)  # trains the prior; nothing queued yet
    guide.prior_frozen = True  # later chunks only queue: their records are in the prior already
    queue(min(probes, top))
    observers = getattr(strategy, "observers", None)
    if isinstance(observers, list):
        observers.append(observe)
        strategy.queue_alone = state["queued"] > 0  # the probes are measured on their own
    return guide, state["queued"]


def attach_pretrained(strategy: Any, pretrained: Any, fingerprint: str) -> GuidedModel:
    """Guide ``strategy`` by a pretrained model from the first round; this chip's results take over."""
    strategy = _model_owner(strategy)
    known = fingerprint in (getattr(pretrained, "header", {}) or {}).get("chips", [])
    guide = GuidedModel(strategy.model, pretrained, similarity=1.0 if known else 0.8, guide_untrained=True)
    strategy.model = guide
    return guide


def _model_owner(strategy: Any) -> Any:
    """The search that holds the model: wrappers (graph.tune_model's default-first) forward attributes
    to ``inner``, and a model set on the wrapper would never be used."""
    while "model" not in vars(strategy) and hasattr(strategy, "inner"):
        strategy = strategy.inner
    return strategy
