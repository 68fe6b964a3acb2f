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
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import AutoschedError
from ..search_space.trace import trace_key as trace_key  # defined next to traces; named here too
from .record import RecordError, TuningRecord
from .validate import validate_record

if TYPE_CHECKING:
    from ..te.workload import WorkloadInstance


_R = TypeVar("_R")


class LogError(AutoschedError):
    """A tuning log that cannot be read or written; the message names the path and what to do."""


class LogNotFoundError(LogError, FileNotFoundError):
    """A tuning log that does not exist (still a FileNotFoundError for callers that catch that)."""


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


@dataclass(frozen=True)
class LogLine:
    """One non-blank line of a log: its bytes as written, and the record or the problem it holds."""

    line_no: int
    raw: bytes
    record: TuningRecord | None
    problem: LogProblem | None


@dataclass
class MergeStats:
    """What :func:`merge_logs` did; ``problems`` are the input lines it could not parse (kept verbatim)."""

    read: int = 0
    written: int = 0
    duplicates: int = 0  # same workload, chip and trace: only the best of each is kept
    dropped: int = 0  # records not the best of their workload and chip (keep="best")
    problems: list[LogProblem] = field(default_factory=list)
    kept_unparsed: int = 0  # unreadable lines copied verbatim (identical ones once)

    def describe(self, out_path: str | Path) -> str:
        """A few lines for people: what was read, written, merged and kept; the first problems."""
        lines = [f"merged {self.read} record(s) into {out_path}: {self.written} written"]
        if self.duplicates:
            lines[0] += f", {self.duplicates} duplicate(s) folded into the best of each"
        if self.dropped:
            lines[0] += f", {self.dropped} slower record(s) dropped (--keep best)"
        if self.problems:
            lines.append(
                f"{len(self.problems)} line(s) could not be parsed; {self.kept_unparsed} kept verbatim at "
                "the end of the output (identical ones once), so nothing is lost:"
            )
            lines += [f"  {p}" for p in self.problems[:5]]
            if len(self.problems) > 5:
                lines.append(f"  ... and {len(self.problems) - 5} more")
        return "\n".join(lines)


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


def ensure_appendable(path: str | Path) -> None:
    """Create the log's folder and open the log for append once, so that a log that cannot be written
    is found before anything is measured into it. Raises :class:`LogError` naming the path."""
    path = Path(path)
    try:
        if path.is_dir():
            raise IsADirectoryError(21, "it is a directory")
        path.parent.mkdir(parents=True, exist_ok=True)
        existed = path.exists()
        with open(path, "ab"):
            pass
        if not existed:  # proven writable; a run that fails before measuring leaves no empty log behind
            path.unlink()
    except OSError as e:
        raise LogError(
            f"cannot write tuning log {path}: {_reason(e)}; pass --log with a writable file path"
        ) from None


def _reason(e: OSError) -> str:
    return e.strerror or str(e)


def _read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise LogError(f"tuning log {path} is a directory; give the path of a .jsonl file")
    if not path.exists():
        raise LogNotFoundError(f"tuning log {path} not found (nothing has been tuned into it yet?)")
    try:
        return path.read_bytes()
    except OSError as e:
        raise LogError(
            f"cannot read tuning log {path}: {_reason(e)}; check that it is a readable file"
        ) from None


def scan_log(path: str | Path) -> list[LogLine]:
    """Every non-blank line of a log, parsed where it can be; line numbers count from 1."""
    path = Path(path)
    out: list[LogLine] = []
    for line_no, raw in enumerate(_read_bytes(path).split(b"\n"), start=1):
        if not raw.strip():
            continue
        try:
            out.append(LogLine(line_no, raw, TuningRecord.from_json_line(raw.decode("utf-8")), None))
        except UnicodeDecodeError as e:
            reason = f"not UTF-8 text ({e.reason} at byte {e.start})"
            out.append(LogLine(line_no, raw, None, LogProblem(str(path), line_no, reason)))
        except RecordError as e:
            out.append(LogLine(line_no, raw, None, LogProblem(str(path), line_no, str(e))))
        except RecursionError:  # JSON nested thousands deep
            reason = "JSON nested too deeply to be a tuning record"
            out.append(LogLine(line_no, raw, None, LogProblem(str(path), line_no, reason)))
    return out


def read_log(path: str | Path) -> tuple[list[TuningRecord], list[LogProblem]]:
    """Every record of a log, unfiltered, and the lines that could not be read. Blank lines are ignored."""
    lines = scan_log(path)
    return [x.record for x in lines if x.record], [x.problem for x in lines if x.problem]


