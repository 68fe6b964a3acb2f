"""An XGBoost cost model: predicts how fast a candidate is relative to the best of its workload.

Training labels are ``min_cost / cost`` within each workload (TVM's normalisation), so one model
serves many workloads and a failed candidate (cost :data:`FAILED_COST`) scores about 0. Two
objectives are tried, squared-error regression on that label and pairwise ranking within each
workload; with ``objective="auto"`` both are fitted on part of the data and the one that ranks the
held-out rest better is kept, again whenever the data has doubled. Models are saved in XGBoost's
own JSON format, never pickled.

Example::

    model = XGBModel(seed=0)
    model.update("matmul-key", X, costs)     # adds the rows and retrains
    scores = model.predict(X_new)             # higher is faster
    model.save("model.json"); XGBModel.load("model.json")
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import FAILED_COST
from .features import FEATURE_COUNT

OBJECTIVES = {"reg": "reg:squarederror", "rank": "rank:pairwise"}
MIN_SELECT = 64  # rows before "auto" compares the objectives on held-out data


def relative_labels(costs: Sequence[float]) -> np.ndarray:
    """``min_cost / cost`` of one workload's candidates; failures (cost >= FAILED_COST) get 0."""
    c = np.asarray(costs, dtype=np.float64)
    ok = np.isfinite(c) & (c > 0) & (c < FAILED_COST)
    y = np.zeros(len(c))
    if ok.any():
        y[ok] = c[ok].min() / c[ok]
    return y


