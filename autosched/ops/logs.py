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

_parsed: dict[str, tuple[tuple[int, int], list[Any]]] = {}
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


def _scanned(path: Path) -> list[Any]:
    """The lines of one log (:func:`~autosched.records.log.scan_log`, their bytes dropped), parsed once
    per version of it."""
    from ..records.log import LogLine, scan_log

    st = path.stat()
    stamp = (st.st_size, st.st_mtime_ns)
    with _lock:
        hit = _parsed.get(str(path))
        if hit is not None and hit[0] == stamp:
            return hit[1]
    lines = [LogLine(x.line_no, b"", x.record, x.problem) for x in scan_log(path)]
    with _lock:
        _parsed[str(path)] = (stamp, lines)
    return lines


def best_record(paths: Sequence[Path], inst: Any, fingerprint: str) -> Any:
    """The fastest record for this workload instance and chip among ``paths`` that fits it, or None
    (:func:`~autosched.records.log.best_valid_record`: a log is untrusted, a record that does not fit
    is never compiled)."""
    from ..records.log import best_valid_record

    return best_valid_record(paths, inst, fingerprint, scanned={str(p): _scanned(p) for p in paths})[0]
