"""Tune matmul on CUDA and compare it with cupy's matmul (cuBLAS). Needs a CUDA GPU.

    python benchmarks/cuda_matmul.py [--n 1024] [--trials 200] [--target "cuda"] [--log LOG]

Prints, measured in this run: the best tuned kernel's time and GFLOP/s, cuBLAS's, their ratio, and
the default GPU schedule's. Without a GPU it says so and exits 0 (CI runs it nowhere).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--target", default="cuda")
    ap.add_argument("--log", default=None)
    a = ap.parse_args()
    from autosched.hai.cuda import gpu_count

    if gpu_count() == 0:
        print("cuda_matmul: no CUDA GPU here; nothing to measure")
        return 0
    import cupy as cp

    from autosched.build import build
    from autosched.search_space.gpu_sketch import default_gpu_schedule
    from autosched.search_space.schedule import replay
    from autosched.te.workload import load_op_file
    from autosched.tune import TuneOptions, Tuner

    (wl,) = load_op_file(ROOT / "examples" / "matmul.py")
    inst = wl.instantiate(M=a.n, N=a.n, K=a.n)
    flops = inst.flop_count()
    log = a.log or str(Path(tempfile.mkdtemp()) / "cuda_matmul.jsonl")
    opts = TuneOptions(trials=a.trials, batch_size=a.batch_size, baseline=False)
    (task,) = Tuner([inst], a.target, log, opts).run()
    arrays = [np.random.default_rng(0).standard_normal(t.shape).astype("float32") for t in inst.tensors]
    default = build(default_gpu_schedule(list(inst.outputs), 256), inst.tensors, a.target)
    t_default = float(np.median(default.time(*arrays, repeat=5)))
    tuned = build(replay(list(inst.outputs), task.best_trace), inst.tensors, a.target)
    t_tuned = float(np.median(tuned.time(*arrays, repeat=10)))
    x, y = cp.asarray(arrays[0]), cp.asarray(arrays[1])
    start, end = cp.cuda.Event(), cp.cuda.Event()
    cp.matmul(x, y)
    times = []
    for _ in range(10):
        start.record()
        cp.matmul(x, y)
        end.record()
        end.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, end) * 1e-3)
    t_cublas = float(np.median(times))
    rows = [("default schedule", t_default), (f"tuned ({a.trials} trials)", t_tuned), ("cuBLAS", t_cublas)]
    for label, t in rows:
        print(f"{label:24s} {t * 1e3:9.4f} ms  {flops / t / 1e9:9.1f} GFLOP/s")
    print(f"tuned / cuBLAS speed: {t_cublas / t_tuned:.2f}x   (log: {log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
