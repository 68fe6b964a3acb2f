"""Structural families of candidates, each kept alive in the search for its own share of trials.

A candidate's *family* is the tuple of its structural decisions: the ones whose values are a bool or
a name (``matmul.local/pack``, ``exp/inline``, ``conv.local/vector_axis``), not a tile length or an
unroll depth. Two families are different programs (a GEMM that packs B, one that does not), and
each has its own best tiles: a packed GEMM with the unpacked family's best tiles can be slower than
the unpacked one, so mutating one decision at a time rarely crosses from one to the other, and a
model trained mostly on one family ranks the other low. Measured on 1024^3 matmul at 300 trials
(session 6), two seeds of three settled on the unpacked family and ended 25% below the third, which
packed; Ansor avoids this by giving every sketch samples of its own.

So every family that is still *in the race* (:meth:`FamilyStats.in_race`: too few of its candidates
measured to judge it, or its best within ``SLACK`` of the others' over as many candidates) gets a
share of each batch (:func:`balance`) and of each starting population (:func:`interleave`), and
:func:`keep_best` keeps each family's best measured decisions even when another family fills the
overall top. Families past ``SLACK`` get nothing reserved: they compete on their predicted score.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

from ..errors import FAILED_COST

T = TypeVar("T")
Family = tuple[tuple[str, Any], ...]

MAX_RESERVED = 3  # families besides the leader with trials reserved in a batch
PROBE = 12  # measured candidates of a family before its best is compared with the overall best
SLACK = 1.5  # a family whose best is within this factor of the overall best stays in the race
SHARE = 0.25  # of a batch's model picks, reserved for the families in the race besides the leader
KEEP = 8  # best measured decisions kept per family for starting populations


def family_of(decisions: dict[str, Any]) -> Family:
    """The structural decisions: bools and names, sorted by key (tile lists and ints left out)."""
    return tuple(sorted((k, v) for k, v in decisions.items() if isinstance(v, (bool, str))))


class FamilyStats:
    """The costs measured of each family, in the order they were measured."""

    def __init__(self) -> None:
        self.costs: dict[Hashable, list[float]] = {}

    def add(self, family: Hashable, cost: float) -> None:
        """One measured candidate; a failure (``cost`` at or past FAILED_COST) counts, with no cost."""
        self.costs.setdefault(family, []).append(cost)

    def in_race(self, family: Hashable) -> bool:
        """Fewer than PROBE measured, or its best within SLACK of every family's best over as many
        candidates: a family given a share since the start is not judged against the leader's best
        after hundreds of trials by its first dozen."""
        mine = self.costs.get(family, [])
        if len(mine) < PROBE:
            return True
        best = min(mine)
        if best >= FAILED_COST:
            return False  # every one of its candidates failed
        ref = min(min(c[: len(mine)]) for c in self.costs.values())
        return best <= ref * SLACK

    def racing(self, limit: int = MAX_RESERVED + 1) -> list[Hashable]:
        """Up to ``limit`` families in the race, the best first (those with no success last)."""
        fams = [f for f in self.costs if self.in_race(f)]
        return sorted(fams, key=lambda f: min(self.costs[f]))[:limit]


def crossed(decisions: dict[str, Any], family: Family) -> dict[str, Any]:
    """``decisions`` (tiles and all) with ``family``'s structural values: a family given another's best
    tiles, which evolving within the family alone may take long to find (a packed GEMM's best tiles
    are near the unpacked one's)."""
    return {**decisions, **dict(family)}


def balance(ranked: Sequence[T], n: int, family: Callable[[T], Hashable], stats: FamilyStats) -> list[T]:
    """The ``n`` best of ``ranked`` (best first), except that every ``1/SHARE``-th place goes, in turn,
    to the best-ranked member not yet picked of up to ``MAX_RESERVED`` other families in the race.

    The places are fixed by position, not by ``n``, so a batch cut short is a prefix of the full one
    (a search after transfer's two probes runs trial for trial as without them)."""
    if not ranked:
        return []
    leader = family(ranked[0])
    others: list[Hashable] = []
    for c in ranked:
        f = family(c)
        if f != leader and f not in others and stats.in_race(f):
            others.append(f)
            if len(others) == MAX_RESERVED:
                break
    members = {f: [c for c in ranked if family(c) == f] for f in others}
    every = round(1 / SHARE)
    out: list[T] = []
    chosen: set[int] = set()
    by_rank = iter(ranked)
    turn = 0
    while len(out) < n:
        pick = None
        if len(out) % every == every - 1:
            for _ in range(len(others)):  # the next family in turn with a member left
                f = others[turn % len(others)]
                turn += 1
                pick = next((c for c in members[f] if id(c) not in chosen), None)
                if pick is not None:
                    break
        if pick is None:
            pick = next((c for c in by_rank if id(c) not in chosen), None)
        if pick is None:
            break
        out.append(pick)
        chosen.add(id(pick))
    return out


def interleave(best: Sequence[T], family: Callable[[T], Hashable]) -> list[T]:
    """``best`` (best first) reordered round-robin across families, each family's best first, the
    families in the order of their best: a starting population cut to its first few seeds every family."""
    groups: dict[Hashable, list[T]] = {}
    for item in best:
        groups.setdefault(family(item), []).append(item)
    out: list[T] = []
    lists = list(groups.values())
    for rank in range(max((len(g) for g in lists), default=0)):
        out.extend(g[rank] for g in lists if rank < len(g))
    return out


def keep_best(best: list[T], n: int, family: Callable[[T], Hashable]) -> list[T]:
    """The first ``n`` of ``best`` (sorted best first) plus each family's first ``KEEP``, in order."""
    seen: dict[Hashable, int] = {}
    out = []
    for i, item in enumerate(best):
        f = family(item)
        seen[f] = seen.get(f, 0) + 1
        if i < n or seen[f] <= KEEP:
            out.append(item)
    return out
