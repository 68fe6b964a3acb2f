"""Evolutionary search guided by a cost model that retrains on every measured batch.

Each :meth:`EvolutionarySearch.propose` round:

1. starts a population from the best measured candidates, the best unmeasured ones of the last
   round (rescored by the newer model) and fresh sketch samples;
2. for ``generations`` rounds scores it with the model, picks parents in proportion to their score
   and mutates their decisions (:mod:`autosched.search_space.mutate`) with ``mutation_prob``;
3. returns the best-scored candidates never measured, with a fraction ``eps_greedy`` of fresh
   random samples so that a wrong model cannot starve parts of the space.

Until the model has seen one successful measurement, rounds are plain random samples. Candidates
are lowered once to compute their features (:mod:`autosched.cost_model.features`); features are
cached by trace key. ``converged`` turns true when ``patience`` rounds in a row did not improve the
best cost by ``min_improvement``.

:meth:`EvolutionarySearch.seed_foreign` takes records of other chips (``--transfer-from``): they
train the model with their own chip facts, their best traces are proposed first (re-measured here),
and their decisions, where recorded, join the starting populations. Measured here, they are not
counted in the family race (:mod:`.families`): another chip's picked best would set the bar for this
search's own samples (on PoCL, a CPU schedule family's picks put the GPU-style families out of the race).

Example::

    search = EvolutionarySearch(SketchPolicy(outputs), seed=0)
    batch = search.propose(16, measured=set())
    search.update(batch, costs)
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..chip import ChipInfo
from ..cost_model.features import DEFAULT_CHIP, FEATURE_COUNT, candidate_features
from ..errors import FAILED_COST, AutoschedError, LowerError, ScheduleError
from ..lower.pipeline import lower
from ..records.log import trace_key
from ..records.record import TuningRecord
from ..search_space.mutate import mutate
from ..search_space.schedule import Schedule, replay
from ..search_space.sketch import Decisions, SketchPolicy
from ..search_space.trace import Trace
from ..te.graph import topo_order
from ..te.key import workload_key
from ..te.tensor import PlaceholderOp, Tensor
from .families import FamilyStats, balance, crossed, family_of, interleave, keep_best
from .strategy import Candidate

CACHE_SIZE = 20000  # feature vectors kept (about 2.6 KB each)
_Batch = tuple[list[Candidate], list[float]]


@dataclass(frozen=True, eq=False)
class _Individual:
    decisions: Decisions
    trace: Trace
    key: str
    features: np.ndarray


class EvolutionarySearch:
    """Model-guided search over sketch decisions; a :class:`~.strategy.SearchStrategy`.

    Defaults are sized for Python lowering (a few ms a candidate): a round evaluates about
    ``population * generations`` candidates, a second or two, well under the time to build and time
    a batch. ``model`` defaults to an :class:`~autosched.cost_model.xgb.XGBModel`; pass one model
    to several searches to share what it learns across workloads.
    """

    def __init__(
        self,
        policy: SketchPolicy,
        seed: int = 0,
        target: Any = None,
        model: Any = None,
        population: int = 128,
        generations: int = 3,
        mutation_prob: float = 0.85,
        eps_greedy: float = 0.05,
        *,
        chip: ChipInfo | None = None,
        init_measured_ratio: float = 0.25,
        patience: int = 10,
        min_improvement: float = 0.01,
    ):
        if population < 2 or generations < 1:
            raise ValueError(f"EvolutionarySearch: population >= 2 and generations >= 1 needed, got "
                             f"{population} and {generations}")  # fmt: skip
        if not 0 <= mutation_prob <= 1 or not 0 <= eps_greedy <= 1:
            raise ValueError("EvolutionarySearch: mutation_prob and eps_greedy must be in [0, 1]")
        self.policy = policy
        self.rng = random.Random(seed)
        self.population = population
        self.generations = generations
        self.mutation_prob = mutation_prob
        self.eps_greedy = eps_greedy
        self.init_measured_ratio = init_measured_ratio
        self.patience = patience
        self.min_improvement = min_improvement
        self.chip = chip or _chip_of(target)
        if model is None:
            from ..cost_model.xgb import XGBModel

            model = XGBModel(seed=seed)
        self.model = model
        inputs = [Tensor(op) for op in topo_order(policy.outputs) if isinstance(op, PlaceholderOp)]
        self.args = [*inputs, *policy.outputs]
        self.group = workload_key(self.args)
        self.best_cost = math.inf
        self.rounds = 0  # update() calls
        self._stale = 0
        self._cache: OrderedDict[str, np.ndarray | None] = OrderedDict()
        self._measured: list[tuple[float, str, Decisions]] = []  # the best, for seeding populations
        self._families = FamilyStats()  # each structural family's count and best (families.py)
        self._carry: list[_Individual] = []
        # --- logs across chips (issue 6): see seed_foreign ---
        self._queue: list[Candidate] = []  # foreign schedules to measure before anything else
        self._foreign_keys: set[str] = set()  # their trace keys: no samples of this search's families
        self._foreign_seeds: list[Decisions] = []  # their decisions, for starting populations
        # called with each measured batch before the model learns it; one may return the batch to learn
        # instead (issue 20: transfer holds its probe schedules back until they are judged)
        self.observers: list[Callable[[list[Candidate], list[float]], _Batch | None]] = []
        self.queue_alone = False  # the next proposal is the queued schedules alone (transfer's probes)

    # Candidates -----------------------------------------------------------------------------------
    def _features(self, key: str, sch: Schedule) -> np.ndarray | None:
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        try:
            feats: np.ndarray | None = candidate_features(lower(sch, self.args), self.chip)
        except (ScheduleError, LowerError):
            feats = None
        self._cache[key] = feats
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return feats

    def _make(self, decisions: Decisions | None) -> _Individual | None:
        try:
            sch, used = self.policy.sample(self.rng, decisions)
        except ScheduleError:
            return None
        key = trace_key(sch.trace)
        feats = self._features(key, sch)
        return None if feats is None else _Individual(used, sch.trace, key, feats)

    def _fresh(self, n: int, seen: set[str]) -> list[_Individual]:
        out: list[_Individual] = []
        for _ in range(max(50, 20 * n)):  # a small space runs out: give up rather than loop forever
            if len(out) >= n:
                break
            ind = self._make(None)
            if ind is not None and ind.key not in seen:
                seen.add(ind.key)
                out.append(ind)
        return out

    # Search ---------------------------------------------------------------------------------------
    def propose(self, n: int, measured: set[str]) -> list[Candidate]:
        """Up to ``n`` candidates, none of whose trace keys is in ``measured``."""
        seen = set(measured)
        queued = self._pop_queue(n, seen)  # foreign schedules first (seed_foreign)
        n -= len(queued)
        if queued and self.queue_alone:  # measured on their own: the search's first batch is as without
            self.queue_alone = False
            return queued
        if n <= 0:
            return queued
        if not self.model.trained:
            picks = self._fresh(n, seen)
        else:
            ranked = self._evolve(seen)
            n_model = n - min(n, round(n * self.eps_greedy))
            picks = balance(ranked, n_model, lambda p: family_of(p.decisions), self._families)
            seen.update(p.key for p in picks)
            self._carry = [p for p in ranked if p.key not in seen][: self.population // 2]
            picks += self._fresh(n - len(picks), seen)
        return queued + [Candidate(p.trace, p.decisions) for p in picks]

    def _initial(self, seen: set[str]) -> list[_Individual]:
        pop: dict[str, _Individual] = {}
        n_init = int(self.population * self.init_measured_ratio)
        measured = interleave(self._measured, lambda t: family_of(t[2]))  # every family seeded
        starts = [d for _, _, d in measured[:n_init]] + self._foreign_seeds[:n_init]
        for family in self._families.racing():  # the best tiles under every family's structure
            starts += [crossed(d, family) for _, _, d in self._measured[:2]]  # type: ignore[arg-type]
        for decisions in starts:
            ind = self._make(decisions)
            if ind is not None:
                pop.setdefault(ind.key, ind)
        for ind in self._carry:
            if ind.key not in seen:
                pop.setdefault(ind.key, ind)
        for _ in range(3 * self.population):
            if len(pop) >= self.population:
                break
            ind = self._make(None)
            if ind is not None:
                pop.setdefault(ind.key, ind)
        return list(pop.values())

    def _evolve(self, seen: set[str]) -> list[_Individual]:
        """Every unmeasured candidate met, best predicted first."""
        pop = self._initial(seen)
        pool: dict[str, tuple[float, _Individual]] = {}
        for gen in range(self.generations + 1):
            if not pop:
                break
            scores = self.model.predict(np.stack([p.features for p in pop]))
            for ind, s in zip(pop, scores):
                if ind.key not in seen:
                    pool[ind.key] = (float(s), ind)
            if gen == self.generations:
                break
            pop = self._next_generation(pop, scores)
        ranked = sorted(pool.values(), key=lambda t: -t[0])  # stable: ties keep discovery order
        return [ind for _, ind in ranked]

    def _next_generation(self, pop: list[_Individual], scores: np.ndarray) -> list[_Individual]:
        lo, hi = float(scores.min()), float(scores.max())
        weights = [0.05 + ((float(s) - lo) / (hi - lo) if hi > lo else 1.0) for s in scores]
        nxt: dict[str, _Individual] = {}
        parents = self.rng.choices(pop, weights=weights, k=3 * self.population)
        for parent in parents:
            if len(nxt) >= self.population:
                break
            child: _Individual | None = parent
            if self.rng.random() < self.mutation_prob:
                decisions = mutate(parent.decisions, self.rng)
                child = self._make(decisions) if decisions is not None else None
            if child is not None:
                nxt.setdefault(child.key, child)
        return list(nxt.values())

    # Feedback -------------------------------------------------------------------------------------
    def _trace_features(self, trace: Any) -> np.ndarray | None:
        try:
            sch = replay(self.policy.outputs, trace)
        except AutoschedError:
            return None
        return self._features(trace_key(sch.trace), sch)

    def update(self, candidates: list[Candidate], costs: list[float]) -> None:
        """Learn from a measured batch: retrain the model on all data so far."""
        measured = len(candidates)
        for observe in self.observers:
            kept = observe(candidates, costs)
            if kept is not None:
                candidates, costs = kept
        if measured and not candidates:
            return  # a batch held back whole (transfer's probes): nothing learnt, no round counted
        rows, ys = [], []
        for cand, cost in zip(candidates, costs):
            key = trace_key(cand.trace)
            feats = self._cache[key] if key in self._cache else self._trace_features(cand.trace)
            if feats is None:
                continue
            rows.append(feats)
            ys.append(cost)
            if cand.decisions and key not in self._foreign_keys:
                # another chip's picked best are no sample of their family here: counted, they would
                # set the bar that this search's own samples of other families are judged by
                self._families.add(family_of(cand.decisions), cost)
            if cost < FAILED_COST and cand.decisions:
                self._measured.append((cost, key, dict(cand.decisions)))
        self._measured.sort(key=lambda t: (t[0], t[1]))
        self._measured = keep_best(self._measured, self.population, lambda t: family_of(t[2]))
        if rows:
            self.model.update(self.group, np.stack(rows), ys)
        self._track(min(costs, default=math.inf))

    def _track(self, cost: float) -> None:
        self.rounds += 1
        if cost < self.best_cost * (1 - self.min_improvement):
            self._stale = 0
        else:
            self._stale += 1
        self.best_cost = min(self.best_cost, cost)

    def seed(self, traces: Sequence[Any], costs: Sequence[float]) -> None:
        """Train on earlier records (traces replayed and lowered for their features)."""
        rows, ys = [], []
        for trace, cost in zip(traces, costs):
            feats = self._trace_features(trace)
            if feats is not None:
                rows.append(feats)
                ys.append(cost)
                self.best_cost = min(self.best_cost, cost)
        if rows:
            self.model.add(self.group, np.stack(rows).reshape(-1, FEATURE_COUNT), ys)
            self.model.fit()

    # --- logs across chips (issue 6) ----------------------------------------------------------------
    def seed_foreign(self, records: Sequence[TuningRecord], top: int = 16) -> int:
        """Learn from records measured on *other* chips; returns how many schedules were queued.

        Every record trains the model with the facts of the chip it was measured on
        (:func:`~.transfer.chip_from_json` of ``record.chip``) as features, in a group of its own chip
        so that labels stay relative within one chip. The best ``top`` distinct traces (relative to
        their chip's best) are proposed before anything else, to be measured anew on this target;
        their decisions, where the record has them, also seed the starting populations. Costs from
        other chips never count as this search's results (``best_cost`` is untouched).
        """
        from .transfer import best_foreign, chip_from_json

        groups: dict[str, tuple[list[np.ndarray], list[float]]] = {}
        chips: dict[str, ChipInfo] = {}
        for rec in records:
            chip = chips.setdefault(rec.fingerprint, chip_from_json(rec.chip))
            feats = self._foreign_features(rec.trace, chip)
            if feats is None:
                continue
            rows, ys = groups.setdefault(f"{self.group}@{rec.fingerprint}", ([], []))
            rows.append(feats)
            ys.append(rec.mean_cost if rec.ok else FAILED_COST)
        for group, (rows, ys) in groups.items():
            self.model.add(group, np.stack(rows), ys)
        if groups:
            self.model.fit()
        best = best_foreign(records, top)
        self._queue.extend(Candidate(r.trace, dict(r.decisions or {})) for r in best)
        self._foreign_keys.update(trace_key(r.trace) for r in best)
        self._foreign_seeds.extend(dict(r.decisions) for r in best if r.decisions)
        return len(best)

    def _foreign_features(self, trace: Any, chip: ChipInfo) -> np.ndarray | None:
        # Not cached: the cache holds features for this search's chip, keyed by trace alone.
        try:
            return candidate_features(lower(replay(self.policy.outputs, trace), self.args), chip)
        except AutoschedError:
            return None

    def _pop_queue(self, n: int, seen: set[str]) -> list[Candidate]:
        out: list[Candidate] = []
        while self._queue and len(out) < n:
            cand = self._queue.pop(0)
            key = trace_key(cand.trace)
            if key not in seen:
                seen.add(key)
                out.append(cand)
        return out

    @property
    def converged(self) -> bool:
        """Whether the last ``patience`` rounds brought no real improvement."""
        return self._stale >= self.patience


def _chip_of(target: Any) -> ChipInfo:
    if target is None:
        return DEFAULT_CHIP
    try:
        from ..hai.registry import get_adapter

        return get_adapter(target).info()  # type: ignore[no-any-return]
    except (AutoschedError, ImportError, OSError):
        return DEFAULT_CHIP
