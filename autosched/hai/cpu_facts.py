"""A CPU's fp32 peak and memory bandwidth, measured with small LLVM loops compiled for the target's cpu.

- Peak: a register-only loop of independent vector FMAs (enough chains to cover latency x throughput),
  run on every core at once (Python threads: ctypes releases the GIL for the call).
- Bandwidth: a copy loop (one vector load, one vector store per step) over a buffer several times the
  last cache level (memory), and over buffers of a quarter of L2 each (cache), each core copying its own
  slice. Bytes moved count the read and the write, as STREAM's copy does.

Each figure is the best of a few runs: another process can only make a run slower, never faster.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..chip import vector_registers

MAX_CHAINS = 24  # independent FMA accumulators per core: covers latency x throughput on every x86 seen


def fma_chains(lanes: int) -> int:
    """Accumulators that fit the vector registers beside the two constants: 24 of AVX-512's 32, 14 of
    AVX2's 16 (24 chains spilled on a 16-register Zen 3 and measured half its peak)."""
    return min(MAX_CHAINS, vector_registers(lanes) - 2)


def _peak_module(lanes: int) -> str:
    chains = fma_chains(lanes)
    vec = f"<{lanes} x float>"
    lines = [
        f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
        "define float @peak(i64 %n) {",
        "entry:",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [0, %entry], [%i.next, %loop]",
    ]
    lines += [f"  %a{c} = phi {vec} [zeroinitializer, %entry], [%b{c}, %loop]" for c in range(chains)]
    one = ", ".join(["float 0x3FF0000000000000"] * lanes)
    half = ", ".join(["float 0x3FE0000000000000"] * lanes)
    lines += [
        f"  %b{c} = call {vec} @llvm.fma.v{lanes}f32({vec} <{half}>, {vec} %a{c}, {vec} <{one}>)"
        for c in range(chains)
    ]
    lines += ["  %i.next = add i64 %i, 1", "  %done = icmp eq i64 %i.next, %n",
              "  br i1 %done, label %exit, label %loop", "exit:"]  # fmt: skip
    acc = "%b0"
    for c in range(1, chains):
        lines.append(f"  %s{c} = fadd {vec} {acc}, %b{c}")
        acc = f"%s{c}"
    lines += [f"  %r = extractelement {vec} {acc}, i32 0", "  ret float %r", "}"]
    return "\n".join(lines)


def _copy_module(lanes: int) -> str:
    vec = f"<{lanes} x float>"
    return "\n".join([
        "define void @copy(ptr noalias %src, ptr noalias %dst, i64 %nvec, i64 %reps) {",
        "entry:",
        "  br label %rep",
        "rep:",
        "  %r = phi i64 [0, %entry], [%r.next, %again]",
        "  br label %loop",
        "loop:",
        "  %i = phi i64 [0, %rep], [%i.next, %loop]",
        f"  %ps = getelementptr {vec}, ptr %src, i64 %i",
        f"  %pd = getelementptr {vec}, ptr %dst, i64 %i",
        f"  %v = load {vec}, ptr %ps, align 64",
        f"  store {vec} %v, ptr %pd, align 64",
        "  %i.next = add i64 %i, 1",
        "  %done = icmp eq i64 %i.next, %nvec",
        "  br i1 %done, label %again, label %loop",
        "again:",
        "  %r.next = add i64 %r, 1",
        "  %stop = icmp eq i64 %r.next, %reps",
        "  br i1 %stop, label %exit, label %rep",
        "exit:",
        "  ret void",
        "}",
    ])  # fmt: skip


def _jit(adapter: Any, source: str, name: str, restype: Any, *argtypes: Any) -> tuple[Any, Any]:
    """(engine, cfunc) for ``source`` compiled for the adapter's cpu and features; keep the engine."""
    import llvmlite.binding as llvm

    target = llvm.Target.from_triple(adapter.triple)
    tm = target.create_target_machine(cpu=adapter.cpu, features=adapter.llvm_features, opt=3)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(source), tm)
    engine.finalize_object()
    return engine, ctypes.CFUNCTYPE(restype, *argtypes)(engine.get_function_address(name))


def _on_all_cores(threads: int, work: Callable[[int], None]) -> float:
    """Seconds for ``threads`` threads running ``work(thread_index)`` at once."""
    barrier = threading.Barrier(threads + 1)

    def run(t: int) -> None:
        barrier.wait()
        work(t)

    pool = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    barrier.wait()
    start = time.perf_counter()
    for th in pool:
        th.join()
    return time.perf_counter() - start


def measure_peak_gflops(adapter: Any, threads: int = 1, seconds: float = 0.3) -> float:
    """fp32 GFLOP/s of ``threads`` cores running only vector FMAs (2 flops per lane)."""
    lanes = max(4, adapter.vector_bits // 32)
    engine, fn = _jit(adapter, _peak_module(lanes), "peak", ctypes.c_float, ctypes.c_int64)
    n = 1 << 19
    fn(n)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        dt = _on_all_cores(threads, lambda t: fn(n))
        best = max(best, threads * n * fma_chains(lanes) * lanes * 2 / dt / 1e9)
    del engine
    return best


def measure_copy_gbs(adapter: Any, nbytes: int, threads: int = 1, seconds: float = 0.3) -> float:
    """GB/s of ``threads`` cores copying ``nbytes`` (read + write counted), split evenly among them."""
    lanes = max(4, adapter.vector_bits // 32)
    step = lanes * 4 * threads
    nbytes = max(step, nbytes // step * step)
    engine, fn = _jit(
        adapter, _copy_module(lanes), "copy", None, *[ctypes.c_void_p] * 2, *[ctypes.c_int64] * 2
    )
    src, dst = _aligned(nbytes), _aligned(nbytes)
    src[:] = np.arange(src.size, dtype=np.float32)  # touches every page
    dst[:] = 0.0
    per = nbytes // threads  # bytes per thread, a whole number of vectors
    base_s, base_d = src.ctypes.data, dst.ctypes.data
    reps = max(1, (64 << 20) // nbytes)  # small buffers: copied again and again, so threads cost nothing

    def work(t: int) -> None:
        fn(base_s + t * per, base_d + t * per, per // (lanes * 4), reps)

    _on_all_cores(threads, work)
    best, deadline, runs = 0.0, time.perf_counter() + seconds, 0
    while runs < 3 or time.perf_counter() < deadline:
        best = max(best, 2 * nbytes * reps / _on_all_cores(threads, work) / 1e9)
        runs += 1
    if not np.array_equal(src, dst):  # the loop must really have copied, or the figure means nothing
        raise RuntimeError("bandwidth probe: the copy loop did not copy its buffer")
    del engine
    return best


def _aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    offset = (-raw.ctypes.data) % 64
    return raw[offset : offset + nbytes].view(np.float32)


def measure_cpu_facts(adapter: Any, cores: int, l2_bytes: int, l3_bytes: int) -> dict[str, float]:
    """Measured peak (all cores and one core), memory and L2 bandwidth (all cores) of an llvm-cpu target."""
    # Several times the last cache level, within 64-256 MiB (a VM may report a whole socket's L3)
    dram = min(max(4 * l3_bytes, 64 << 20), 256 << 20)
    return {
        "peak_gflops": measure_peak_gflops(adapter, threads=cores),
        "peak_gflops_core": measure_peak_gflops(adapter, threads=1),
        "bandwidth_gbs": measure_copy_gbs(adapter, dram, threads=cores),
        # source and destination together fill half of each core's L2
        "l2_bandwidth_gbs": measure_copy_gbs(adapter, max(l2_bytes // 4, 32 << 10) * cores, threads=cores),
    }
