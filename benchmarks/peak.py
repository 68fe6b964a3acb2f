"""The machine's fp32 FMA peak per core, measured by a register-only loop of vector FMAs.

Run: ``python benchmarks/peak.py``. Other benchmarks import ``measure_peak_gflops``.
"""

from __future__ import annotations

import ctypes
import time

import llvmlite.binding as llvm

CHAINS = 24  # independent accumulators: enough to cover the FMA latency x throughput


def _module(lanes: int) -> str:
    vec = f"<{lanes} x float>"
    lines = [
        f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
        "define float @peak(i64 %n) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [0, %entry], [%i.next, %loop]",
    ]
    for c in range(CHAINS):
        lines.append(f"  %a{c} = phi {vec} [zeroinitializer, %entry], [%b{c}, %loop]")
    one = ", ".join(["float 0x3FF0000000000000"] * lanes)
    half = ", ".join(["float 0x3FE0000000000000"] * lanes)
    for c in range(CHAINS):
        lines.append(
            f"  %b{c} = call {vec} @llvm.fma.v{lanes}f32({vec} <{half}>, {vec} %a{c}, {vec} <{one}>)"
        )
    lines += [
        "  %i.next = add i64 %i, 1",
        "  %done = icmp eq i64 %i.next, %n",
        "  br i1 %done, label %exit, label %loop",
        "exit:",
    ]
    acc = "%b0"
    for c in range(1, CHAINS):
        lines.append(f"  %s{c} = fadd {vec} {acc}, %b{c}")
        acc = f"%s{c}"
    lines += [f"  %r = extractelement {vec} {acc}, i32 0", "  ret float %r", "}"]
    return "\n".join(lines)


def measure_peak_gflops(lanes: int = 16, seconds: float = 0.3) -> float:
    """GFLOP/s of one core running only vector FMAs (2 flops per lane)."""
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten()
    )
    mod = llvm.parse_assembly(_module(lanes))
    engine = llvm.create_mcjit_compiler(mod, tm)
    engine.finalize_object()
    fn = ctypes.CFUNCTYPE(ctypes.c_float, ctypes.c_int64)(engine.get_function_address("peak"))
    n = 1 << 20
    fn(n)
    best = 0.0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        start = time.perf_counter()
        fn(n)
        dt = time.perf_counter() - start
        best = max(best, n * CHAINS * lanes * 2 / dt / 1e9)
    return best


if __name__ == "__main__":
    print(f"fp32 FMA peak, one core: {measure_peak_gflops():.1f} GFLOP/s")
