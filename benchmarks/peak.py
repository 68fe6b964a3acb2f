"""The machine's fp32 FMA peak and memory bandwidth, measured by the loops ``autosched devices`` uses.

Run: ``python benchmarks/peak.py [--target T]``; measures afresh (never the cache), alone on the machine.
Other benchmarks import ``measure_peak_gflops`` (one core of the native target).
"""

from __future__ import annotations

import argparse

from autosched.hai.cpu_facts import measure_cpu_facts
from autosched.hai.cpu_facts import measure_peak_gflops as _peak
from autosched.hai.registry import get_adapter


def measure_peak_gflops(seconds: float = 0.3) -> float:
    """GFLOP/s of one core of the native llvm-cpu target running only vector FMAs."""
    return _peak(get_adapter("llvm-cpu"), threads=1, seconds=seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--target", default="llvm-cpu")
    ns = p.parse_args()
    adapter = get_adapter(ns.target)
    info = adapter.info()
    facts = measure_cpu_facts(adapter, info.cores, info.l2_bytes, info.l3_bytes)
    print(f"{ns.target}: {info.name}, {info.cores} cores, {info.vector_bits}-bit vectors")
    print(f"fp32 FMA peak, one core: {facts['peak_gflops_core']:.1f} GFLOP/s")
    print(f"fp32 FMA peak, {info.cores} cores: {facts['peak_gflops']:.1f} GFLOP/s")
    memory, l2 = facts["bandwidth_gbs"], facts["l2_bandwidth_gbs"]
    print(f"copy bandwidth, memory: {memory:.1f} GB/s; L2: {l2:.1f} GB/s")


if __name__ == "__main__":
    main()
