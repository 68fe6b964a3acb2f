"""Mutations of a candidate's sketch decisions: change one choice, keep the rest.

A mutation edits the ``Decisions`` dict of :meth:`SketchPolicy.sample` (keys such as
``"matmul.local/tile/i"``, ``"softmax_norm/vector"``). Passing the result back to ``sample``
rebuilds the candidate; a value that no longer fits (a parallel depth past the loops, a lane count
that does not divide) is resampled there, so mutations need not know the workload.

Example::

    sch, d = policy.sample(rng)
    child, _ = policy.sample(rng, mutate(d, rng))
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .sketch import UNROLL_STEPS, Decisions

INNER_MAX = 64  # the innermost tile level becomes vector lanes and register tiles: keep it small


def _prime_factors(n: int) -> list[int]:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    if n > 1:
        out.append(n)
    return out


def mutate_tile(lengths: list[int], rng: random.Random) -> list[int] | None:
    """Move a prime factor of one level's length to another level; the product is kept.

    ``[4, 2, 32, 4]`` may become ``[2, 2, 32, 8]`` (a 2 moved from level 0 to level 3).
    """
    if len(lengths) < 2:
        return None
    sources = [i for i, x in enumerate(lengths) if x > 1]
    for _ in range(8):
        if not sources:
            return None
        src = rng.choice(sources)
        factor = rng.choice(_prime_factors(lengths[src]))
        dst = rng.choice([i for i in range(len(lengths)) if i != src])
        out = list(lengths)
        out[src] //= factor
        out[dst] *= factor
        if out[-1] <= INNER_MAX:
            return out
    return None


def _step(options: tuple[int, ...], value: Any, rng: random.Random) -> Any:
    others = [v for v in options if v != value]
    return rng.choice(others) if others else None


def _neighbour(value: Any, rng: random.Random, low: int) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    choices = [v for v in (value - 1, value + 1) if v >= low]
    return rng.choice(choices) if choices else None


def _lanes(value: Any, rng: random.Random) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    choices = [v for v in (value // 2, value * 2) if 1 <= v <= INNER_MAX and v != value]
    return rng.choice(choices) if choices else None


# decision kind -> mutator of its value (None: this value cannot change)
MUTATORS: dict[str, Callable[[Any, random.Random], Any]] = {
    "tile": lambda v, rng: mutate_tile(v, rng) if isinstance(v, list) else None,
    "unroll": lambda v, rng: _step(UNROLL_STEPS, v, rng),
    "parallel_depth": lambda v, rng: _neighbour(v, rng, 1),
    "location": lambda v, rng: _neighbour(v, rng, 0),
    "vector": _lanes,
    "rfactor_lanes": _lanes,
    "rfactor": lambda v, rng: not v if isinstance(v, bool) else None,
}


def decision_kind(key: str) -> str:
    """``"C.local/tile/i"`` -> ``"tile"``, ``"C/unroll"`` -> ``"unroll"``."""
    parts = key.split("/")
    if len(parts) >= 3 and parts[-2] == "tile":
        return "tile"
    return parts[-1]


def mutate(decisions: Decisions, rng: random.Random, tries: int = 8) -> Decisions | None:
    """A copy of ``decisions`` with one value changed, or None when nothing can change.

    Kinds without a mutator (new sketch rules) are still explored: a bool is flipped, anything else
    is dropped so that ``sample`` draws it afresh.
    """
    keys = sorted(decisions)
    for _ in range(tries):
        if not keys:
            return None
        key = rng.choice(keys)
        value = decisions[key]
        mutator = MUTATORS.get(decision_kind(key))
        out = dict(decisions)
        if mutator is not None:
            new = mutator(value, rng)
            if new is None or new == value:
                continue
            out[key] = new
        elif isinstance(value, bool):
            out[key] = not value
        else:
            del out[key]
        return out
    return None
