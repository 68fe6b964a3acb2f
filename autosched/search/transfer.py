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

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..chip import ChipInfo
from ..records.log import LogProblem, load_records, trace_key
from ..records.record import TuningRecord

_CHIP_FIELDS = {f.name: f for f in dataclasses.fields(ChipInfo)}


def chip_from_json(data: dict[str, Any]) -> ChipInfo:
    """Rebuild the :class:`ChipInfo` a record was measured on from its ``chip`` dict.

    Unknown keys (a newer writer) are ignored and missing ones take the defaults, so a log from
    another version still gives usable chip features. Example:
    ``chip_from_json(rec.chip).vector_bits == 256`` for a record from ``llvm-cpu -mcpu=haswell``.
    """
    kwargs = {k: v for k, v in data.items() if k in _CHIP_FIELDS}
    kwargs.setdefault("name", "unknown")
    kwargs.setdefault("kind", "cpu")
    kwargs.setdefault("arch", "unknown")
    kwargs["features"] = tuple(kwargs.get("features") or ())
    kwargs["extra"] = dict(kwargs.get("extra") or {})
    try:
        return ChipInfo(**kwargs)
    except TypeError:  # a field of the wrong shape: fall back to what identifies the chip
        return ChipInfo(str(kwargs["name"]), str(kwargs["kind"]), str(kwargs["arch"]))


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
