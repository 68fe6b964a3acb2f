"""Tuning logs: append-only files of JSON lines. Bad lines are reported and skipped, never fatal.

Example::

    append_records("tuning_logs/matmul.jsonl", batch)       # once per measured batch
    res = load_records("tuning_logs/matmul.jsonl", target_fingerprint=fp, workload_key=inst.key)
    if res.foreign:
        print(f"{res.foreign} records for other chips were not used")
    best = best_records(res.records)[(inst.key, fp)]
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..search_space.trace import Trace, trace_to_json
from .record import RecordError, TuningRecord


@dataclass(frozen=True)
class LogProblem:
    """A line that was skipped, and why; ``line_no`` counts from 1 like an editor."""

    path: str
    line_no: int
    reason: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line_no}: {self.reason}"


@dataclass
class LoadResult:
    """Records that parsed and passed the filters, the problems met, and what the filters left out."""

    records: list[TuningRecord] = field(default_factory=list)
    problems: list[LogProblem] = field(default_factory=list)
    foreign: int = 0  # records of the wanted workload (if any) for another chip fingerprint
    other_workloads: int = 0


@dataclass
class MergeStats:
    """What :func:`merge_logs` did; ``problems`` are the input lines it skipped."""

    read: int = 0
    written: int = 0
    duplicates: int = 0  # same workload, chip and trace: only the best of each is kept
    dropped: int = 0  # records not the best of their workload and chip (keep="best")
    problems: list[LogProblem] = field(default_factory=list)


def append_records(path: str | Path, records: Iterable[TuningRecord]) -> int:
    """Append records as lines, then flush and fsync once; returns how many were written.

    Existing lines are never rewritten. A file whose last line was cut off by a killed writer gets a
    newline first, so the fragment stays one bad line instead of corrupting the first new record.
    """
    path = Path(path)
    lines = [r.to_json_line() + "\n" for r in records]  # serialise all first: a bad record writes nothing
    if not lines:
        return 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as f:
        if f.tell() > 0 and not _ends_with_newline(path):
            f.write(b"\n")
        f.write("".join(lines).encode("utf-8"))
        f.flush()
        os.fsync(f.fileno())
    return len(lines)


def _ends_with_newline(path: Path) -> bool:
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


def read_log(path: str | Path) -> tuple[list[TuningRecord], list[LogProblem]]:
    """Every record of a log, unfiltered, and the lines that could not be read. Blank lines are ignored."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"tuning log {path} not found (nothing has been tuned into it yet?)")
    records: list[TuningRecord] = []
    problems: list[LogProblem] = []
    for line_no, raw in enumerate(path.read_bytes().split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            records.append(TuningRecord.from_json_line(raw.decode("utf-8")))
        except UnicodeDecodeError as e:
            problems.append(LogProblem(str(path), line_no, f"not UTF-8 text ({e.reason} at byte {e.start})"))
        except RecordError as e:
            problems.append(LogProblem(str(path), line_no, str(e)))
    return records, problems


def load_records(
    path: str | Path, *, target_fingerprint: str | None = None, workload_key: str | None = None
) -> LoadResult:
    """Read a log, keeping records for ``workload_key`` and ``target_fingerprint`` (``None``: any).

    Records for other chips are counted in ``foreign``, never silently used. Example:
    ``load_records(p, target_fingerprint="llvm-cpu:znver4:1a2b3c4d").records``.
    """
    records, problems = read_log(path)
    result = LoadResult(problems=problems)
    for rec in records:
        # Workload first, so `foreign` counts only records that would have been useful on this chip.
        if workload_key is not None and rec.workload_key != workload_key:
            result.other_workloads += 1
        elif target_fingerprint is not None and rec.fingerprint != target_fingerprint:
            result.foreign += 1
        else:
            result.records.append(rec)
    return result


def trace_key(trace: Trace) -> str:
    """Canonical JSON of a trace: equal for equal traces, usable as a set member or dict key."""
    return json.dumps(trace_to_json(trace), sort_keys=True, separators=(",", ":"))


def best_records(records: Iterable[TuningRecord]) -> dict[tuple[str, str], TuningRecord]:
    """The fastest ok record (lowest median cost) per ``(workload_key, fingerprint)``; ties: the first."""
    best: dict[tuple[str, str], TuningRecord] = {}
    for rec in records:
        if not rec.ok:
            continue
        group = (rec.workload_key, rec.fingerprint)
        if group not in best or rec.mean_cost < best[group].mean_cost:
            best[group] = rec
    return best


def measured_traces(records: Iterable[TuningRecord], workload_key: str, fingerprint: str) -> set[str]:
    """:func:`trace_key` of every trace measured for this workload and chip, failed ones included.

    ``--resume`` skips candidates in this set, so nothing is measured twice.
    """
    return {
        trace_key(r.trace) for r in records if r.workload_key == workload_key and r.fingerprint == fingerprint
    }


def _better(a: TuningRecord, b: TuningRecord) -> bool:
    """Whether ``a`` should replace ``b``: faster, or ok where ``b`` failed."""
    return a.mean_cost < b.mean_cost


def merge_logs(
    paths: Sequence[str | Path], out_path: str | Path, *, keep: Literal["all", "best"] = "all"
) -> MergeStats:
    """Merge logs into ``out_path``, one record per (workload, chip, trace), the best of duplicates.

    ``keep="best"`` keeps only the fastest record per workload and chip. All inputs are read before the
    output is replaced atomically, so ``out_path`` may be one of ``paths``. Example:
    ``merge_logs(["a.jsonl", "b.jsonl"], "all.jsonl")``.
    """
    if keep not in ("all", "best"):
        raise ValueError(f"merge_logs: keep must be 'all' or 'best', got {keep!r}")
    stats = MergeStats()
    unique: dict[tuple[str, str, str], TuningRecord] = {}  # insertion order: first appearance
    for path in paths:
        records, problems = read_log(path)
        stats.read += len(records)
        stats.problems.extend(problems)
        for rec in records:
            k = (rec.workload_key, rec.fingerprint, trace_key(rec.trace))
            if k in unique:
                stats.duplicates += 1
                if _better(rec, unique[k]):
                    unique[k] = rec
            else:
                unique[k] = rec
    kept = list(unique.values())
    if keep == "best":
        winners = {id(r) for r in best_records(kept).values()}
        stats.dropped = len(kept) - len(winners)
        kept = [r for r in kept if id(r) in winners]
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.writelines(r.to_json_line() + "\n" for r in kept)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
    stats.written = len(kept)
    return stats
