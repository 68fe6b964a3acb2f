"""What an AVX masked store (``vmaskmovps``) costs on this CPU, for a chip file's ``masked_store_cycles``.

LLVM stores a min or max accumulator kept in memory (a pool's, across real loops over its taps) as a
compare and a masked store of the lanes that grew. Some cores run that store as fast as a plain one;
Zen 3 microcodes it (2026-12-07, EPYC under KVM: 4.1-7.1 ns a masked store against 0.3-0.8 for a
plain one over five runs, 12-21 cycles at 2.99 GHz; the chip file takes the least, 13). This times a
loop of independent 256-bit stores to 16 slots, plain and masked, and the read-compare-store step the
pool runs, compiled by LLVM for ``--cpu`` (default the host's).

    python benchmarks/masked_store.py              # ns a store; --ghz GHZ adds cycles at that clock
    python benchmarks/masked_store.py --ghz 2.987
"""

from __future__ import annotations

import argparse
import ctypes
import time
from typing import Any

import numpy as np

from autosched.hai.llvm_host import llvm_binding

SLOTS = 16  # independent addresses: a store never waits for the one before it

STEP = {
    "plain store": "%v = fadd <8 x float> %x, %y\n  store <8 x float> %v, ptr %q, align 4",
    "masked store": (
        "%m = fcmp olt <8 x float> %x, %y\n"
        "  call void @llvm.masked.store.v8f32.p0(<8 x float> %x, ptr %q, i32 4, <8 x i1> %m)"
    ),
    # max(acc, x) kept in memory, as LLVM builds it: a load, a compare, a masked store of what grew
    "max in memory": (
        "%old = load <8 x float>, ptr %q, align 4\n  %m = fcmp olt <8 x float> %old, %x\n"
        "  %v = select <8 x i1> %m, <8 x float> %x, <8 x float> %old\n  store <8 x float> %v, ptr %q, align 4"
    ),
}


def module(step: str) -> str:
    return f"""
declare void @llvm.masked.store.v8f32.p0(<8 x float>, ptr, i32, <8 x i1>)
define void @f(ptr %p, ptr %src, i64 %n) {{
entry:
  %x = load <8 x float>, ptr %src, align 4
  %s2 = getelementptr float, ptr %src, i64 8
  %y = load <8 x float>, ptr %s2, align 4
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %slot = and i64 %i, {SLOTS - 1}
  %off = mul i64 %slot, 8
  %q = getelementptr float, ptr %p, i64 %off
  {step}
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}}"""


def ns_per_store(machine: Any, step: str, n: int = 2_000_000, repeat: int = 7) -> tuple[float, str]:
    """``machine()`` makes a TargetMachine: the engine owns (and frees) the one it is given."""
    llvm = llvm_binding()
    mod = llvm.parse_assembly(module(step))
    mod.verify()
    asm = machine().emit_assembly(mod)
    engine = llvm.create_mcjit_compiler(mod, machine())
    engine.finalize_object()
    # the store's instruction: a move whose destination (AT&T: the last operand) is memory
    store = next((ln.split()[0] for ln in asm.splitlines() if "mov" in ln and ln.rstrip().endswith(")")), "?")
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)(
        engine.get_function_address("f")
    )
    buf = np.zeros(SLOTS * 8, np.float32)
    src = np.random.default_rng(0).random(16, dtype=np.float32)
    best = float("inf")
    for _ in range(repeat):  # the least of several: a slow spell of the machine costs one repeat
        t = time.perf_counter()
        fn(buf.ctypes.data, src.ctypes.data, n)
        best = min(best, time.perf_counter() - t)
    del engine  # frees its code and its TargetMachine
    return best / n * 1e9, store


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cpu", help="LLVM cpu name (default: the host's)")
    p.add_argument("--ghz", type=float, help="clock for the cycles column (default: none printed)")
    args = p.parse_args()
    llvm = llvm_binding()
    host = llvm.get_host_cpu_name()
    cpu = args.cpu or host
    features = llvm.get_host_cpu_features().flatten() if cpu == host else ""
    target = llvm.Target.from_default_triple()

    def machine() -> Any:
        return target.create_target_machine(cpu=cpu, features=features, opt=2)

    print(f"LLVM cpu {cpu} (host {host}); {SLOTS} slots of 8 floats, independent stores")
    for name, step in STEP.items():
        ns, insn = ns_per_store(machine, step)
        cycles = f", {ns * args.ghz:5.1f} cycles" if args.ghz else ""
        print(f"  {name:14s} {ns:6.2f} ns a store{cycles}  ({insn})")


if __name__ == "__main__":
    main()
