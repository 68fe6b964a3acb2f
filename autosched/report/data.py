"""What a report shows, computed from tuning logs: curves, per-task statistics, chips and bad input.

Logs are read with the records layer's :func:`~autosched.records.log.read_log`; a log that cannot be
read at all, lines that are not records, and workloads that never ran successfully all become notes
that the page and the terminal show, never exceptions.

Example::

    data = summarize(read_logs(["tuning_logs/a.jsonl", "b.jsonl"]))
    for task in data.tasks:
        print(task.label, task.best_gflops, task.failures)
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import AutoschedError
from ..records.log import LogProblem, best_records, read_log
from ..records.record import TuningRecord


@dataclass(frozen=True)
class LogRead:
    """One log as read: its records, the lines skipped, or why it could not be read at all."""

    path: str
    records: tuple[TuningRecord, ...] = ()
    problems: tuple[LogProblem, ...] = ()
    error: str = ""  # non-empty: the file itself could not be read


@dataclass(frozen=True)
class Curve:
    """Best GFLOP/s after each trial of one workload on one chip in one log (a tuning curve's line)."""

    label: str
    trials: tuple[int, ...]
    seconds: tuple[float, ...]  # wall time since the first record of the line
    best_gflops: tuple[float, ...]


@dataclass
class TaskStats:
    """One workload on one chip, all logs together: a row of the tuning-statistics table."""

    key: str
    name: str
    args: dict[str, Any]
    fingerprint: str
    target: str
    chip: dict[str, Any]
    flops: float
    weight: float = 1.0  # how often a model runs the kernel; a log of single workloads says 1
    trials: int = 0
    failures: Counter = field(default_factory=Counter)
    best: TuningRecord | None = None

    @property
    def label(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.args.items())
        return f"{self.name}({args})"

    @property
    def best_gflops(self) -> float:
        return self.best.gflops if self.best is not None else 0.0

    @property
    def latency_s(self) -> float | None:
        return self.best.mean_cost if self.best is not None else None

    @property
    def weighted_latency_s(self) -> float | None:
        return None if self.latency_s is None else self.weight * self.latency_s


@dataclass
class ReportData:
    """Everything the page shows, plus the notes about bad input (also printed by the CLI)."""

    logs: list[LogRead]
    tasks: list[TaskStats]
    curves: dict[str, list[Curve]]  # workload key -> one line per (log, chip)
    chips: dict[str, dict[str, Any]]  # fingerprint -> chip facts of its newest record
    notes: list[str]

    @property
    def n_records(self) -> int:
        return sum(len(log.records) for log in self.logs)


def read_logs(paths: Sequence[str | Path]) -> list[LogRead]:
    """Read each log; a missing or unreadable file becomes a LogRead with ``error`` set."""
    out = []
    for path in paths:
        try:
            records, problems = read_log(path)
        except (AutoschedError, OSError) as e:  # LogError: missing, a directory, no permission
            out.append(LogRead(str(path), error=str(e)))
            continue
        out.append(LogRead(str(path), tuple(records), tuple(problems)))
    return out


def summarize(logs: Sequence[LogRead]) -> ReportData:
    """Group records by workload and chip; curves per log; notes for everything that was wrong."""
    tasks: dict[tuple[str, str], TaskStats] = {}
    curves: dict[str, list[Curve]] = defaultdict(list)
    chips: dict[str, dict[str, Any]] = {}
    for log in logs:
        lines: dict[tuple[str, str], list[TuningRecord]] = defaultdict(list)
        for rec in log.records:
            chips[rec.fingerprint] = rec.chip  # file order: the newest record's facts win
            if rec.retimed is not None:
                continue  # a finalists round's re-timing: no trial, but it may be the pick (below)
            lines[(rec.workload_key, rec.fingerprint)].append(rec)
            _add(tasks, rec)
        for (key, fp), recs in lines.items():
            curve = _curve(f"{Path(log.path).name} · {recs[0].target} [{fp}]", recs)
            if curve is not None:
                curves[key].append(curve)
    # The pick as `build` makes it: re-timed schedules first, each by its last re-timing.
    for group, rec in best_records(r for log in logs for r in log.records).items():
        if group in tasks:
            tasks[group].best = rec
    return ReportData(list(logs), list(tasks.values()), dict(curves), chips, _notes(logs, tasks))


def _add(tasks: dict[tuple[str, str], TaskStats], rec: TuningRecord) -> None:
    group = (rec.workload_key, rec.fingerprint)
    task = tasks.get(group)
    if task is None:
        task = tasks[group] = TaskStats(
            rec.workload_key,
            rec.workload_name,
            dict(rec.workload_args),
            rec.fingerprint,
            rec.target,
            rec.chip,
            rec.flops,
        )
    task.trials += 1
    task.flops = task.flops or rec.flops
    if not rec.ok:
        task.failures[rec.error or "no timing"] += 1


def _curve(label: str, recs: list[TuningRecord]) -> Curve | None:
    """The running best of the ok records in log order; None when none succeeded."""
    start = _time(recs[0])
    trials, seconds, best = [], [], []
    so_far = 0.0
    for i, rec in enumerate(recs, start=1):
        if rec.ok and rec.gflops > so_far:
            so_far = rec.gflops
        if so_far > 0:
            trials.append(i)
            seconds.append(max(0.0, _time(rec) - start))
            best.append(so_far)
    return Curve(label, tuple(trials), tuple(seconds), tuple(best)) if best else None


def _time(rec: TuningRecord) -> float:
    return datetime.fromisoformat(rec.timestamp).timestamp()


def _notes(logs: Sequence[LogRead], tasks: dict[tuple[str, str], TaskStats]) -> list[str]:
    notes = []
    if not logs:
        notes.append("no tuning logs were given")
    for log in logs:
        if log.error:
            notes.append(f"{log.path}: not read: {log.error}")
            continue
        if log.problems:
            first = log.problems[0]
            more = f" (and {len(log.problems) - 1} more)" if len(log.problems) > 1 else ""
            notes.append(
                f"{log.path}: {len(log.problems)} line(s) skipped, not tuning records; first: "
                f"line {first.line_no}: {first.reason}{more}"
            )
        if not log.records:
            notes.append(
                f"{log.path}: no tuning records in this log" + (" (empty file)" if not log.problems else "")
            )
    for task in tasks.values():
        if task.best is None:
            kinds = ", ".join(f"{k} {n}" for k, n in task.failures.most_common())
            notes.append(
                f"{task.label} on {task.target} [{task.fingerprint}]: no successful measurement in "
                f"{task.trials} trial(s) ({kinds})"
            )
    return notes