def load_records(
    path: str | Path,
    *,
    target_fingerprint: str | None = None,
    workload_key: str | None = None,
    workload: WorkloadInstance | None = None,
) -> LoadResult:
    """Read a log, keeping records for ``workload_key`` and ``target_fingerprint`` (``None``: any).

    Records for other chips are counted in ``foreign``, never silently used. With ``workload`` (an
    instance; its key is the filter) every kept record is first checked by
    :func:`~autosched.records.validate.validate_record`: one that does not fit is a problem naming
    its line, not a record, so nothing a log says reaches the compiler unchecked. Example:
    ``load_records(p, target_fingerprint="llvm-cpu:znver4:1a2b3c4d", workload=inst).records``.
    """
    if workload is not None:
        workload_key = workload.key
    result = LoadResult()
    verdicts: dict[str, str | None] = {}  # trace key -> why it does not fit (None: it fits)
    for line in scan_log(path):
        rec = line.record
        if rec is None:
            assert line.problem is not None
            result.problems.append(line.problem)
        # Workload first, so `foreign` counts only records that would have been useful on this chip.
        elif workload_key is not None and rec.workload_key != workload_key:
            result.other_workloads += 1
        elif target_fingerprint is not None and rec.fingerprint != target_fingerprint:
            result.foreign += 1
        elif workload is not None and (why := _misfit(rec, workload, verdicts)) is not None:
            result.problems.append(LogProblem(str(path), line.line_no, why))
        else:
            result.records.append(rec)
    return result


def _misfit(rec: TuningRecord, inst: WorkloadInstance, verdicts: dict[str, str | None]) -> str | None:
    """Why ``rec`` may not be used for ``inst``, or None; traces are checked once per load."""
    k = json.dumps([trace_key(rec.trace), rec.workload_name, rec.workload_args], sort_keys=True, default=str)
    if k not in verdicts:
        try:
            validate_record(rec, inst)
            verdicts[k] = None
        except RecordError as e:
            verdicts[k] = f"record rejected, not used: {e}"
    return verdicts[k]


def standing(records: Iterable[_R], key: Callable[[_R], TuningRecord] | None = None) -> list[_R]:
    """The records that stand for their traces, in order: a trace timed again in a finalists round
    (``rec.retimed``) is represented by its last such record alone, its search timing and earlier
    re-timings dropped; other records all stand. The best-pickers then rank re-timed records before
    all others (:func:`pick_key`). ``key`` gets the record out of an item (a log line, say)."""
    items = list(records)
    get: Callable[[Any], TuningRecord] = key if key is not None else (lambda r: r)
    keys = [_trace_id(get(x)) if get(x).retimed is not None else None for x in items]
    last = {k: i for i, k in enumerate(keys) if k is not None}
    if not last:
        return items
    return [x for i, x in enumerate(items) if last.get(keys[i] or _trace_id(get(x)), i) == i]


def pick_key(rec: TuningRecord) -> tuple[bool, float]:
    """How the best-pickers rank standing records: re-timed ones first (a finalists round's times are
    not the best of many draws, so a search timing is no match for them), each group by median cost."""
    return rec.retimed is None, rec.mean_cost


def _trace_id(rec: TuningRecord) -> tuple[str, str, str]:
    return rec.workload_key, rec.fingerprint, trace_key(rec.trace)


def best_valid_record(
    paths: Sequence[str | Path],
    inst: WorkloadInstance,
    fingerprint: str,
    *,
    scanned: Mapping[str, Sequence[LogLine]] | None = None,
) -> tuple[TuningRecord | None, list[LogProblem]]:
    """The fastest ok record of ``inst`` on ``fingerprint`` in ``paths`` that passes validation, and the
    problems met: unreadable lines, and the records rejected on the way (each one faster than the record
    returned; records are validated fastest first, until one fits). Ties: the first, in the order of
    ``paths`` and lines. A trace re-timed in a finalists round counts by its last re-timing, and
    re-timed traces rank first (:func:`standing`, :func:`pick_key`). ``scanned`` holds logs the caller
    has read already, ``{str(path): scan_log(path)}``; those are not read again. What ``build``,
    ``compile_model``, the op library and the end of ``tune`` compile. Example:
    ``rec, problems = best_valid_record([log], inst, fingerprint)``."""
    done = {str(k): v for k, v in (scanned or {}).items()}
    mine: list[tuple[str, int, TuningRecord]] = []
    problems: list[LogProblem] = []
    for path in paths:
        lines = done.get(str(path))
        for line in scan_log(path) if lines is None else lines:
            if line.problem is not None:
                problems.append(line.problem)
            rec = line.record
            if rec is not None and rec.workload_key == inst.key and rec.fingerprint == fingerprint:
                mine.append((str(path), line.line_no, rec))
    stand = standing(mine, key=lambda m: m[2])
    candidates = [(pick_key(rec), i, path, n, rec) for i, (path, n, rec) in enumerate(stand) if rec.ok]
    verdicts: dict[str, str | None] = {}
    for _cost, _order, path, line_no, rec in sorted(candidates, key=lambda c: c[:2]):
        why = _misfit(rec, inst, verdicts)
        if why is None:
            return rec, problems
        problems.append(LogProblem(path, line_no, why))
    return None, problems


