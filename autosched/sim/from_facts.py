"""A chip file from a local target's measured facts (``autosched devices --chip-file OUT``).

The measured peak and bandwidths (``hai.chip_facts``) fix the clock (peak a core / lanes / 2 flops /
FMA units), the L2, L3 and memory bandwidths, and (AVX without AVX-512) a masked store's cycles; the
caches come from the adapter's facts. What cannot be measured cheaply (FMA latency, ports, registers)
takes the values of the ISA's usual cores, and the ``source`` says which figures are which.

Example::

    chip = chip_from_facts(measured_info(adapter), "llvm-cpu")
    write_chip(chip, "mychip.json")
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

from .chip import CacheLevel, ChipSpec, parse_chip


def chip_from_facts(info: Any, target: str, ways: dict[int, int] | None = None) -> ChipSpec:
    """``info``: a ChipInfo (hai.base) with measured ``peak_gflops`` and ``bandwidth_gbs``; ``ways``:
    the caches' associativity by level where known (sysfs), else 8, a usual value."""
    if info.kind != "cpu":
        raise ValueError(f"--chip-file writes CPU chips from measured facts; {target} is {info.kind}")
    extra = dict(info.extra or {})
    measured = extra.get("facts") == "measured"
    lanes = max(1, info.vector_bits // 32)
    avx512 = "avx512f" in info.features
    fma_units = 2
    cores = max(1, info.cores)
    peak_core = float(extra.get("peak_gflops_core") or info.peak_gflops / cores)
    clock = round(peak_core / (lanes * 2 * fma_units), 3) if peak_core > 0 else 3.0
    l2_bw = float(extra.get("l2_bandwidth_gbs", 0.0)) / cores or clock * 32
    mem_bw = float(info.bandwidth_gbs) or 20.0

    def way(level: int, size: int) -> int:  # one that does not cut the size into whole sets is a misread
        n = (ways or {}).get(level, 0)
        return n if n > 0 and size % (64 * n) == 0 else 8

    l1 = info.l1_bytes or 32 * 1024
    caches = [CacheLevel(1, l1, 64, round(clock * 64 * 2, 1), ways=way(1, l1))]
    l2 = max(info.l2_bytes, l1 * 2)
    caches.append(CacheLevel(2, l2, 64, round(l2_bw, 1), ways=way(2, l2)))
    l3_told = ""
    if info.l3_bytes > l2:
        l3_measured = float(extra.get("l3_bandwidth_gbs", 0.0)) / cores
        l3_bw = round(l3_measured or max(mem_bw / cores, l2_bw / 3), 1)
        caches.append(CacheLevel(3, info.l3_bytes, 64, l3_bw, shared=True, ways=way(3, info.l3_bytes)))
        l3_told = (
            "L3 bandwidth a core from the L3 copy probe; " if l3_measured
            else "L3 bandwidth a core an estimate (max of memory / cores, L2 / 3: no L3 probe in the facts; "
            "facts cached before it: --remeasure); "
        )  # fmt: skip
    ways_told = "read" if ways else "not reported: 8 assumed"
    how = "measured by autosched devices" if measured else "estimated (AUTOSCHED_MEASURE_CHIP=0?)"
    day = time.strftime("%Y-%m-%d", time.gmtime())
    source = (
        f"{target} on this machine, {day}: peak {peak_core:.1f} GFLOP/s a core and {mem_bw:.1f} GB/s "
        f"memory {how}; clock = peak / ({lanes} lanes x 2 x {fma_units} FMA units); caches from the "
        f"adapter (sysfs: sizes, and ways {ways_told}); L2 bandwidth a core from the L2 copy probe; "
        f"{l3_told}FMA latency 4, "
        f"{32 if avx512 else 16} vector registers, 2 loads + 1 store a cycle: usual values for the ISA"
    )
    data = {
        "name": info.name, "kind": "cpu", "isa": str(extra.get("triple", "x86_64")).split("-")[0],
        "llvm_cpu": info.arch, "features": sorted(info.features), "cores": cores,
        "simd_bits": info.vector_bits, "fma_units": fma_units, "vector_registers": 32 if avx512 else 16,
        "clock_ghz": clock, "fma_latency_cycles": 4, "caches": [c.__dict__ for c in caches],
        "memory_bandwidth_gbs": round(mem_bw, 1), "parallel_overhead_us": 0.5, "source": source,
    }  # fmt: skip
    masked_ns = float(extra.get("masked_store_ns", 0.0))  # AVX without AVX-512: one vmaskmovps
    if masked_ns > 0:
        cycles = data["masked_store_cycles"] = float(max(1, round(masked_ns * clock)))
        data["source"] = (
            f"{source}; masked store {cycles:g} cycles ({masked_ns:.2f} ns at the clock) from the store probe"
        )
    digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]
    return parse_chip(data, f"<measured {target} {digest}>")
