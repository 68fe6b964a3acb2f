"""From a record (or a library's manifest entry) back to its workload: tensors, FLOP and bytes.

A tuning record names its workload and arguments; the report needs the tensors themselves to lower the
best schedule and to place a kernel on the roofline. Workloads come from the registry: the op library's
(``autosched/ops/workloads.py``), op files passed with ``--op``, and any registered in this process.
A workload whose structure changed since it was tuned has another key, and is not used.

Example::

    found = resolve_workload("ops_matmul", {"M": 64, "N": 64, "K": 64, "dtype": "float32"}, key)
    if isinstance(found, str):
        print("not placed:", found)           # why it could not be resolved
    else:
        intensity = found.flop_count() / compulsory_bytes(found.tensors)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import AutoschedError
from ..te.workload import REGISTRY, WorkloadInstance, load_op_file


def load_workloads(op_files: Sequence[str] = ()) -> list[str]:
    """Register the op library's workloads and those of ``op_files``; returns a note per file that failed."""
    from ..ops import workloads as _ops_workloads  # noqa: F401  (registers ops_*)

    notes = []
    for path in op_files:
        try:
            load_op_file(path)
        except (AutoschedError, OSError) as e:
            notes.append(f"--op {path}: not loaded ({e})")
    return notes


def resolve_workload(name: str, args: dict[str, Any], key: str) -> WorkloadInstance | str:
    """The registered workload ``name`` built with ``args`` if its key is ``key``; else why not (a str)."""
    wl = REGISTRY.get(name)
    if wl is None:
        return f"workload {name!r} is not registered here (pass its op file with --op FILE)"
    try:
        inst = wl.instantiate(**args)
    except AutoschedError as e:
        return f"workload {name!r} cannot be built with the logged arguments: {e}"
    if inst.key != key:
        return (
            f"workload {name!r} with these arguments has key {inst.key[:12]} here, but the log says "
            f"{key[:12]}: the op changed since it was tuned"
        )
    return inst


def compulsory_bytes(tensors: Sequence[Any]) -> int:
    """Bytes every run must move at least: each input read once and each output written once."""
    return sum(math.prod(t.shape) * np.dtype(t.dtype).itemsize for t in tensors)


@dataclass(frozen=True)
class ChipRoof:
    """The limits of a chip as its records state them; 0.0 for a limit that was not measured.

    ``measured`` is False where the peak is the adapter's estimate (clock x lanes x FMA units): logs
    written before chip facts were measured (``chip["extra"]["facts"]`` absent or ``"estimated"``).
    """

    peak_gflops: float
    bandwidth_gbs: float
    l2_bandwidth_gbs: float = 0.0
    measured: bool = False

    def bound(self, intensity: float) -> float:
        """The attainable GFLOP/s at ``intensity`` FLOP/byte: min(peak, intensity x DRAM bandwidth).

        A limit that is not known leaves only the other; neither gives 0.0 (no bound).
        """
        slope = intensity * self.bandwidth_gbs if self.bandwidth_gbs > 0 else 0.0
        limits = [x for x in (self.peak_gflops, slope) if x > 0]
        return min(limits) if limits else 0.0

    def describe(self) -> str:
        """E.g. ``"peak 533 GFLOP/s (measured), bandwidth 38.2 GB/s"``."""
        how = "measured" if self.measured else "estimated from the clock, not measured"
        text = f"peak {self.peak_gflops:.4g} GFLOP/s ({how})" if self.peak_gflops > 0 else "peak not measured"
        text += (
            f", bandwidth {self.bandwidth_gbs:.4g} GB/s"
            if self.bandwidth_gbs > 0
            else ", bandwidth not measured"
        )
        if self.l2_bandwidth_gbs > 0:
            text += f", L2 bandwidth {self.l2_bandwidth_gbs:.4g} GB/s"
        return text


def chip_roof(chip: dict[str, Any]) -> ChipRoof:
    """The :class:`ChipRoof` of a record's or manifest's chip facts (``ChipInfo.to_json()``)."""
    extra: dict[str, Any] = chip["extra"] if isinstance(chip.get("extra"), dict) else {}

    def number(value: Any) -> float:
        return float(value) if isinstance(value, (int, float)) and value > 0 else 0.0

    return ChipRoof(
        number(chip.get("peak_gflops")),
        number(chip.get("bandwidth_gbs")),
        number(extra.get("l2_bandwidth_gbs")),
        extra.get("facts") == "measured",
    )
