"""Chip facts measured, not guessed: peak FLOP/s and bandwidth, measured once per machine and target, cached.

An adapter's ``info()`` gives what it can read cheaply (names, features, caches) and an estimated peak.
:func:`measured_info` replaces the estimates with measurements where the adapter can make them (adapters
whose spec says ``measures_facts``; llvm-cpu through :mod:`.cpu_facts`), cached in ``$AUTOSCHED_CACHE_DIR``
(default ``~/.cache/autosched``) under ``chip_facts.json``, keyed by the target and the chip's identity.
``info.extra["facts"]`` says which: ``"measured"`` or ``"estimated"``. ``AUTOSCHED_MEASURE_CHIP=0`` keeps the
estimates (the test suite sets it: tests do not time things).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from .base import ChipInfo

FACTS_VERSION = 1
_MEASURED = ("peak_gflops", "peak_gflops_core", "bandwidth_gbs", "l2_bandwidth_gbs", "l3_bandwidth_gbs",
             "masked_store_ns")  # fmt: skip


def cache_path() -> Path:
    root = os.environ.get("AUTOSCHED_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "autosched"
    )
    return Path(root) / "chip_facts.json"


def chip_key(target: str, info: ChipInfo) -> str:
    """The cache key: the target string and the chip's identity (name, arch, features, cores, caches)."""
    identity = [target, info.name, info.arch, sorted(info.features), info.cores, info.l2_bytes, info.l3_bytes]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:16]


def _read_cache(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # missing or unreadable: measured again, and rewritten
    return data if isinstance(data, dict) and data.get("version") == FACTS_VERSION else {}


def _valid(entry: Any) -> bool:
    return isinstance(entry, dict) and all(
        isinstance(entry.get(k), (int, float)) and entry[k] > 0 for k in ("peak_gflops", "bandwidth_gbs")
    )


def _write_cache(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        os.replace(tmp, path)
    except OSError:
        pass  # an unwritable cache only costs a measurement next time


def measure(adapter: Any, info: ChipInfo) -> dict[str, float] | None:
    """Fresh measurements for ``adapter``'s chip, or None where the adapter cannot measure."""
    spec = getattr(adapter, "spec", None)
    if spec is None or not spec.measures_facts:
        return None
    return adapter.measure_facts(info)


def measured_info(adapter: Any, *, measure_now: bool = True, remeasure: bool = False) -> ChipInfo:
    """``adapter.info()`` with measured peak and bandwidth: from the cache, else measured now (about 2 s)
    when ``measure_now``, else the adapter's estimates (``extra["facts"] == "estimated"``)."""
    info = adapter.info()
    if os.environ.get("AUTOSCHED_MEASURE_CHIP") == "0":  # tests: deterministic estimates, no timing
        return dataclasses.replace(info, extra={**info.extra, "facts": "estimated"})
    path, key = cache_path(), chip_key(str(adapter.target), info)
    data = _read_cache(path)
    entry = data.get("chips", {}).get(key)
    if remeasure or (not _valid(entry) and measure_now):
        facts = measure(adapter, info)
        if facts is not None:
            entry = {**facts, "target": str(adapter.target), "chip": info.name, "when": time.time()}
            data = {"version": FACTS_VERSION, "chips": {**data.get("chips", {}), key: entry}}
            _write_cache(path, data)
    if not _valid(entry):
        return dataclasses.replace(info, extra={**info.extra, "facts": "estimated"})
    extra = {**info.extra, "facts": "measured"}
    extra.update({k: round(float(entry[k]), 2 if k.endswith("_ns") else 1)
                  for k in _MEASURED[2:] if k in entry and k != "bandwidth_gbs"})  # fmt: skip
    if "peak_gflops_core" in entry:
        extra["peak_gflops_core"] = round(float(entry["peak_gflops_core"]), 1)
    return dataclasses.replace(
        info,
        peak_gflops=round(float(entry["peak_gflops"]), 1),
        bandwidth_gbs=round(float(entry["bandwidth_gbs"]), 1),
        extra=extra,
    )
