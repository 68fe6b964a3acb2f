"""A CPU's fp32 peak and memory bandwidth, measured with small LLVM loops compiled for the target's cpu.

- Peak: a register-only loop of independent vector FMAs (enough chains to cover latency x throughput),
  run on every core at once (Python threads: ctypes releases the GIL for the call).
- Bandwidth: a copy loop (one vector load, one vector store per step) over a buffer several times the
  last cache level (memory), over buffers of a quarter of L2 each (L2), and of twice the L2 (L3), each
  core copying its own slice. Bytes moved count the read and the write, as STREAM's copy does.
- Masked store (AVX without AVX-512): a loop of independent ``vmaskmovps`` stores on one core, the time
  of one (microcoded on some cores: a pool's max accumulator is stored so).

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


STORE_SLOTS = 16  # independent addresses: a store never waits for the one before it

# One step of the store loop (``%x``, ``%y``: two vectors; ``%q``: this step's slot), by kind
STORE_STEPS = {
    "plain store": "%v = fadd {vec} %x, %y\n  store {vec} %v, ptr %q, align 4",
    "masked store": (
        "%m = fcmp olt {vec} %x, %y\n"
        "  call void @llvm.masked.store.v{lanes}f32.p0({vec} %x, ptr %q, i32 4, <{lanes} x i1> %m)"
    ),
    # max(acc, x) kept in memory, as LLVM builds it: a load, a compare, a masked store of what grew
    "max in memory": (
        "%old = load {vec}, ptr %q, align 4\n  %m = fcmp olt {vec} %old, %x\n"
        "  %v = select <{lanes} x i1> %m, {vec} %x, {vec} %old\n  store {vec} %v, ptr %q, align 4"
    ),
}


def _store_module(step: str, lanes: int) -> str:
    vec = f"<{lanes} x float>"
    body = STORE_STEPS[step].format(vec=vec, lanes=lanes)
    return f"""
declare void @llvm.masked.store.v{lanes}f32.p0({vec}, ptr, i32, <{lanes} x i1>)
define void @stores(ptr %p, ptr %src, i64 %n) {{
entry:
  %x = load {vec}, ptr %src, align 4
  %s2 = getelementptr float, ptr %src, i64 {lanes}
  %y = load {vec}, ptr %s2, align 4
  br label %loop
loop:
  %i = phi i64 [0, %entry], [%i1, %loop]
  %slot = and i64 %i, {STORE_SLOTS - 1}
  %off = mul i64 %slot, {lanes}
  %q = getelementptr float, ptr %p, i64 %off
  {body}
  %i1 = add i64 %i, 1
  %c = icmp ult i64 %i1, %n
  br i1 %c, label %loop, label %exit
exit:
  ret void
}}"""


def measure_store_ns(adapter: Any, step: str, n: int = 2_000_000, repeat: int = 7) -> float:
    """ns a vector store of kind ``step`` (a key of :data:`STORE_STEPS`) takes in a loop of independent
    stores on one core: the least of ``repeat`` runs (a slow spell of the machine costs one run)."""
    lanes = max(4, adapter.vector_bits // 32)
    engine, fn = _jit(
        adapter, _store_module(step, lanes), "stores", None, *[ctypes.c_void_p] * 2, ctypes.c_int64
    )
    buf = np.zeros(STORE_SLOTS * lanes, np.float32)
    src = np.random.default_rng(0).random(2 * lanes, dtype=np.float32)
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn(buf.ctypes.data, src.ctypes.data, n)
        best = min(best, time.perf_counter() - t)
    if not buf.any():  # the loop must really have stored, or the figure means nothing
        raise RuntimeError(f"store probe: the {step} loop stored nothing")
    del engine
    return best / n * 1e9


def _aligned(nbytes: int) -> np.ndarray:
    raw = np.empty(nbytes + 64, dtype=np.uint8)
    offset = (-raw.ctypes.data) % 64
    return raw[offset : offset + nbytes].view(np.float32)


def l3_probe_bytes(l2_bytes: int, l3_bytes: int, cores: int) -> int:
    """Bytes a core copies to time the L3: source and destination four times its L2 (at least twice),
    all cores' together within a quarter of the L3 (others' lines, and a VM's share of a socket's L3);
    0 when no size is both (no L3, or one too small to tell from the L2)."""
    per_core = min(2 * l2_bytes, l3_bytes // (8 * max(1, cores)))
    return per_core if 0 < l2_bytes <= per_core else 0


def measure_cpu_facts(adapter: Any, cores: int, l2_bytes: int, l3_bytes: int) -> dict[str, float]:
    """Measured peak (all cores and one core), memory, L2 and L3 bandwidth (all cores) of an llvm-cpu
    target; no L3 figure where :func:`l3_probe_bytes` finds no size to time it at."""
    # Several times the last cache level, within 64-256 MiB (a VM may report a whole socket's L3)
    dram = min(max(4 * l3_bytes, 64 << 20), 256 << 20)
    facts = {
        "peak_gflops": measure_peak_gflops(adapter, threads=cores),
        "peak_gflops_core": measure_peak_gflops(adapter, threads=1),
        "bandwidth_gbs": measure_copy_gbs(adapter, dram, threads=cores),
        # source and destination together fill half of each core's L2
        "l2_bandwidth_gbs": measure_copy_gbs(adapter, max(l2_bytes // 4, 32 << 10) * cores, threads=cores),
    }
    l3 = l3_probe_bytes(l2_bytes, l3_bytes, cores)
    if l3:
        facts["l3_bandwidth_gbs"] = measure_copy_gbs(adapter, l3 * cores, threads=cores)
    features = set(adapter.features)
    if "avx" in features and "avx512f" not in features:  # vmaskmovps: AVX-512 masks its stores otherwise
        facts["masked_store_ns"] = measure_store_ns(adapter, "masked store")
    return facts
