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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..chip import ChipInfo, chip_from_json
from ..records.log import LogProblem, load_records, trace_key
from ..records.record import TuningRecord


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
            line += f", the best {reseeded} foreign schedule(s) first"
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
        for rec in res.records:
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


def _avg_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 0, ties sharing their mean rank (else tied rows would correlate by their order)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return np.asarray(sums[inverse] / counts[inverse], dtype=np.float64)


def rank_correlation(pred: np.ndarray, labels: np.ndarray) -> float:
    """Spearman's rho of predictions against labels (higher is faster); 0.0 when either is constant."""
    pred, labels = np.asarray(pred, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    if len(pred) < 3 or np.ptp(pred) == 0 or np.ptp(labels) == 0:
        return 0.0
    return float(np.corrcoef(_avg_ranks(pred), _avg_ranks(labels))[0, 1])


def _ranks01(x: np.ndarray) -> np.ndarray:
    if len(x) < 2:
        return np.zeros(len(x))
    return _avg_ranks(x) / (len(x) - 1.0)


class GuidedModel:
    """The search's own cost model, guided by a prior whose say falls as this chip's results arrive.

    The prior is either a model trained on other chips' records (``add`` of a group ``"<key>@<chip>"``,
    what :meth:`EvolutionarySearch.seed_foreign` writes) or a pretrained model. Scores mix the two
    models' ranks with the prior's weight ``similarity * trust * half_life / (half_life + n)``, ``n``
    the rows measured here; ``trust`` is the rank correlation of the prior's predictions with this
    chip's measurements (judged once ``min_judge`` of them are in), so a source whose schedules rank
    badly here stops counting. Until this chip has results, the prior guides the search only with
    ``guide_untrained`` (a pretrained model: the user's choice); foreign records otherwise only queue
    their best schedules. ``on_judged(trust)`` is called after each judgement (to queue more foreign
    schedules while they are worth it).
    """

    def __init__(
        self,
        own: Any,
        prior: Any = None,
        *,
        similarity: float = 1.0,
        half_life: int = 48,
        min_judge: int = 8,
        guide_untrained: bool = False,
        on_judged: Callable[[float], None] | None = None,
    ):
        self.own = own
        self.prior = prior
        self.similarity = float(similarity)
        self.half_life = half_life
        self.min_judge = min_judge
        self.guide_untrained = guide_untrained
        self.on_judged = on_judged
        self.trust: float | None = None
        self._rows: list[np.ndarray] = []
        self._costs: list[float] = []
        self._foreign_groups: set[str] = set()
        self.prior_frozen = False  # foreign rows added after this are ignored

    # the XGBModel interface the searches use ------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return int(self.own.n_samples) + int(getattr(self.prior, "n_samples", 0))

    @property
    def n_own(self) -> int:
        return len(self._costs)

    @property
    def trained(self) -> bool:
        if self.own.trained:
            return True  # the prior is mixed in (or not) by predict
        return self._prior_ready and self.guide_untrained  # foreign records: queued schedules, no guidance

    @property
    def _prior_ready(self) -> bool:
        return self.prior is not None and bool(self.prior.trained)

    def add(self, group: str, features: np.ndarray, costs: Sequence[float]) -> None:
        if "@" in group:  # another chip's records: they train the prior only
            if self.prior_frozen:
                return
            if self.prior is not None and not hasattr(self.prior, "add"):
                self.own.add(group, features, costs)  # a pretrained prior is fixed: as before issue 20
                return
            if self.prior is None:
                from ..cost_model.xgb import XGBModel

                self.prior = XGBModel("rank", seed=getattr(self.own, "seed", 0))
            self._foreign_groups.add(group)
            self.prior.add(group, features, costs)
            return
        self.own.add(group, features, costs)
        X = np.asarray(features, dtype=np.float64).reshape(len(costs), -1)
        self._rows.extend(X)
        self._costs.extend(float(c) for c in costs)

    def update(self, group: str, features: np.ndarray, costs: Sequence[float]) -> None:
        self.add(group, features, costs)
        self.fit()

    def fit(self) -> None:
        if self._foreign_groups and hasattr(self.prior, "fit"):
            self.prior.fit()
            self._foreign_groups.clear()
        self.own.fit()
        self._judge()

    def _judge(self) -> None:
        if not self._prior_ready or self.n_own < self.min_judge:
            return
        from ..cost_model.xgb import relative_labels

        labels = relative_labels(self._costs)
        rho = rank_correlation(self.prior.predict(np.stack(self._rows)), labels)
        # less its standard error, so a few lucky rows do not buy the prior a say
        self.trust = rho - 1.0 / math.sqrt(self.n_own - 1)
        if self.on_judged is not None:
            self.on_judged(self.trust)

    def weight(self) -> float:
        """The prior's share of the scores now: 0 without a prior or once it ranks this chip badly."""
        if not self._prior_ready:
            return 0.0
        if self.trust is None:  # not judged yet: a pretrained model guides, foreign records wait
            return self.similarity if self.guide_untrained else 0.0
        trust = min(1.0, max(0.0, (self.trust - 0.1) / 0.5))
        return self.similarity * trust * self.half_life / (self.half_life + self.n_own)

    def predict(self, features: np.ndarray) -> np.ndarray:
        w = self.weight()
        if w <= 0 or not self._prior_ready:
            return np.asarray(self.own.predict(features), dtype=np.float64)
        prior = _ranks01(np.asarray(self.prior.predict(features), dtype=np.float64))
        if not self.own.trained:
            return prior
        own = _ranks01(np.asarray(self.own.predict(features), dtype=np.float64))
        return (1 - w) * own + w * prior

    def describe(self) -> str:
        trust = "not judged yet" if self.trust is None else f"rank correlation {self.trust:.2f} here"
        return f"prior weight {self.weight():.2f} (similarity {self.similarity:.2f}, {trust})"


def attach_foreign(strategy: Any, records: Sequence[TuningRecord], chip: ChipInfo, top: int,
                   chunk: int = 4) -> tuple[GuidedModel, int]:  # fmt: skip
    """Guide ``strategy`` (an EvolutionarySearch) by other chips' ``records``: they train a prior
    weighted by how alike their chips are to ``chip``. Nothing foreign is measured until this chip's
    first results judge the prior: while it ranks them well (trust >= 0.3) its best ``chunk``
    schedules are queued after each batch, up to ``top`` in all, and their decisions join the starting
    populations; a source that ranks badly costs no trial and leaves the search as it would run from
    scratch. Returns the guide and how many schedules were queued before any result (0)."""
    counts = Counter(r.fingerprint for r in records)
    facts = {r.fingerprint: chip_from_json(r.chip) for r in records}
    sim = sum(n * chip_similarity(facts[fp], chip) for fp, n in counts.items()) / max(1, sum(counts.values()))
    state = {"queued": 0, "judged_at": -1}
    guide = GuidedModel(strategy.model, similarity=sim)

    strategy = _model_owner(strategy)
    seeds = getattr(strategy, "_foreign_seeds", None)  # the foreign decisions that start populations
    held: list[Any] = []  # ... held back until the source has earned trust here

    def more(trust: float) -> None:
        if isinstance(seeds, list):
            if trust >= 0.3 and held:
                seeds.extend(held)
                held.clear()
            elif trust < 0.3 and seeds:
                held.extend(seeds)
                seeds.clear()
        if trust < 0.3 or state["queued"] >= top or guide.n_own == state["judged_at"]:
            return
        state["judged_at"] = guide.n_own
        nxt = best_foreign(records, min(top, state["queued"] + chunk))[state["queued"] :]
        state["queued"] += len(nxt)
        if nxt:
            strategy.seed_foreign(nxt, len(nxt))  # queues them; the prior is already trained (frozen)

    strategy.model = guide
    strategy.seed_foreign(records, 0)  # trains the prior; nothing queued before this chip judges it
    if isinstance(seeds, list):
        held.extend(seeds)
        seeds.clear()
    guide.prior_frozen = True  # later chunks only queue: their records are in the prior already
    guide.on_judged = more
    return guide, 0


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
