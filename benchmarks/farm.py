"""Measurement farms: trials per minute and best GFLOP/s, local path vs Dask farms of 1 and 2 workers.

For one quick workload (a matmul, ``--size`` cubed) the same tuning run (same seed, strategy and
trials) is made three ways: the local measurer (no Dask), ``--cluster local:1`` and ``local:2``. Each
prints its wall time for the tuning loop (search, builds, timings and logging; the cluster's start-up
is timed apart), trials per minute and the best GFLOP/s reached at equal trials.

What it measures on a small machine: a farm times one candidate at a time per device and host (a host
lock keeps two local workers off one CPU, and builds take it shared: they run beside each other,
never beside a timing), so two local workers are not faster at timing; what they overlap is builds
with builds, and the farm pays Dask's task traffic on top (trials per minute below the local path's).

    python benchmarks/farm.py                                   # 128^3 matmul, 128 trials each
    python benchmarks/farm.py --quick                           # a smoke run: 64^3, 16 trials

Run it alone on the machine: anything else running makes the times meaningless.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def tune_once(mode: str, size: int, trials: int, batch: int, seed: int, log: Path) -> dict[str, Any]:
    from autosched.te.workload import load_op_file
    from autosched.tune import TuneOptions, Tuner

    (w,) = [w for w in load_op_file(ROOT / "examples" / "matmul.py") if w.name == "matmul"]
    inst = w.instantiate(M=size, N=size, K=size)
    options = TuneOptions(trials=trials, batch_size=batch, seed=seed, baseline=False)
    if mode == "local":
        t0 = time.perf_counter()
        tuner = Tuner([inst], "llvm-cpu", log, options)
        start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        (task,) = tuner.run()
        return _row(mode, start_s, time.perf_counter() - t0, task)
    from autosched.measure.farm import Farm

    t0 = time.perf_counter()
    with Farm.connect(mode, ["llvm-cpu"], on_note=lambda text: None) as farm:
        tuner = Tuner([inst], "llvm-cpu", log, options, measurer=farm.measurer("llvm-cpu"))
        start_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        (task,) = tuner.run()
        return _row(mode, start_s, time.perf_counter() - t0, task)


def _row(mode: str, start_s: float, loop_s: float, task: Any) -> dict[str, Any]:
    return {
        "mode": mode,
        "start_s": start_s,
        "loop_s": loop_s,
        "trials": task.trials,
        "per_min": task.trials / loop_s * 60,
        "gflops": task.best_gflops,
        "failures": sum(task.errors.values()),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--size", type=int, default=128, help="M = N = K of the matmul (default 128)")
    p.add_argument("--trials", type=int, default=128, help="trials of each run (default 128)")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--modes", nargs="+", default=["local", "local:1", "local:2"],
                   help="local (no Dask) and/or local:N farms (default: local local:1 local:2)")  # fmt: skip
    p.add_argument("--quick", action="store_true", help="a smoke run: 64^3, 16 trials, batches of 8")
    ns = p.parse_args(argv)
    if ns.quick:
        ns.size, ns.trials, ns.batch_size = 64, 16, 8
    rows = []
    with tempfile.TemporaryDirectory(prefix="autosched-farm-bench-") as tmp:
        for mode in ns.modes:
            log = Path(tmp) / f"{mode.replace(':', '_')}.jsonl"
            rows.append(tune_once(mode, ns.size, ns.trials, ns.batch_size, ns.seed, log))
            r = rows[-1]
            print(f"{r['mode']:>8}: {r['trials']} trials in {r['loop_s']:.1f} s", file=sys.stderr)
    print(f"matmul {ns.size}^3 on llvm-cpu, {ns.trials} trials, batch {ns.batch_size}, seed {ns.seed}")
    head = ("measurer", "start s", "loop s", "trials/min", "best GFLOP/s", "failures")
    print(" ".join(f"{h:>{w}}" for h, w in zip(head, (10, 8, 8, 11, 13, 9))))
    for r in rows:
        print(f"{r['mode']:>10} {r['start_s']:8.1f} {r['loop_s']:8.1f} {r['per_min']:11.1f} "
              f"{r['gflops']:13.1f} {r['failures']:9d}")  # fmt: skip
    print("loop s: the tuning loop (search, builds, timings, log); start s: measurer or cluster start-up.")
    print("A farm times one candidate at a time per host and device; its builds never overlap a timing.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
