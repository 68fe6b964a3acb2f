"""The search's cost model guided by a prior: another chip's records or a pretrained model.

:class:`GuidedModel` mixes the ranks of this chip's own model with a prior's, the prior's share
falling as this chip's results arrive and as the prior is judged by them, against the order of the
results of the batches it proposed (:mod:`.transfer` attaches one to a search).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np


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
    the rows measured here. ``trust`` is the prior's rank correlation with this chip's results *within
    the batches the search proposed* (a random batch is not what the prior has to rank: a good prior
    can rank random points badly), less its standard error, judged once ``min_judge`` such rows are in.
    ``probe_trust`` is what :func:`attach_foreign` learnt from the source's best schedules measured
    here: until ``trust`` is judged it stands in for it, and a negative one (the source's best rank in
    this chip's bottom half) takes the prior's say away for good. Until this chip has results, the prior
    guides the search only with ``guide_untrained`` (a pretrained model: the user's choice).
    ``on_judged(trust)`` is called after each judgement.
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
        self.probe_trust: float | None = None  # set by attach_foreign from the source's probes
        self._rows: list[np.ndarray] = []
        self._costs: list[float] = []
        self._batches: list[tuple[int, int]] = []  # [start, end) of the rows of each searched batch
        self._foreign_groups: set[str] = set()
        self.prior_frozen = False  # foreign rows added after this are ignored
        self.dismissed = False  # the source lost this chip's trust for good (attach_foreign)

    # the XGBModel interface the searches use ------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return int(self.own.n_samples) + int(getattr(self.prior, "n_samples", 0))

    @property
    def seed(self) -> int:
        return int(getattr(self.own, "seed", 0))  # a foreign prior trains with the search's seed

    @property
    def n_own(self) -> int:
        return len(self._costs)

    @property
    def trained(self) -> bool:
        if self.own.trained:
            return True  # the prior is mixed in (or not) by predict
        return self._prior_ready and self.weight() > 0  # a pretrained model, or trusted probes

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
        searched = self.trained  # this batch was proposed by a model, not drawn at random
        self.own.add(group, features, costs)
        X = np.asarray(features, dtype=np.float64).reshape(len(costs), -1)
        if searched and len(costs):
            self._batches.append((len(self._costs), len(self._costs) + len(costs)))
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
        if not self._prior_ready:
            return
        from ..cost_model.xgb import relative_labels

        rhos, sizes = [], []
        for lo, hi in self._batches:
            if hi - lo >= 3:
                labels = relative_labels(self._costs[lo:hi])
                rhos.append(rank_correlation(self.prior.predict(np.stack(self._rows[lo:hi])), labels))
                sizes.append(hi - lo)
        n = sum(sizes)
        if n >= self.min_judge:
            rho = float(np.average(rhos, weights=sizes))
            # less its standard error, so a few lucky rows do not buy the prior a say
            self.trust = rho - 1.0 / math.sqrt(n - 1)
        if self.on_judged is not None and self.effective_trust is not None:
            self.on_judged(self.effective_trust)

    @property
    def effective_trust(self) -> float | None:
        """The probes' verdict when they ranked badly (final), else ``trust``, else the probes'."""
        if self.probe_trust is not None and self.probe_trust < 0:
            return self.probe_trust
        return self.trust if self.trust is not None else self.probe_trust

    def weight(self) -> float:
        """The prior's share of the scores now: 0 without a prior, once it ranks this chip badly, or
        once the source is dismissed."""
        if not self._prior_ready or self.dismissed:
            return 0.0
        t = self.effective_trust
        if t is None:  # not judged yet: a pretrained model guides, foreign records wait for probes
            return self.similarity if self.guide_untrained else 0.0
        t = min(1.0, max(0.0, (t - 0.1) / 0.5))
        return self.similarity * t * self.half_life / (self.half_life + self.n_own)

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
        if self.probe_trust is not None:
            trust += f", source's best {self.probe_trust:+.2f}"
        if self.dismissed:
            trust += ", source dismissed: its best ranked badly here"
        return f"prior weight {self.weight():.2f} (similarity {self.similarity:.2f}, {trust})"
