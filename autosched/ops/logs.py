"""Where the op library finds tuned records: the caller's logs, ``$AUTOSCHED_LOGS``, the shipped logs.

A record is used only for its exact workload key and chip fingerprint; among all logs the fastest wins.
Parsed logs are cached by (path, size, mtime), so a log that grows while a program runs is re-read.

Example::

    paths = log_paths(logs=["my_tuning.jsonl"])     # + $AUTOSCHED_LOGS + tuning_logs/*.jsonl
    rec = best_record(paths, inst, "llvm-cpu:znver4:1a2b3c4d")
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

ENV_LOGS = "AUTOSCHED_LOGS"  # os.pathsep-separated files or directories of *.jsonl
ENV_SHIPPED = "AUTOSCHED_SHIPPED_LOGS"  # "0" leaves out the logs shipped with autosched
# The repository's tuning_logs/ (an editable install or a source checkout), then package data.
SHIPPED_DIRS = (
    Path(__file__).resolve().parents[2] / "tuning_logs",
    Path(__file__).resolve().parent / "tuning_logs",
)

_parsed: dict[str, tuple[tuple[int, int], dict[tuple[str, str], Any], int]] = {}
_lock = threading.Lock()


def _expand(entry: str | os.PathLike[str]) -> list[Path]:
    p = Path(entry).expanduser()
    if p.is_dir():
        return sorted(p.glob("*.jsonl"))
    return [p]


def shipped_logs() -> list[Path]:
    """The logs shipped with autosched (``tuning_logs/*.jsonl``), unless ``AUTOSCHED_SHIPPED_LOGS=0``."""
    if os.environ.get(ENV_SHIPPED, "1") == "0":
        return []
    return [p for d in SHIPPED_DIRS if d.is_dir() for p in _expand(d)]


def log_paths(logs: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None) -> list[Path]:
    """The logs to search, in order: ``logs``, then ``$AUTOSCHED_LOGS``, then the shipped logs.

    A directory stands for its ``*.jsonl`` files. A named file that does not exist is an error (a typo
    should not silently fall back to an untuned kernel); a missing entry of the env var is skipped.
    """
    given: Iterable[Any] = [] if logs is None else [logs] if isinstance(logs, (str, os.PathLike)) else logs
    out: list[Path] = []
    for entry in given:
        paths = _expand(entry)
        for p in paths:
            if not p.exists():
                raise FileNotFoundError(f"autosched.ops: tuning log {p} not found (passed in logs=)")
        out += paths
    for entry in filter(None, os.environ.get(ENV_LOGS, "").split(os.pathsep)):
        out += [p for p in _expand(entry) if p.is_file()]
    out += shipped_logs()
    return list(dict.fromkeys(p.resolve() for p in out))


def _best_of(path: Path) -> dict[tuple[str, str], Any]:
    """The best ok record per (workload key, fingerprint) of one log, parsed once per version of it."""
    from ..records.log import best_records, read_log

    st = path.stat()
    stamp = (st.st_size, st.st_mtime_ns)
    with _lock:
        hit = _parsed.get(str(path))
        if hit is not None and hit[0] == stamp:
            return hit[1]
    records, problems = read_log(path)
    best = best_records(records)
    with _lock:
        _parsed[str(path)] = (stamp, best, len(problems))
    return best


def best_record(paths: Sequence[Path], inst: Any, fingerprint: str) -> Any:
    """The fastest record for this workload instance and chip among ``paths`` that fits it, or None."""
    from ..records.log import best_valid_record
    from ..records.record import RecordError
    from ..records.validate import validate_record

    best = None
    for p in paths:
        rec = _best_of(p).get((inst.key, fingerprint))
        if rec is not None and (best is None or rec.mean_cost < best.mean_cost):
            best = rec
    if best is None:
        return None
    try:
        validate_record(best, inst)  # a log is untrusted: a crafted record must never be compiled
        return best
    except RecordError:  # the fastest does not fit the workload: the fastest that does
        return best_valid_record(paths, inst, fingerprint)[0]