def best_records(records: Iterable[TuningRecord]) -> dict[tuple[str, str], TuningRecord]:
    """The fastest ok record (lowest median cost) per ``(workload_key, fingerprint)`` among those that
    stand, re-timed ones first (:func:`standing`, :func:`pick_key`); ties: the first."""
    best: dict[tuple[str, str], TuningRecord] = {}
    for rec in standing(records):
        if not rec.ok:
            continue
        group = (rec.workload_key, rec.fingerprint)
        if group not in best or pick_key(rec) < pick_key(best[group]):
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
    """Whether ``a`` (read after ``b``) should replace ``b``: a re-timing over a first measurement, a
    later re-timing over an earlier one (:func:`standing`); else faster, or ok where ``b`` failed."""
    if a.retimed is not None or b.retimed is not None:
        return a.retimed is not None
    return a.mean_cost < b.mean_cost


def merge_logs(
    paths: Sequence[str | Path], out_path: str | Path, *, keep: Literal["all", "best"] = "all"
) -> MergeStats:
    """Merge logs into ``out_path``, one record per (workload, chip, trace), the best of duplicates.

    ``keep="best"`` keeps only the fastest record per workload and chip. Lines that do not parse
    (corrupt, or written by a newer autosched) are copied verbatim after the records, and records are
    written as they were read, so merging never loses a line or a field. All inputs are read before
    the output is replaced atomically (a temporary file and ``os.replace``), so ``out_path`` may be
    one of ``paths``. Example:
    ``print(merge_logs(["a.jsonl", "b.jsonl"], "all.jsonl").describe("all.jsonl"))``.
    """
    if keep not in ("all", "best"):
        raise ValueError(f"merge_logs: keep must be 'all' or 'best', got {keep!r}")
    out = Path(out_path)
    if out.is_dir():
        raise LogError(
            f"merge: the output {out} is a directory; give a file path, e.g. {out / 'merged.jsonl'}"
        )
    stats = MergeStats()
    # Lines are written as they were read, so fields this version does not know survive a merge.
    unique: dict[tuple[str, str, str], LogLine] = {}  # insertion order: first appearance
    unparsed: dict[bytes, None] = {}  # verbatim, first appearance first
    # (size, mtime) of each input when read: a log that grows meanwhile is not replaced
    stamps: dict[Path, tuple[int, int] | None] = {}
    for path in paths:
        stamps[Path(path).resolve()] = _stamp(Path(path)) if Path(path).is_file() else None
        for line in scan_log(path):
            rec = line.record
            if rec is None:
                assert line.problem is not None
                stats.problems.append(line.problem)
                unparsed.setdefault(line.raw, None)
                continue
            stats.read += 1
            k = (rec.workload_key, rec.fingerprint, trace_key(rec.trace))
            if k in unique:
                stats.duplicates += 1
                if _better(rec, unique[k].record):  # type: ignore[arg-type]
                    unique[k] = line
            else:
                unique[k] = line
    kept = list(unique.values())
    if keep == "best":
        winners = {id(r) for r in best_records(x.record for x in kept if x.record).values()}
        stats.dropped = len(kept) - len(winners)
        kept = [x for x in kept if id(x.record) in winners]
    if out.resolve() in stamps and _stamp(out) != stamps[out.resolve()]:
        raise LogError(
            f"merge: {out} changed while it was being merged (a tuner writing to it?); it was not "
            "replaced: merge again when nothing writes to it"
        )
    lines = [x.raw for x in kept] + list(unparsed)
    _write_atomically(out, b"".join(raw + b"\n" for raw in lines))
    stats.written = len(kept)
    stats.kept_unparsed = len(unparsed)
    return stats


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_size, st.st_mtime_ns


def _write_atomically(out: Path, data: bytes) -> None:
    """Write ``data`` to a temporary file beside ``out``, fsync it, then rename it over ``out``."""
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    except OSError as e:
        raise LogError(f"cannot write {out}: {_reason(e)}; choose an output in a writable folder") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
    except OSError as e:
        raise LogError(f"cannot write {out}: {_reason(e)}; the inputs are unchanged") from None
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
