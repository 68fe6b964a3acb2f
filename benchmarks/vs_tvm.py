"""autosched vs TVM MetaSchedule at the same trial budgets, on the same machine, in one run.

The four workloads of ``search_efficiency.py`` are written in both DSLs with the same math and
shapes. For each budget (64 and 256 trials by default) both tuners run; the script prints best
GFLOP/s, the ratio autosched / MetaSchedule and the tuning wall time of each. MetaSchedule's
checkpoints come from its own database (its runner's times, in trial order); its final best is
re-timed here, in this process.

Needs ``pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost psutil cloudpickle
tornado`` (ffi 0.1.15.post2 segfaults inside MetaSchedule); without TVM it says so and exits 0.

    TVM_NUM_THREADS=2 python benchmarks/vs_tvm.py --trials 64,256
    python benchmarks/vs_tvm.py --quick                  # tiny sizes, 16 trials: checks the script
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_conv2d, make_dense, make_matmul, make_softmax
from autosched.tune import TuneOptions, Tuner

INSTALL = (
    "pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post1 xgboost psutil cloudpickle tornado"
)
FULL = {"matmul": (1024, 1024, 1024), "conv2d": (1, 64, 56, 56, 64), "softmax": (4096, 1024),
        "dense": (512, 1024, 1024)}  # fmt: skip
QUICK = {"matmul": (64, 64, 64), "conv2d": (1, 8, 14, 14, 16), "softmax": (64, 128), "dense": (32, 64, 64)}


def autosched_tensors(name: str, s: tuple) -> list:
    if name == "matmul":
        return make_matmul(*s)
    if name == "conv2d":
        n, c, h, w, k = s
        return make_conv2d(n, c, h, w, k, 3, 3, stride=1, padding=1)
    if name == "softmax":
        return make_softmax(s)
    return make_dense(*s, bias=True, activation="relu")


def tvm_tensors(name: str, s: tuple) -> list:
    """The same computations in TVM's te (NCHW conv with zero padding, dense as X @ W^T + b)."""
    import tvm
    from tvm import te

    tir = getattr(tvm, "tir", None) or tvm.tirx  # renamed in newer TVM
    zero = tir.const(0.0, "float32")
    if name == "matmul":
        m, n, kk = s
        a, b = te.placeholder((m, kk), name="A"), te.placeholder((kk, n), name="B")
        k = te.reduce_axis((0, kk), name="k")
        return [a, b, te.compute((m, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")]
    if name == "conv2d":
        n, c, h, w, kf = s
        data, weight = te.placeholder((n, c, h, w), name="data"), te.placeholder((kf, c, 3, 3), name="weight")
        pad = te.compute(
            (n, c, h + 2, w + 2),
            lambda b, ci, y, x: te.if_then_else(
                te.all(y >= 1, y <= h, x >= 1, x <= w), data[b, ci, y - 1, x - 1], zero
            ),
            name="pad",
        )
        rc, ry, rx = te.reduce_axis((0, c), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
        out = te.compute(
            (n, kf, h, w),
            lambda b, f, y, x: te.sum(pad[b, rc, y + ry, x + rx] * weight[f, rc, ry, rx], axis=[rc, ry, rx]),
            name="conv2d",
        )
        return [data, weight, out]
    if name == "softmax":
        m, n = s
        x = te.placeholder((m, n), name="x")
        k1, k2 = te.reduce_axis((0, n), "k1"), te.reduce_axis((0, n), "k2")
        mx = te.compute((m,), lambda i: te.max(x[i, k1], axis=k1), name="maxelem")
        ex = te.compute((m, n), lambda i, j: te.exp(x[i, j] - mx[i]), name="exp")
        sm = te.compute((m,), lambda i: te.sum(ex[i, k2], axis=k2), name="expsum")
        return [x, te.compute((m, n), lambda i, j: ex[i, j] / sm[i], name="softmax")]
    m, n, kk = s
    x, w, b = (
        te.placeholder((m, kk), name="X"),
        te.placeholder((n, kk), name="W"),
        te.placeholder((n,), name="b"),
    )
    k = te.reduce_axis((0, kk), name="k")
    d = te.compute((m, n), lambda i, j: te.sum(x[i, k] * w[j, k], axis=k), name="dense")
    return [x, w, b, te.compute((m, n), lambda i, j: tir.max(d[i, j] + b[j], zero), name="relu")]


def run_autosched(name: str, s: tuple, budget: int, args: argparse.Namespace, work: Path) -> dict:
    inst = WorkloadInstance(name, {}, tuple(autosched_tensors(name, s)))
    opts = TuneOptions(trials=budget, batch_size=args.batch_size, seed=args.seed, baseline=False)
    start = time.perf_counter()
    (task,) = Tuner([inst], "llvm-cpu", work / f"autosched_{name}_{budget}.jsonl", opts).run()
    wall = time.perf_counter() - start
    flops = inst.flop_count()
    return {"gflops": flops / task.best_cost / 1e9 if math.isfinite(task.best_cost) else 0.0, "wall": wall,
            "history": task.history, "flops": flops}  # fmt: skip


def _records_in_order(work_dir: Path) -> list[float]:
    """Mean run seconds of each MetaSchedule record, in the order they were measured (inf: failed)."""
    out = []
    for path in sorted(work_dir.glob("*tuning_record*.json")):
        for line in path.read_text().splitlines():
            try:
                rec = json.loads(line)[1]
                secs = [float(x) for x in (rec[1] or [])]
            except (ValueError, IndexError, TypeError):
                continue
            ok = secs and max(secs) < 1e9
            out.append(sum(secs) / len(secs) if ok else math.inf)
    return out


def run_tvm(name: str, s: tuple, budget: int, args: argparse.Namespace, work: Path) -> dict:
    import tvm
    from tvm import te

    try:
        from tvm.s_tir import meta_schedule as ms
    except ImportError:  # older TVM
        from tvm import meta_schedule as ms  # type: ignore[no-redef]

    tensors = tvm_tensors(name, s)
    func = te.create_prim_func(tensors)
    target = tvm.target.Target({"kind": "llvm", "mcpu": args.mcpu, "num-cores": args.cores})
    work_dir = work / f"tvm_{name}_{budget}"
    start = time.perf_counter()
    mod = tvm.IRModule({"main": func})
    database = ms.tir_integration.tune_tir(
        mod=mod, target=target, work_dir=str(work_dir), max_trials_global=budget,
        num_trials_per_iter=min(64, budget),
        builder=ms.builder.LocalBuilder(timeout_sec=args.tvm_build_timeout),
    )  # fmt: skip
    sch = ms.tir_integration.compile_tir(database, mod, target)  # the best schedule in the database
    wall = time.perf_counter() - start
    flops = WorkloadInstance(name, {}, tuple(autosched_tensors(name, s))).flop_count()
    costs = _records_in_order(work_dir)
    history = list(np.minimum.accumulate(costs)) if costs else []
    retimed = math.inf
    if sch is not None:
        build = getattr(tvm, "compile", None) or tvm.build
        lib = build(sch.mod, target=target)
        dev = tvm.cpu(0)
        make = getattr(tvm.runtime, "tensor", None) or tvm.nd.array
        rng = np.random.default_rng(0)
        arrays = [make(rng.random([int(d) for d in t.shape]).astype("float32"), dev) for t in tensors]
        rt_mod = lib.jit() if hasattr(lib, "jit") else lib  # TVM >= 0.20: an Executable to JIT first
        timer = rt_mod.time_evaluator("main", dev, number=args.number, repeat=args.repeat)
        retimed = float(np.median(timer(*arrays).results))
    return {"gflops": flops / retimed / 1e9 if math.isfinite(retimed) else 0.0, "wall": wall,
            "history": history, "flops": flops}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and 16 trials")
    p.add_argument("--workloads", default=",".join(FULL))
    p.add_argument("--trials", help="comma-separated budgets (default 64,256; quick 16)")
    p.add_argument(
        "--batch-size",
        type=int,
        default=TuneOptions.batch_size,
        help="autosched candidates per round (TVM: 64)",
    )
    p.add_argument("--mcpu", default="znver4")
    p.add_argument(
        "--tvm-build-timeout", type=float, default=30.0,
        help="seconds MetaSchedule may spend building one candidate (its default, 30; on a slow day "
        "every dense build here ran past it and no trial finished)",
    )  # fmt: skip
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    p.add_argument("--number", type=int, default=10)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--work-dir", help="keep logs and TVM databases here (default: a temporary directory)")
    args = p.parse_args(argv)
    try:
        import tvm  # noqa: F401
    except ImportError:
        print(f"vs_tvm: apache-tvm is not installed, nothing to compare; install it with\n  {INSTALL}")
        return 0
    if "TVM_NUM_THREADS" not in os.environ:
        print(f"note: TVM_NUM_THREADS is not set; TVM may use one thread (set it to {args.cores})")
    sizes = QUICK if args.quick else FULL
    budgets = [int(x) for x in (args.trials or ("16" if args.quick else "64,256")).split(",")]
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="autosched_vs_tvm_"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    for name in [w.strip() for w in args.workloads.split(",") if w.strip()]:
        if name not in sizes:
            p.error(f"unknown workload {name!r}; known: {', '.join(sizes)}")
        for budget in budgets:
            ours = run_autosched(name, sizes[name], budget, args, work)
            theirs = run_tvm(name, sizes[name], budget, args, work)
            ratio = ours["gflops"] / theirs["gflops"] if theirs["gflops"] else math.inf
            speeds = [f"{ours['gflops']:.1f}", f"{theirs['gflops']:.1f}", f"{ratio:.2f}"]
            rows.append([name, str(budget), *speeds, f"{ours['wall']:.0f}", f"{theirs['wall']:.0f}"])
            print(f"# {' '.join(rows[-1])}", flush=True)
    head = ["workload", "trials", "autosched GFLOP/s", "MetaSchedule GFLOP/s", "ratio", "ours s", "TVM s"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows)]
    print()
    for line in [head, *rows]:
        print("  ".join(x.rjust(w) for x, w in zip(line, widths)))
    print("ratio = autosched / MetaSchedule best GFLOP/s at the same budget (> 1: autosched is faster)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
