"""Chip facts: what a chip is (caches, lanes, threads, measured peak and bandwidth), as data.

Shared vocabulary below every layer that reads it: adapters state these facts (``hai``), logs record
them (``records``), the cost model takes them as features and the search sizes tiles by them. Measured
values come from :mod:`autosched.hai.chip_facts`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .target import Target


@dataclass(frozen=True)
class ChipInfo:
    """Facts about a chip, recorded in logs and used as cost-model features."""

    name: str  # e.g. "znver4" or "NVIDIA H200"
    kind: str  # "cpu" | "gpu"
    arch: str  # LLVM cpu name, "sm_90", OpenCL device version...
    features: tuple[str, ...] = ()  # ISA features such as "avx512f"
    cores: int = 1
    vector_bits: int = 128
    l1_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 0
    shared_mem_bytes: int = 0
    max_threads_per_block: int = 1
    peak_gflops: float = 0.0  # fp32, estimated from clock x lanes x FMA units where not measured
    bandwidth_gbs: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["features"] = list(self.features)
        return d


def vector_registers(lanes: int) -> int:
    """Vector registers of an x86 core with ``lanes`` float32 lanes: AVX-512 has 32, AVX2 and SSE 16
    (conservative elsewhere)."""
    return 32 if lanes >= 16 else 16


def fingerprint_of(target: Target, chip: ChipInfo) -> str:
    """Chip identity for logs: ``"<target kind>:<arch>:<8 hex>"``, e.g. ``"llvm-cpu:haswell:1f2e3d4c"``.

    The hash covers the ISA features, vector width and target options (``-mcpu``, ``-mattr``, ...), not
    the chip's name or measured peaks, so two machines with the same chip and options agree, while
    ``llvm-cpu -mcpu=haswell`` and the native target of the same host do not. Options named in
    ``chip.extra["unhashed_options"]`` are left out (the arch identifies them).
    """
    identity = {
        "features": sorted(chip.features),
        "vector_bits": chip.vector_bits,
        # an option the arch already identifies by content is not hashed (a sim chip file's path)
        "options": sorted(
            [k, v] for k, v in target.options if k not in chip.extra.get("unhashed_options", ())
        ),
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:8]
    return f"{target.kind}:{chip.arch}:{digest}"


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
