"""Load time and per-call overhead of a built library, against a plain ctypes call of the same function.

    python benchmarks/library_overhead.py [--n 16] [--calls 20000]

Builds a tiny op (add of two float32 vectors of --n elements, default schedule) into a temporary
directory, then reports, measured in this run:
  - load: ``import autosched`` and ``autosched.load(DIR)`` in a fresh process;
  - per call: ``lib.add(a, b, c)``, ``lib.add(a, b)`` (allocates c), ``autosched.ops.add(a, b)`` (warm),
    and ctypes calls of the same symbol (pointers precomputed, and ``.ctypes.data`` per call).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import timeit
import warnings
from pathlib import Path

import numpy as np

LOAD_PROBE = """
import json, sys, time
t0 = time.perf_counter()
import autosched
t1 = time.perf_counter()
lib = autosched.load(sys.argv[1])
t2 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "load_s": t2 - t1}))
"""


def per_call_us(fn, calls: int, repeat: int = 5) -> float:
    times = timeit.repeat(fn, number=calls, repeat=repeat)
    return statistics.median(times) / calls * 1e6


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=16, help="vector length of the tiny op")
    p.add_argument("--calls", type=int, default=20000)
    ns = p.parse_args()

    import autosched
    from autosched.ops.workloads import ops_binary
    from autosched.runtime.export import export_library

    inst = ops_binary.workload.instantiate(op="add", shape_a=(ns.n,), shape_b=(ns.n,))
    with tempfile.TemporaryDirectory(prefix="autosched-bench-") as tmp:
        t0 = time.perf_counter()
        res = export_library([inst], tmp, name="tiny", allow_default=True)
        build_s = time.perf_counter() - t0
        name = res.functions[0].name

        probe = [sys.executable, "-c", LOAD_PROBE, tmp]
        loads = [
            json.loads(subprocess.run(probe, check=True, capture_output=True, text=True).stdout)
            for _ in range(3)
        ]
        t0 = time.perf_counter()
        lib = autosched.load(tmp)
        load_warm_s = time.perf_counter() - t0
        f = getattr(lib, name)

        a, b = np.random.rand(ns.n).astype("float32"), np.random.rand(ns.n).astype("float32")
        c = np.empty_like(a)
        raw = ctypes.CDLL(str(Path(tmp) / "libtiny.so"))[name]
        raw.argtypes, raw.restype = [ctypes.c_void_p] * 3, None
        pa, pb, pc = a.ctypes.data, b.ctypes.data, c.ctypes.data
        os.environ.setdefault("AUTOSCHED_CACHE_DIR", str(Path(tmp) / "cache"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            autosched.ops.add(a, b)  # compile once: the timed calls are warm

        rows = [
            ("ctypes, pointers precomputed", per_call_us(lambda: raw(pa, pb, pc), ns.calls)),
            ("ctypes, .ctypes.data per call",
             per_call_us(lambda: raw(a.ctypes.data, b.ctypes.data, c.ctypes.data), ns.calls)),
            ("lib.add(a, b, c)  (checked)", per_call_us(lambda: f(a, b, c), ns.calls)),
            ("lib.add(a, b)     (allocates c)", per_call_us(lambda: f(a, b), ns.calls)),
            ("autosched.ops.add(a, b) (warm)", per_call_us(lambda: autosched.ops.add(a, b), ns.calls)),
        ]  # fmt: skip
        assert np.allclose(f(a, b), a + b)

    print(f"tiny op: add of two float32[{ns.n}] (default schedule); built in {build_s * 1e3:.0f} ms")
    print(f"fresh process: import autosched {min(x['import_s'] for x in loads) * 1e3:.1f} ms, "
          f"autosched.load {min(x['load_s'] for x in loads) * 1e3:.2f} ms (best of 3); "
          f"load again in this process {load_warm_s * 1e3:.2f} ms")  # fmt: skip
    base = rows[0][1]
    for label, us in rows:
        print(f"  {label:34s} {us:7.2f} us/call  ({us / base:4.1f}x, +{us - base:5.2f} us)")


if __name__ == "__main__":
    main()
