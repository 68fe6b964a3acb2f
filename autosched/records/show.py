"""Plain-text summaries of tuning logs, for ``autosched logs show`` and ``autosched logs best``.

Example::

    print(show_log("tuning_logs/matmul.jsonl"))
    # tuning_logs/matmul.jsonl: 120 records, 2 workloads, 1 chip
    #
    # matmul(M=64, N=64, K=64, dtype='float32')  key 3f2a9c1e0b7d
    #   on llvm-cpu  [llvm-cpu:znver4:1a2b3c4d]
    #   100 records: 96 ok, 4 errors (compile 3, timeout 1)
    #   best: 41.20 GFLOP/s, 12.7 us
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from pathlib import Path

from ..errors import TargetError
from ..target import parse_target
from .log import LogProblem, best_records, read_log
from .record import TuningRecord


def format_seconds(s: float) -> str:
    """A latency with a readable unit: ``format_seconds(1.27e-5) == "12.7 us"``."""
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if s >= scale:
            return f"{s / scale:.3g} {unit}"
    return f"{s / 1e-9:.3g} ns"


def _workload_label(rec: TuningRecord) -> str:
    args = ", ".join(f"{k}={v!r}" for k, v in rec.workload_args.items())
    return f"{rec.workload_name}({args})  key {rec.workload_key[:12]}"


def _problem_lines(problems: Sequence[LogProblem], limit: int) -> list[str]:
    if not problems:
        return []
    lines = ["", f"{len(problems)} line(s) skipped:"]
    lines += [f"  {p}" for p in problems[:limit]]
    if len(problems) > limit:
        lines.append(f"  ... and {len(problems) - limit} more")
    return lines


def show_log(path: str | Path, limit: int = 20) -> str:
    """Per workload and chip: record and error counts, the best GFLOP/s and latency; then bad lines.

    At most ``limit`` groups and ``limit`` problems are listed. Example: ``print(show_log(p, limit=5))``.
    """
    records, problems = read_log(path)
    groups: dict[tuple[str, str], list[TuningRecord]] = defaultdict(list)
    for rec in records:
        groups[(rec.workload_key, rec.fingerprint)].append(rec)
    n_workloads = len({k for k, _ in groups})
    n_chips = len({fp for _, fp in groups})
    out = [f"{path}: {len(records)} records, {n_workloads} workload(s), {n_chips} chip(s)"]
    for (_key, fp), recs in list(groups.items())[:limit]:
        first = recs[0]
        errors = Counter(r.error for r in recs if r.error is not None)
        n_err = sum(errors.values())
        err_text = ", ".join(f"{kind} {n}" for kind, n in errors.most_common())
        out += [
            "",
            _workload_label(first),
            f"  on {first.target}  [{fp}]",
            f"  {len(recs)} records: {len(recs) - n_err} ok, {n_err} errors"
            + (f" ({err_text})" if n_err else ""),
        ]
        ok = [r for r in recs if r.ok]
        if ok:
            best = min(ok, key=lambda r: r.mean_cost)
            out.append(f"  best: {best.gflops:.2f} GFLOP/s, {format_seconds(best.mean_cost)}")
        else:
            out.append("  best: none (no successful measurement)")
    if len(groups) > limit:
        out += ["", f"... and {len(groups) - limit} more workload/chip group(s)"]
    out += _problem_lines(problems, limit)
    return "\n".join(out)


def _matches_target(rec: TuningRecord, target: str, canonical: str | None) -> bool:
    return target in (rec.fingerprint, rec.target) or rec.target == canonical


def show_best(path: str | Path, workload: str | None = None, target: str | None = None) -> str:
    """The best record per workload and chip, with its trace as schedule code, one step a line.

    ``workload`` matches a name or the start of a key; ``target`` a target string (``llvm-cpu
    -mcpu=haswell``) or a fingerprint. Example: ``print(show_best(p, workload="matmul"))``.
    """
    records, problems = read_log(path)
    if workload is not None:
        records = [r for r in records if r.workload_name == workload or r.workload_key.startswith(workload)]
    if target is not None:
        try:
            canonical: str | None = str(parse_target(target))
        except TargetError:
            canonical = None  # not a target string; it may still be a fingerprint
        records = [r for r in records if _matches_target(r, target, canonical)]
    best = best_records(records)
    wanted = " ".join(f"{k}={v!r}" for k, v in (("workload", workload), ("target", target)) if v is not None)
    if not best:
        out = [f"{path}: no successful records" + (f" for {wanted}" if wanted else "")]
        return "\n".join(out + _problem_lines(problems, 20))
    out = []
    for (_key, fp), rec in best.items():
        if out:
            out.append("")
        out += [
            _workload_label(rec),
            f"  on {rec.target}  [{fp}]",
            f"  {rec.gflops:.2f} GFLOP/s, {format_seconds(rec.mean_cost)} "
            f"(median of {len(rec.costs)}), measured {rec.timestamp}",
            "  schedule:",
        ]
        out += [f"    {step.to_code()}" for step in rec.trace] or ["    (default schedule)"]
    return "\n".join(out + _problem_lines(problems, 20))
