"""What an AVX masked store (``vmaskmovps``) costs on this CPU: a chip file's ``masked_store_cycles``.

LLVM stores a min or max accumulator kept in memory (a pool's, across real loops over its taps) as a
compare and a masked store of the lanes that grew. Some cores run that store as fast as a plain one;
Zen 3 microcodes it (2026-12-07, EPYC under KVM: 4.1-7.1 ns a masked store against 0.3-0.8 for a
plain one over five runs, 12-21 cycles at 2.99 GHz; the chip file takes the least, 13). This times a
loop of independent vector stores to 16 slots (``autosched.hai.cpu_facts.measure_store_ns``, the probe
``autosched devices --chip-file`` runs on an AVX CPU without AVX-512): plain, masked, and the
read-compare-store step the pool runs, compiled by LLVM for ``--target``.

    python benchmarks/masked_store.py              # ns a store; --ghz GHZ adds cycles at that clock
    python benchmarks/masked_store.py --ghz 2.987 --target "llvm-cpu -mcpu=haswell"
"""

from __future__ import annotations

import argparse

from autosched.hai.cpu_facts import STORE_SLOTS, STORE_STEPS, measure_store_ns
from autosched.hai.registry import get_adapter


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", default="llvm-cpu", help="an llvm-cpu target (default: the host's cpu)")
    p.add_argument("--ghz", type=float, help="clock for the cycles column (default: none printed)")
    args = p.parse_args()
    adapter = get_adapter(args.target)
    lanes = adapter.vector_bits // 32
    print(f"{adapter.target} (LLVM cpu {adapter.cpu}); {STORE_SLOTS} slots of {lanes} floats, one store each")
    for step in STORE_STEPS:
        ns = measure_store_ns(adapter, step)
        cycles = f", {ns * args.ghz:5.1f} cycles" if args.ghz else ""
        print(f"  {step:14s} {ns:6.2f} ns a store{cycles}")


if __name__ == "__main__":
    main()