def ranking_score(y_true: np.ndarray, y_pred: np.ndarray, groups: np.ndarray) -> float:
    """How well ``y_pred`` orders ``y_true`` within each group, in [0, 1] (0.5: chance).

    The mean over groups of two numbers: pairwise accuracy (pairs with different labels put in the
    right order) and top-k quality (the best true label among the ``k = n/8`` predicted best, over
    the best true label), which is what a search that measures its top predictions cares about.
    """
    scores = []
    for g in np.unique(groups):
        m = groups == g
        t, p = y_true[m], y_pred[m]
        if len(t) < 4 or t.max() <= 0:
            continue
        diff_t = np.sign(t[:, None] - t[None, :])
        diff_p = np.sign(p[:, None] - p[None, :])
        pairs = diff_t != 0
        acc = float(((diff_t == diff_p) & pairs).sum() + 0.5 * ((diff_p == 0) & pairs).sum()) / max(
            1, int(pairs.sum())
        )
        k = max(1, len(t) // 8)
        top = np.argsort(-p, kind="stable")[:k]
        scores.append(0.5 * acc + 0.5 * float(t[top].max() / t.max()))
    return float(np.mean(scores)) if scores else 0.5


class XGBModel:
    """Gradient-boosted trees over :mod:`.features` vectors; ``nthread=1`` leaves the cores to
    measurement. ``objective`` is ``"auto"``, ``"reg"`` or ``"rank"``."""

    def __init__(
        self,
        objective: str = "auto",
        *,
        seed: int = 0,
        nthread: int = 1,
        rounds: int = 60,
        max_depth: int = 5,
        eta: float = 0.2,
    ):
        if objective not in ("auto", *OBJECTIVES):
            raise ValueError(f"XGBModel: objective must be 'auto', 'reg' or 'rank', got {objective!r}")
        self.requested = objective
        self.objective = "rank" if objective == "auto" else objective
        self.seed = seed
        self.nthread = nthread
        self.rounds = rounds
        self.params = {"max_depth": max_depth, "eta": eta, "min_child_weight": 0, "gamma": 0.001,
                       "tree_method": "hist", "nthread": nthread, "seed": seed, "verbosity": 0}  # fmt: skip
        self.booster: Any = None
        self.selection: dict[str, float] = {}  # objective -> held-out ranking score, last comparison
        self._selected_at = 0
        self._X: dict[str, list[np.ndarray]] = {}
        self._costs: dict[str, list[float]] = {}

    # Data -----------------------------------------------------------------------------------------
    @property
    def n_samples(self) -> int:
        return sum(len(c) for c in self._costs.values())

    @property
    def trained(self) -> bool:
        return self.booster is not None

    def add(self, group: str, features: np.ndarray, costs: Sequence[float]) -> None:
        """Keep rows of workload ``group`` for the next :meth:`fit`."""
        X = np.asarray(features, dtype=np.float64).reshape(len(costs), -1)
        if X.shape[1] != FEATURE_COUNT:
            raise ValueError(f"XGBModel.add: expected {FEATURE_COUNT} features a row, got {X.shape[1]}")
        self._X.setdefault(group, []).append(X)
        self._costs.setdefault(group, []).extend(float(c) for c in costs)

    def update(self, group: str, features: np.ndarray, costs: Sequence[float]) -> None:
        """Add rows and retrain on everything seen so far."""
        self.add(group, features, costs)
        self.fit()

    def _dataset(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        Xs, ys, gs = [], [], []
        for gi, (group, parts) in enumerate(sorted(self._X.items())):
            X = np.concatenate(parts)
            Xs.append(X)
            ys.append(relative_labels(self._costs[group]))
            gs.append(np.full(len(X), gi, dtype=np.int64))
        return np.concatenate(Xs), np.concatenate(ys), np.concatenate(gs)

    # Training -------------------------------------------------------------------------------------
    def fit(self) -> None:
        """Retrain from scratch on all rows; with ``"auto"``, re-pick the objective when data doubled."""
        if not self._costs:
            return
        X, y, g = self._dataset()
        if y.max() <= 0:
            return  # nothing has run yet: no signal to learn from
        if self.requested == "auto" and len(y) >= MIN_SELECT and len(y) >= 2 * self._selected_at:
            self._select(X, y, g)
        self.booster = self._train(self.objective, X, y, g)

    def _select(self, X: np.ndarray, y: np.ndarray, g: np.ndarray) -> None:
        rng = np.random.default_rng(self.seed)
        held = rng.random(len(y)) < 0.25
        if held.all() or not held.any():
            return
        scores = {}
        for name in OBJECTIVES:
            booster = self._train(name, X[~held], y[~held], g[~held])
            scores[name] = ranking_score(y[held], self._predict(booster, X[held]), g[held])
        self.selection = scores
        self.objective = max(scores, key=lambda k: (scores[k], k == "rank"))
        self._selected_at = len(y)

    def _train(self, objective: str, X: np.ndarray, y: np.ndarray, g: np.ndarray) -> Any:
        import xgboost as xgb

        order = np.argsort(g, kind="stable")  # ranking wants the rows of a group together
        X, y, g = X[order], y[order], g[order]
        params = dict(self.params, objective=OBJECTIVES[objective])
        if objective == "rank":
            dm = xgb.DMatrix(X, label=y, qid=g, nthread=self.nthread)
        else:
            dm = xgb.DMatrix(X, label=y, nthread=self.nthread)
        return xgb.train(params, dm, num_boost_round=self.rounds)

    @staticmethod
    def _predict(booster: Any, X: np.ndarray) -> np.ndarray:
        return np.asarray(booster.inplace_predict(np.asarray(X, dtype=np.float64)), dtype=np.float64)

    def predict(self, features: np.ndarray) -> np.ndarray:
        """Scores (higher is faster), comparable within one workload; zeros before any training."""
        X = np.asarray(features, dtype=np.float64).reshape(-1, FEATURE_COUNT)
        if self.booster is None or len(X) == 0:
            return np.zeros(len(X))
        return self._predict(self.booster, X)

    # Files ----------------------------------------------------------------------------------------
    def save(self, path: str | Path) -> None:
        """Write the trained booster as XGBoost JSON (with the objective and feature count)."""
        if self.booster is None:
            raise ValueError("XGBModel.save: the model has not been trained yet")
        path = Path(path)
        if path.suffix != ".json":
            raise ValueError(f"XGBModel.save: use a .json path (XGBoost's JSON format), got {path}")
        self.booster.set_attr(
            autosched_objective=self.objective,
            autosched_features=str(FEATURE_COUNT),
            autosched_selection=json.dumps(self.selection),
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        self.booster.save_model(str(path))

    @classmethod
    def load(cls, path: str | Path, *, nthread: int = 1) -> XGBModel:
        """A model from :meth:`save`; refuses one built for another feature layout."""
        import xgboost as xgb

        booster = xgb.Booster(params={"nthread": nthread})
        booster.load_model(str(path))
        n = booster.attr("autosched_features")
        if n is None or int(n) != FEATURE_COUNT:
            raise ValueError(
                f"XGBModel.load: {path} was trained on {n} features; this autosched computes "
                f"{FEATURE_COUNT} (retrain the model)"
            )
        objective = booster.attr("autosched_objective") or "rank"
        model = cls(objective if objective in OBJECTIVES else "rank", nthread=nthread)
        model.booster = booster
        model.selection = json.loads(booster.attr("autosched_selection") or "{}")
        return model

    def __repr__(self) -> str:
        sel = ", ".join(f"{k}={v:.3f}" for k, v in self.selection.items() if math.isfinite(v))
        return f"XGBModel(objective={self.objective!r}, samples={self.n_samples}{', ' + sel if sel else ''})"
