"""Model-guided (evolutionary + XGBoost) vs random search at equal trials, on real measurements.

For matmul 1024^3, a ResNet 3x3 conv2d (56x56x64), softmax 4096x1024 and dense+bias+relu
(512x1024x1024), prints in one run: best GFLOP/s after each checkpoint (64, 256, 1000 trials),
trials to reach 90% of the strategy's own final best and of the best either strategy found, the
trials model-guided search needs to reach random's final best (the goal: at most a third of
random's), and tuning seconds per trial.

    python benchmarks/search_efficiency.py                     # the full run: hours on two cores
    python benchmarks/search_efficiency.py --quick             # tiny sizes, a few trials: a smoke test
    python benchmarks/search_efficiency.py --workloads matmul --trials 64,256 --json out.json

Timing on a machine shared with other work is meaningless: run it alone.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

from autosched.te.workload import WorkloadInstance
from autosched.topi.workloads import make_conv2d, make_dense, make_matmul, make_softmax
from autosched.tune import TuneOptions, Tuner

FULL = {
    "matmul": lambda: make_matmul(1024, 1024, 1024),
    "conv2d": lambda: make_conv2d(1, 64, 56, 56, 64, 3, 3, stride=1, padding=1),
    "softmax": lambda: make_softmax((4096, 1024)),
    "dense": lambda: make_dense(512, 1024, 1024, bias=True, activation="relu"),
}
QUICK = {
    "matmul": lambda: make_matmul(64, 64, 64),
    "conv2d": lambda: make_conv2d(1, 8, 14, 14, 16, 3, 3, stride=1, padding=1),
    "softmax": lambda: make_softmax((64, 128)),
    "dense": lambda: make_dense(32, 64, 64, bias=True, activation="relu"),
}


def trials_to(history: list[float], flops: float, target_gflops: float) -> int | None:
    """The first trial (1-based) whose best-so-far reaches ``target_gflops``."""
    for i, cost in enumerate(history, start=1):
        if math.isfinite(cost) and flops / cost / 1e9 >= target_gflops * (1 - 1e-9):
            return i
    return None


def gflops_at(history: list[float], flops: float, n: int) -> float:
    if len(history) < n or not math.isfinite(history[n - 1]):
        return 0.0
    return flops / history[n - 1] / 1e9


def tune_one(name: str, tensors: list, strategy: str, trials: int, args: argparse.Namespace, log: Path):
    inst = WorkloadInstance(name, {}, tuple(tensors))
    options = TuneOptions(
        trials=trials, batch_size=args.batch_size, strategy=strategy, seed=args.seed, baseline=False,
        num_threads=args.threads, timeout_s=args.timeout,
    )  # fmt: skip
    start = time.perf_counter()
    (task,) = Tuner([inst], args.target, log, options).run()
    wall = time.perf_counter() - start
    model = getattr(task.strategy, "model", None)
    return {
        "workload": name,
        "strategy": strategy,
        "flops": inst.flop_count(),
        "trials": task.trials,
        "history": task.history,
        "seconds": wall,
        "errors": dict(task.errors),
        "model": repr(model) if model is not None else "",
    }


def report(results: list[dict], checkpoints: list[int]) -> None:
    head = ["workload", "strategy", *(f"@{c}" for c in checkpoints), "to 90% own", "to 90% best", "s/trial"]
    rows = []
    by_wl: dict[str, list[dict]] = {}
    for r in results:
        by_wl.setdefault(r["workload"], []).append(r)
    for wl, rs in by_wl.items():
        overall = max((gflops_at(r["history"], r["flops"], len(r["history"])) for r in rs), default=0.0)
        for r in rs:
            h, f = r["history"], r["flops"]
            final = gflops_at(h, f, len(h))
            own = trials_to(h, f, 0.9 * final) if final else None
            best = trials_to(h, f, 0.9 * overall) if overall else None
            at = [f"{gflops_at(h, f, c):.1f}" if c <= len(h) else "-" for c in checkpoints]
            per_trial = f"{r['seconds'] / max(1, r['trials']):.2f}"
            rows.append([wl, r["strategy"], *at, str(own or "-"), str(best or "-"), per_trial])
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    print("best GFLOP/s after N trials; trials to reach 90% of the final best (own, and best of both)")
    for line in [head, *rows]:
        print("  ".join(str(x).rjust(w) for x, w in zip(line, widths)))
    print()
    for wl, rs in by_wl.items():
        rnd = next((r for r in rs if r["strategy"] == "random"), None)
        evo = next((r for r in rs if r["strategy"] == "evolutionary"), None)
        if rnd is None or evo is None:
            continue
        target = gflops_at(rnd["history"], rnd["flops"], len(rnd["history"]))
        t_rnd = trials_to(rnd["history"], rnd["flops"], target)
        t_evo = trials_to(evo["history"], evo["flops"], target)
        ratio = f"{t_evo / t_rnd:.2f}" if t_rnd and t_evo else "-"
        print(
            f"{wl}: random's final best {target:.1f} GFLOP/s reached by random at trial {t_rnd}, by "
            f"model-guided at trial {t_evo or 'never'} (ratio {ratio}; goal <= 0.33); {evo['model']}"
        )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes and few trials: checks the script runs")
    p.add_argument("--workloads", default=",".join(FULL), help=f"comma-separated, from {', '.join(FULL)}")
    p.add_argument("--strategies", default="random,evolutionary")
    p.add_argument("--trials", help="comma-separated checkpoints; the largest is the budget (64,256,1000)")
    p.add_argument("--batch-size", type=int, help="candidates measured per round (default: autosched tune's)")
    p.add_argument("--target", default="llvm-cpu")
    p.add_argument("--threads", type=int)
    p.add_argument("--timeout", type=float, default=10.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-dir", help="keep the tuning logs here (default: a temporary directory)")
    p.add_argument("--json", help="also write the raw results (histories included) to this file")
    args = p.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    checkpoints = [int(x) for x in (args.trials or ("8,16" if args.quick else "64,256,1000")).split(",")]
    args.batch_size = args.batch_size or (8 if args.quick else TuneOptions.batch_size)
    names = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = [w for w in names if w not in sizes]
    if unknown:
        p.error(f"unknown workload(s) {', '.join(unknown)}; known: {', '.join(sizes)}")
    log_dir = Path(args.log_dir or tempfile.mkdtemp(prefix="autosched_search_eff_"))
    results = []
    for name in names:
        for strategy in [s.strip() for s in args.strategies.split(",")]:
            log = log_dir / f"{name}_{strategy}_{args.seed}.jsonl"
            log.unlink(missing_ok=True)
            r = tune_one(name, sizes[name](), strategy, max(checkpoints), args, log)
            results.append(r)
            best = gflops_at(r["history"], r["flops"], len(r["history"]))
            took = f"{r['trials']} trials in {r['seconds']:.1f} s"
            if r["errors"]:
                took += " (failed: " + ", ".join(f"{n} {k}" for k, n in r["errors"].items()) + ")"
            print(f"# {name} {strategy}: {took}, best {best:.1f} GFLOP/s", flush=True)
    print()
    report(results, checkpoints)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
