"""A cost model that knows nothing: random scores. The baseline, and a fake for search tests.

Example: ``EvolutionarySearch(policy, model=RandomModel(seed=0))`` searches blind but seeded.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class RandomModel:
    """Same interface as :class:`~autosched.cost_model.xgb.XGBModel`; scores are uniform in [0, 1)."""

    objective = "random"

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self._n = 0

    @property
    def n_samples(self) -> int:
        return self._n

    @property
    def trained(self) -> bool:
        return self._n > 0

    def add(self, group: str, features: np.ndarray, costs: Sequence[float]) -> None:
        self._n += len(costs)

    def update(self, group: str, features: np.ndarray, costs: Sequence[float]) -> None:
        self.add(group, features, costs)

    def fit(self) -> None:
        pass

    def predict(self, features: np.ndarray) -> np.ndarray:
        return self.rng.random(len(np.asarray(features).reshape(len(features), -1)))
