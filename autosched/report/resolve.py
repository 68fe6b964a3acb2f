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


def roofline_bound(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """The attainable GFLOP/s at ``intensity`` FLOP/byte: min(peak, intensity x bandwidth).

    A fact that was not measured (0.0) leaves only the other limit; neither gives 0.0 (no bound).
    """
    limits = [x for x in (peak_gflops, intensity * bandwidth_gbs if bandwidth_gbs > 0 else 0.0) if x > 0]
    return min(limits) if limits else 0.0
